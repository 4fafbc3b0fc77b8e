package openai

import (
	"bytes"
	"encoding/json"

	"github.com/dsh-dev/dsh/internal/llm"
)

// encoded is the wire form of one history message: its chat messages,
// each encoded once.
type encoded struct {
	key   llm.Identity
	parts []encodedPart
}

type encodedPart struct {
	raw  []byte
	tool bool
	// images is the tool message itself when it returned images, which
	// follow the run of tool messages it belongs to.
	images *chatMessage
}

// encodeState is what a Client keeps in an llm.EncodeCache: the encoded
// messages of the last request, in order. A request that extends it
// encodes only its new messages.
type encodeState struct {
	client *Client
	msgs   []encoded
}

// messagesKey splits a body encoded with nil Messages around them. The
// model, the only member before them, is a JSON string, in which a quote
// is always escaped, so the first match is the member itself.
var messagesKey = []byte(`,"messages":null,`)

// encodeRequest returns the request body: the bytes json.Marshal gives
// for c.buildRequest(req), with each history message converted and
// encoded only once per req.EncodeCache.
func (c *Client) encodeRequest(req llm.Request) (json.RawMessage, error) {
	head := c.buildRequest(llm.Request{
		Model: req.Model, Tools: req.Tools, Effort: req.Effort,
		MaxTokens: req.MaxTokens, Temperature: req.Temperature,
	})
	frame, err := json.Marshal(head)
	if err != nil {
		return nil, err
	}
	cut := bytes.Index(frame, messagesKey)
	var st *encodeState
	if req.EncodeCache != nil {
		req.EncodeCache.Use(func(old any) any {
			s, ok := old.(*encodeState)
			if !ok || s.client != c {
				s = nil
			}
			if st, err = c.encodeMessages(s, req.Messages); err != nil {
				return nil
			}
			return st
		})
	} else {
		st, err = c.encodeMessages(nil, req.Messages)
	}
	if err != nil {
		return nil, err
	}

	out := make([]byte, 0, len(frame)+st.size()+len(req.System)+64)
	out = append(out, frame[:cut]...)
	out = append(out, `,"messages":`...)
	n := 0
	write := func(raw []byte) {
		if n == 0 {
			out = append(out, '[')
		} else {
			out = append(out, ',')
		}
		out = append(out, raw...)
		n++
	}
	if req.System != "" {
		raw, err := json.Marshal(chatMessage{Role: "system", Content: req.System})
		if err != nil {
			return nil, err
		}
		write(raw)
	}
	// The same runs as buildRequest: images of a run of tool messages
	// follow it in one user message.
	var pending []chatMessage
	flush := func() error {
		for _, m := range appendToolImages(nil, pending) {
			raw, err := json.Marshal(m)
			if err != nil {
				return err
			}
			write(raw)
		}
		pending = nil
		return nil
	}
	for _, m := range st.msgs {
		for _, p := range m.parts {
			if !p.tool {
				if err := flush(); err != nil {
					return nil, err
				}
			}
			write(p.raw)
			if p.images != nil {
				pending = append(pending, *p.images)
			}
		}
	}
	if err := flush(); err != nil {
		return nil, err
	}
	if n == 0 {
		out = append(out, "null"...)
	} else {
		out = append(out, ']')
	}
	out = append(out, frame[cut+len(messagesKey)-1:]...)
	return out, nil
}

// encodeMessages returns the state for msgs, reusing the encoding of the
// longest prefix of msgs that st (which may be nil) holds.
func (c *Client) encodeMessages(st *encodeState, msgs []llm.Message) (*encodeState, error) {
	if st == nil {
		st = &encodeState{client: c}
	}
	keep := 0
	for keep < len(msgs) && keep < len(st.msgs) && st.msgs[keep].key == llm.IdentityOf(msgs[keep]) {
		keep++
	}
	st.msgs = st.msgs[:keep]
	for _, m := range msgs[keep:] {
		e := encoded{key: llm.IdentityOf(m)}
		for _, wm := range c.messages(m) {
			raw, err := json.Marshal(wm)
			if err != nil {
				return nil, err
			}
			p := encodedPart{raw: raw, tool: wm.Role == "tool"}
			if len(wm.toolImages) > 0 {
				p.images = &wm
			}
			e.parts = append(e.parts, p)
		}
		st.msgs = append(st.msgs, e)
	}
	return st, nil
}

// size is the encoded size of the messages st holds.
func (st *encodeState) size() int {
	n := 0
	for _, m := range st.msgs {
		for _, p := range m.parts {
			n += len(p.raw) + 1
		}
	}
	return n
}
