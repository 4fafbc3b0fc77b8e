package openai

import (
	"bytes"
	"encoding/json"
	"slices"

	"github.com/dsh-dev/dsh/internal/llm"
	"github.com/dsh-dev/dsh/internal/llm/llmhttp"
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
// messages of the last request, in order, and the wire messages of its
// first done messages assembled, which no later message changes. A
// request that extends it encodes and assembles only its new messages.
//
// The history is held encoded once: a message's own encoding is dropped
// when it is assembled into done, and done grows in segments rather than
// by reallocation (an earlier body may still be reading it, and a copy
// would hold the history twice).
type encodeState struct {
	client *Client
	msgs   []encoded
	// done is ","+message for each wire message of msgs[:doneMsgs], in
	// segments of about llm.PieceSize bytes; a segment only grows past the
	// length any body holds.
	done     [][]byte
	doneMsgs int
	// The last request's head (see llm.Head) and its encoding: the
	// request without messages, where they are cut, and the system
	// message.
	head   llm.Head
	frame  []byte
	cut    int
	system []byte
}

// messagesKey splits a body encoded with nil Messages around them. The
// model, the only member before them, is a JSON string, in which a quote
// is always escaped, so the first match is the member itself.
var messagesKey = []byte(`,"messages":null,`)

// encodeRequest returns the request body: the bytes json.Marshal gives
// for c.buildRequest(req), with each history message converted, encoded
// and assembled only once per req.EncodeCache.
func (c *Client) encodeRequest(req llm.Request) (llmhttp.Body, error) {
	var (
		frame, system []byte
		cut           int
		done          [][]byte
		rest          []byte
		err           error
	)
	assemble := func(old any) any {
		st, ok := old.(*encodeState)
		if !ok || st.client != c {
			st = &encodeState{client: c}
		}
		if err = st.encodeHead(req); err != nil {
			return nil
		}
		frame, cut, system = st.frame, st.cut, st.system
		if cut < 0 {
			return st
		}
		if err = st.update(req.Messages); err != nil {
			return nil
		}
		done, rest, err = st.assemble()
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
		raw, err := json.Marshal(c.buildRequest(req))
		return llmhttp.Body{raw}, err
	}
	open := append(frame[:cut:cut], `,"messages":`...)
	body := llmhttp.Body{open}
	list := 0
	for _, p := range slices.Concat([][]byte{system}, done, [][]byte{rest}) {
		if len(p) == 0 {
			continue
		}
		if list == 0 {
			// The first wire message opens the list instead of
			// following a comma.
			body = append(body, []byte{'['}, p[1:])
		} else {
			body = append(body, p)
		}
		list++
	}
	if list == 0 {
		body = append(body, []byte("null"))
	} else {
		body = append(body, []byte{']'})
	}
	return append(body, frame[cut+len(messagesKey)-1:]), nil
}

// encodeHead encodes the request around its messages and the system
// message, unless the last request had the same head (see llm.Head).
// Bodies only ever read the encoding, so it is shared between them.
func (st *encodeState) encodeHead(req llm.Request) error {
	if st.head.Same(req) {
		return nil
	}
	c := st.client
	frame, err := json.Marshal(c.buildRequest(llm.Request{
		Model: req.Model, Tools: req.Tools, Effort: req.Effort,
		MaxTokens: req.MaxTokens, Temperature: req.Temperature,
	}))
	if err != nil {
		return err
	}
	var system []byte
	if req.System != "" {
		raw, err := json.Marshal(chatMessage{Role: "system", Content: req.System})
		if err != nil {
			return err
		}
		system = append([]byte{','}, raw...)
	}
	st.head, st.frame, st.cut, st.system = llm.HeadOf(req), frame, bytes.Index(frame, messagesKey), system
	return nil
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
		keep, st.done, st.doneMsgs = 0, nil, 0
	}
	st.msgs = st.msgs[:keep]
	for _, m := range msgs[keep:] {
		e := encoded{key: llm.IdentityOf(m)}
		for _, wm := range st.client.messages(m) {
			raw, err := json.Marshal(wm)
			if err != nil {
				return err
			}
			p := encodedPart{raw: raw, tool: wm.Role == "tool"}
			if len(wm.toolImages) > 0 {
				p.images = &wm
			}
			e.parts = append(e.parts, p)
		}
		st.msgs = append(st.msgs, e)
	}
	return nil
}

// assemble returns the wire messages of st.msgs, each after a comma:
// done, which later messages leave as it is, and rest. It runs as
// buildRequest does: the images of a run of tool messages follow it in
// one user message. Where a message starts with no images pending, what
// precedes it is done.
func (st *encodeState) assemble() (done [][]byte, rest []byte, err error) {
	var pending []chatMessage
	flush := func() error {
		for _, m := range appendToolImages(nil, pending) {
			raw, err := json.Marshal(m)
			if err != nil {
				return err
			}
			rest = append(append(rest, ','), raw...)
		}
		pending = nil
		return nil
	}
	for j := st.doneMsgs; j < len(st.msgs); j++ {
		if len(pending) == 0 && len(rest) > 0 {
			st.appendDone(rest)
			for k := st.doneMsgs; k < j; k++ {
				st.msgs[k].parts = nil // assembled: done holds it now
			}
			st.doneMsgs, rest = j, rest[:0]
		}
		for _, p := range st.msgs[j].parts {
			if !p.tool {
				if err := flush(); err != nil {
					return nil, nil, err
				}
			}
			rest = append(append(rest, ','), p.raw...)
			if p.images != nil {
				pending = append(pending, *p.images)
			}
		}
	}
	if err := flush(); err != nil {
		return nil, nil, err
	}
	return slices.Clone(st.done), rest, nil
}

// appendDone appends p to done (see llm.AppendPieces).
func (st *encodeState) appendDone(p []byte) { st.done = llm.AppendPieces(st.done, p) }
