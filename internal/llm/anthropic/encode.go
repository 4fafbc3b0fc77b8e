package anthropic

import (
	"bytes"
	"encoding/json"
	"slices"

	"github.com/dsh-dev/dsh/internal/llm"
	"github.com/dsh-dev/dsh/internal/llm/llmhttp"
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
// encoded messages of the last request, in order, and the turns that the
// first doneMsgs of them make, assembled: no later message changes them.
// A request that extends it encodes and assembles only its new messages.
//
// The history is held encoded once: a message's own encoding is dropped
// when it is assembled into done, and done grows in segments rather than
// by reallocation (an earlier body may still be reading it, and a copy
// would hold the history twice).
type encodeState struct {
	msgs []encoded
	// done is ","+turn for each of the doneTurns turns of
	// msgs[:doneMsgs], in segments of about llm.PieceSize bytes; a segment
	// only grows past the length any body holds.
	done                [][]byte
	doneMsgs, doneTurns int
	// The last request's head (see llm.Head) and the request encoded
	// without messages, and where they are cut.
	head  llm.Head
	frame []byte
	cut   int
}

// appendDone appends p to done (see llm.AppendPieces).
func (st *encodeState) appendDone(p []byte) { st.done = llm.AppendPieces(st.done, p) }

// messagesKey splits a body encoded with nil Messages around them. What
// precedes them (model, max_tokens, system) holds quotes only escaped
// inside JSON strings, so the first match is the member itself.
var messagesKey = []byte(`,"messages":null,`)

// cacheMark is the cache_control member setCacheBreakpoints adds; it is
// the last field of contentBlock.
var cacheMark = []byte(`,"cache_control":{"type":"ephemeral"}}`)

// encodeRequest returns the request body: the bytes json.Marshal gives
// for buildRequest(req), with each history message converted, encoded
// and assembled only once per req.EncodeCache.
func encodeRequest(req llm.Request) (llmhttp.Body, error) {
	var (
		frame []byte
		cut   int
		done  [][]byte
		rest  []byte
		err   error
	)
	assemble := func(old any) any {
		st, ok := old.(*encodeState)
		if !ok {
			st = &encodeState{}
		}
		if !st.head.Same(req) {
			// A new head: the system prompt, tools or options changed
			// (or this is the first request).
			head := req
			head.Messages = nil
			f, ferr := json.Marshal(buildRequest(head))
			if ferr != nil {
				err = ferr
				return nil
			}
			st.head, st.frame, st.cut = llm.HeadOf(req), f, bytes.Index(f, messagesKey)
		}
		frame, cut = st.frame, st.cut
		if cut < 0 {
			return st
		}
		if err = st.update(req.Messages); err != nil {
			return nil
		}
		done, rest = st.assemble()
		return st
	}
	if req.EncodeCache != nil {
		req.EncodeCache.Use(assemble)
	} else {
		assemble(nil)
	}
	if err != nil {
		return nil, err
	}
	if cut < 0 {
		// Not reachable with these types; encode the request whole.
		raw, err := json.Marshal(buildRequest(req))
		return llmhttp.Body{raw}, err
	}
	open := append(frame[:cut:cut], `,"messages":`...)
	body := llmhttp.Body{open}
	switch {
	case len(done) > 0:
		body = append(body, []byte{'['}, done[0][1:])
		body = append(body, done[1:]...)
		body = append(body, rest, []byte{']'})
	case len(rest) > 0:
		body = append(body, []byte{'['}, rest[1:], []byte{']'})
	default:
		body = append(body, []byte("null"))
	}
	return append(body, frame[cut+len(messagesKey)-1:]), nil
}

// update encodes msgs, reusing the encoding of the longest prefix of msgs
// that st holds.
func (st *encodeState) update(msgs []llm.Message) error {
	keep := 0
	for keep < len(msgs) && keep < len(st.msgs) && st.msgs[keep].key == llm.IdentityOf(msgs[keep]) {
		keep++
	}
	if keep < st.doneMsgs {
		// The assembled messages no longer hold their own encoding: start
		// again (a compaction's replace changes the first message anyway).
		// A fresh array: an earlier body may still hold the old one.
		keep, st.done, st.doneMsgs, st.doneTurns = 0, nil, 0, 0
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
				return err
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
	return nil
}

// assemble returns the turns of st.msgs, each after a comma: done, which
// later messages leave as it is, and rest. It runs as messages and
// setCacheBreakpoints do: same-role neighbours merge, in a user turn the
// tool results lead (a stable partition), and the last turn carries the
// cache breakpoint on its last cacheable block. A turn is written when
// it closes; where a message's first blocks close a turn, the turns
// before it are done.
func (st *encodeState) assemble() (done [][]byte, rest []byte) {
	role, turns := "", st.doneTurns
	var lead, tail []*encodedBlock
	closeTurn := func(last bool) {
		if role == "" {
			return
		}
		mark := -1
		if last {
			for j := len(lead) + len(tail) - 1; j >= 0; j-- {
				if at(lead, tail, j).cacheable {
					mark = j
					break
				}
			}
		}
		turns++
		rest = append(rest, `,{"role":"`...)
		rest = append(rest, role...)
		rest = append(rest, `","content":[`...)
		for j := range len(lead) + len(tail) {
			b := at(lead, tail, j)
			if j > 0 {
				rest = append(rest, ',')
			}
			if j == mark {
				rest = append(rest, b.raw[:len(b.raw)-1]...)
				rest = append(rest, cacheMark...)
			} else {
				rest = append(rest, b.raw...)
			}
		}
		rest = append(rest, "]}"...)
		lead, tail = lead[:0], tail[:0]
	}
	for j := st.doneMsgs; j < len(st.msgs); j++ {
		first := true
		add := func(r string, bs []encodedBlock) {
			if len(bs) == 0 {
				return
			}
			if r != role {
				closeTurn(false)
				role = r
				if first && len(rest) > 0 {
					st.appendDone(rest)
					for k := st.doneMsgs; k < j; k++ {
						// Assembled: done holds it now.
						st.msgs[k].results, st.msgs[k].others = nil, nil
					}
					st.doneMsgs, st.doneTurns, rest = j, turns, rest[:0]
				}
			}
			first = false
			for i := range bs {
				if r == "user" && bs[i].result {
					lead = append(lead, &bs[i])
				} else {
					tail = append(tail, &bs[i])
				}
			}
		}
		m := &st.msgs[j]
		if m.assistant {
			add("assistant", m.others)
			add("user", m.results)
		} else {
			add("user", m.results)
			add("user", m.others)
		}
	}
	closeTurn(true)
	return slices.Clone(st.done), rest
}

// at is the j-th block of lead followed by tail.
func at(lead, tail []*encodedBlock, j int) *encodedBlock {
	if j < len(lead) {
		return lead[j]
	}
	return tail[j-len(lead)]
}
