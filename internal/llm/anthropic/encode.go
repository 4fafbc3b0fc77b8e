package anthropic

import (
	"bytes"
	"encoding/json"
	"slices"

	"github.com/dsh-dev/dsh/internal/llm"
)

// encodedBlock is one wire content block, encoded once.
type encodedBlock struct {
	raw       []byte
	result    bool // a tool_result, which leads its user message
	cacheable bool
}

// encoded is the wire form of one history message: its tool results and
// its other blocks, which messages puts on either side of a turn.
type encoded struct {
	key             llm.Identity
	assistant       bool
	results, others []encodedBlock
}

// encodeState is what encodeRequest keeps in an llm.EncodeCache: the
// encoded messages of the last request, in order. A request that
// extends it encodes only its new messages.
type encodeState struct {
	msgs []encoded
}

// messagesKey splits a body encoded with nil Messages around them. What
// precedes them (model, max_tokens, system) holds quotes only escaped
// inside JSON strings, so the first match is the member itself.
var messagesKey = []byte(`,"messages":null,`)

// cacheMark is the cache_control member setCacheBreakpoints adds; it is
// the last field of contentBlock.
var cacheMark = []byte(`,"cache_control":{"type":"ephemeral"}}`)

// encodeRequest returns the request body: the bytes json.Marshal gives
// for buildRequest(req), with each history message converted and encoded
// only once per req.EncodeCache.
func encodeRequest(req llm.Request) (json.RawMessage, error) {
	head := req
	head.Messages = nil
	frame, err := json.Marshal(buildRequest(head))
	if err != nil {
		return nil, err
	}
	cut := bytes.Index(frame, messagesKey)
	var st *encodeState
	if req.EncodeCache != nil {
		req.EncodeCache.Use(func(old any) any {
			s, _ := old.(*encodeState)
			if st, err = encodeMessages(s, req.Messages); err != nil {
				return nil
			}
			return st
		})
	} else {
		st, err = encodeMessages(nil, req.Messages)
	}
	if err != nil {
		return nil, err
	}

	// The turns of messages: same-role neighbours merge.
	type turn struct {
		role   string
		blocks []*encodedBlock
	}
	var turns []turn
	size := 0
	add := func(role string, bs []encodedBlock) {
		if len(bs) == 0 {
			return
		}
		if n := len(turns); n == 0 || turns[n-1].role != role {
			turns = append(turns, turn{role: role})
		}
		t := &turns[len(turns)-1]
		for i := range bs {
			t.blocks = append(t.blocks, &bs[i])
			size += len(bs[i].raw) + 1
		}
	}
	for i := range st.msgs {
		m := &st.msgs[i]
		if m.assistant {
			add("assistant", m.others)
			add("user", m.results)
		} else {
			add("user", m.results)
			add("user", m.others)
		}
	}

	out := make([]byte, 0, len(frame)+size+len(turns)*32+len(cacheMark))
	out = append(out, frame[:cut]...)
	out = append(out, `,"messages":`...)
	if len(turns) == 0 {
		out = append(out, "null"...)
	}
	for i, t := range turns {
		if t.role == "user" {
			// Tool results lead their user message.
			slices.SortStableFunc(t.blocks, func(a, b *encodedBlock) int { return blockRank(a) - blockRank(b) })
		}
		mark := -1
		if i == len(turns)-1 {
			for j := len(t.blocks) - 1; j >= 0; j-- {
				if t.blocks[j].cacheable {
					mark = j
					break
				}
			}
		}
		if i == 0 {
			out = append(out, '[')
		} else {
			out = append(out, ',')
		}
		out = append(out, `{"role":"`...)
		out = append(out, t.role...)
		out = append(out, `","content":[`...)
		for j, b := range t.blocks {
			if j > 0 {
				out = append(out, ',')
			}
			if j == mark {
				out = append(out, b.raw[:len(b.raw)-1]...)
				out = append(out, cacheMark...)
			} else {
				out = append(out, b.raw...)
			}
		}
		out = append(out, "]}"...)
		if i == len(turns)-1 {
			out = append(out, ']')
		}
	}
	out = append(out, frame[cut+len(messagesKey)-1:]...)
	return out, nil
}

func blockRank(b *encodedBlock) int {
	if b.result {
		return 0
	}
	return 1
}

// encodeMessages returns the state for msgs, reusing the encoding of the
// longest prefix of msgs that st (which may be nil) holds.
func encodeMessages(st *encodeState, msgs []llm.Message) (*encodeState, error) {
	if st == nil {
		st = &encodeState{}
	}
	keep := 0
	for keep < len(msgs) && keep < len(st.msgs) && st.msgs[keep].key == llm.IdentityOf(msgs[keep]) {
		keep++
	}
	st.msgs = st.msgs[:keep]
	for _, m := range msgs[keep:] {
		e := encoded{key: llm.IdentityOf(m), assistant: m.Role == llm.RoleAssistant}
		for _, b := range m.Content {
			var cb contentBlock
			if b.Type == llm.BlockToolResult {
				cb = toolResult(b)
			} else if w, ok := wireBlock(b, e.assistant); ok {
				cb = w
			} else {
				continue
			}
			raw, err := json.Marshal(cb)
			if err != nil {
				return nil, err
			}
			eb := encodedBlock{raw: raw, result: cb.Type == "tool_result", cacheable: cacheable(cb)}
			if eb.result {
				e.results = append(e.results, eb)
			} else {
				e.others = append(e.others, eb)
			}
		}
		st.msgs = append(st.msgs, e)
	}
	return st, nil
}
