package acp

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"

	"github.com/google/uuid"

	"github.com/dsh-dev/dsh/internal/host"
	"github.com/dsh-dev/dsh/internal/jsonrpc"
	"github.com/dsh-dev/dsh/internal/llm"
	"github.com/dsh-dev/dsh/internal/mcp"
	"github.com/dsh-dev/dsh/internal/session"
)

// sess is a session open on the connection.
type sess struct {
	s      *server
	id     string
	ctx    context.Context // the pump's; ends on close
	cancel context.CancelFunc
	done   chan struct{} // closed when the pump has ended

	// mcp are the MCP servers the client named for the session: they are
	// started again whenever the session is reopened.
	mcp []mcp.ServerConfig

	mu      sync.Mutex
	tr      *translator     // guarded by mu; the pump's after attach
	cur     *turnWait       // guarded by mu; the prompt in flight
	asked   map[string]bool // guarded by mu; approval ids the pump has passed
	changed chan struct{}   // guarded by mu; closed and replaced after each batch
	// shownMode and shownPlan are the preset and plan mode whose updates
	// the client has been sent (tr's run ahead of the writes), so that
	// session/set_mode answers after its current_mode_update.
	shownMode string // guarded by mu
	shownPlan bool   // guarded by mu
}

// turnWait is a prompt waiting for its turn to end.
type turnWait struct {
	msgID   string
	started bool // the pump passed the prompt's user/message
	end     chan session.TurnEnd
}

func newSess(s *server, id string, tr *translator) *sess {
	ctx, cancel := context.WithCancel(s.ctx)
	return &sess{s: s, id: id, ctx: ctx, cancel: cancel, done: make(chan struct{}), tr: tr,
		asked: map[string]bool{}, changed: make(chan struct{}), shownMode: tr.mode, shownPlan: tr.plan}
}

// pump follows the session's log from after and writes its updates.
func (ss *sess) pump(after int64) {
	defer close(ss.done)
	st, err := ss.s.h.Follow(ss.ctx, ss.id, after)
	if err != nil {
		fmt.Fprintf(ss.s.o.Log, "dsh acp: follow %s: %v\n", ss.id, err)
		return
	}
	defer st.Close()
	for {
		events, err := st.Next(ss.ctx)
		if err != nil {
			if ss.ctx.Err() == nil {
				fmt.Fprintf(ss.s.o.Log, "dsh acp: follow %s: %v\n", ss.id, err)
			}
			return
		}
		for _, e := range events {
			ss.mu.Lock()
			ups := ss.tr.translate(e)
			te := ss.tr.turnEnd
			ss.mu.Unlock()
			for _, u := range ups {
				// A closed connection still lets the bookkeeping below end
				// the prompts.
				_ = ss.s.conn.Notify("session/update", obj{"sessionId": ss.id, "update": u})
			}
			ss.note(e, te)
		}
		ss.mu.Lock()
		close(ss.changed)
		ss.changed = make(chan struct{})
		ss.mu.Unlock()
	}
}

// note records what the prompt and approval waits need from an event,
// after its updates are written.
func (ss *sess) note(e session.Event, te *session.TurnEnd) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	ss.shownMode, ss.shownPlan = ss.tr.mode, ss.tr.plan
	switch e.Type {
	case session.TypeUserMessage:
		var m llm.Message
		if ss.cur != nil && e.Decode(&m) == nil && m.ID == ss.cur.msgID {
			ss.cur.started = true
		}
	case session.TypeTurnEnd:
		if ss.cur != nil && ss.cur.started && te != nil {
			ss.cur.end <- *te // buffered 1, sent once
			ss.cur = nil
		}
	case session.TypeApprovalAsked:
		var p struct {
			ID string `json:"id"`
		}
		if e.Decode(&p) == nil {
			ss.asked[p.ID] = true
		}
	case session.TypeQuestionAsk:
		// Question ids share the map: both are random UUIDs.
		var p struct {
			ID string `json:"questionId"`
		}
		if e.Decode(&p) == nil {
			ss.asked[p.ID] = true
		}
	}
}

// waitFor blocks until cond (called under mu) holds or ctx ends.
func (ss *sess) waitFor(ctx context.Context, cond func() bool) bool {
	for {
		ss.mu.Lock()
		ok := cond()
		ch := ss.changed
		ss.mu.Unlock()
		if ok {
			return true
		}
		select {
		case <-ch:
		case <-ss.done:
			return false
		case <-ctx.Done():
			return false
		}
	}
}

func (ss *sess) busy() bool {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return ss.cur != nil
}

// waitIdle waits until no prompt is in flight.
func (ss *sess) waitIdle(ctx context.Context) {
	ss.waitFor(ctx, func() bool { return ss.cur == nil })
}

func (ss *sess) waitMode(ctx context.Context, mode string) {
	ss.waitFor(ctx, func() bool { return ss.shownMode == mode })
}

func (ss *sess) planMode() bool {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return ss.tr.plan
}

// currentMode is the ACP mode id: plan while in plan mode, else the
// permission preset.
func (ss *sess) currentMode() string {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return ss.tr.currentMode()
}

func (ss *sess) model() string {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return ss.tr.model
}

// stop ends the pump and waits for it.
func (ss *sess) stop() {
	ss.cancel()
	<-ss.done
}

// stopWithin ends the pump and waits for it until ctx ends: a pump
// blocked writing to a client that stopped reading must not keep dsh
// from exiting.
func (ss *sess) stopWithin(ctx context.Context) {
	ss.cancel()
	select {
	case <-ss.done:
	case <-ctx.Done():
	}
}

// prompt is session/prompt: the message goes to the host, and the answer
// comes once the pump has written the turn's last update.
func (s *server) prompt(ctx context.Context, params json.RawMessage) (any, *jsonrpc.Error) {
	var p struct {
		SessionID string            `json:"sessionId"`
		Prompt    []json.RawMessage `json:"prompt"`
	}
	if err := decode(params, &p); err != nil {
		return nil, err
	}
	ss, rerr := s.attached(p.SessionID)
	if rerr != nil {
		return nil, rerr
	}
	_, images, live := s.h.Route(ss.id)
	if !live {
		// Disposed while idle: reopen it on the model its log last used,
		// not the profile's (an on-demand resume would take that), with
		// the client's MCP servers.
		if _, err := s.h.Resume(ctx, host.ResumeRequest{ID: ss.id, Model: ss.model(), MCPServers: ss.mcp}); err != nil {
			return nil, hostError(err)
		}
		_, images, live = s.h.Route(ss.id)
		if !live {
			_, images = s.defaultRoute()
		}
	}
	msg, rerr := message(p.Prompt, images)
	if rerr != nil {
		return nil, rerr
	}
	w := &turnWait{msgID: uuid.NewString(), end: make(chan session.TurnEnd, 1)}
	msg.ID = w.msgID
	ss.mu.Lock()
	if ss.cur != nil {
		ss.mu.Unlock()
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: "session " + ss.id + " already has a prompt in flight"}
	}
	ss.cur = w
	ss.mu.Unlock()
	if err := s.h.Send(ctx, ss.id, msg, host.DeliveryQueue); err != nil {
		ss.mu.Lock()
		ss.cur = nil
		ss.mu.Unlock()
		return nil, hostError(err)
	}
	var te session.TurnEnd
	select {
	case te = <-w.end:
	case <-ss.done:
		// Closed before its turn ended.
		ss.mu.Lock()
		if ss.cur == w {
			ss.cur = nil
		}
		ss.mu.Unlock()
		return obj{"stopReason": "cancelled"}, nil
	}
	switch te.Reason.Kind {
	case session.EndCompleted:
		return obj{"stopReason": "end_turn"}, nil
	case session.EndMaxTokens:
		return obj{"stopReason": "max_tokens"}, nil
	case session.EndAborted, session.EndInterrupted:
		return obj{"stopReason": "cancelled"}, nil
	case session.EndBlocked:
		return obj{"stopReason": "refusal"}, nil
	}
	data := obj{"code": "MODEL_ERROR"}
	msgText := "the turn failed"
	if f := te.Reason.Failure; f != nil {
		data = obj{"code": string(f.Code), "message": f.Message}
		if f.Status != 0 {
			data["status"] = f.Status
		}
		msgText = "model request failed: " + f.Message
	}
	raw, _ := json.Marshal(data)
	return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: msgText, Data: raw}
}

// message turns an ACP prompt into a user message.
func message(blocks []json.RawMessage, images bool) (llm.Message, *jsonrpc.Error) {
	if len(blocks) == 0 {
		return llm.Message{}, invalidParams("the prompt is empty")
	}
	msg := llm.Message{Role: llm.RoleUser, Source: llm.Source{Kind: "user"}}
	for i, raw := range blocks {
		var b struct {
			Type        string `json:"type"`
			Text        string `json:"text"`
			Data        string `json:"data"`
			MimeType    string `json:"mimeType"`
			URI         string `json:"uri"`
			Name        string `json:"name"`
			Title       string `json:"title"`
			Description string `json:"description"`
			Resource    *struct {
				URI      string  `json:"uri"`
				Text     *string `json:"text"`
				Blob     *string `json:"blob"`
				MimeType string  `json:"mimeType"`
			} `json:"resource"`
		}
		if err := json.Unmarshal(raw, &b); err != nil {
			return msg, invalidParams("prompt[%d]: %v", i, err)
		}
		switch b.Type {
		case "text":
			msg.Content = append(msg.Content, llm.TextBlock(b.Text))
		case "image":
			if !images {
				return msg, invalidParams("prompt[%d]: the session's model does not accept images", i)
			}
			if b.Data == "" || !strings.HasPrefix(b.MimeType, "image/") {
				return msg, invalidParams("prompt[%d]: an image needs base64 data and an image/* mimeType", i)
			}
			msg.Content = append(msg.Content, llm.Block{Type: llm.BlockImage, MediaType: b.MimeType, Data: b.Data})
		case "resource_link":
			if b.URI == "" {
				return msg, invalidParams("prompt[%d]: a resource_link needs a uri", i)
			}
			ref := fmt.Sprintf("[resource_link name=%q uri=%q", b.Name, b.URI)
			if b.MimeType != "" {
				ref += fmt.Sprintf(" mimeType=%q", b.MimeType)
			}
			if b.Description != "" {
				ref += fmt.Sprintf(" description=%q", b.Description)
			}
			msg.Content = append(msg.Content, llm.TextBlock(ref+"]"))
		case "resource":
			if b.Resource == nil || b.Resource.URI == "" {
				return msg, invalidParams("prompt[%d]: a resource needs resource.uri", i)
			}
			if b.Resource.Text == nil {
				return msg, invalidParams("prompt[%d]: binary (blob) resources are not supported; send text", i)
			}
			msg.Content = append(msg.Content, llm.TextBlock(fenced(b.Resource.URI, *b.Resource.Text)))
		case "audio":
			return msg, invalidParams("prompt[%d]: audio is not supported", i)
		default:
			return msg, invalidParams("prompt[%d]: unknown content type %q", i, b.Type)
		}
	}
	return msg, nil
}

// fenced renders embedded text as a fenced block under its URI, with a
// fence longer than any backtick run inside.
func fenced(uri, text string) string {
	longest, run := 0, 0
	for _, r := range text {
		if r == '`' {
			run++
			longest = max(longest, run)
		} else {
			run = 0
		}
	}
	fence := strings.Repeat("`", max(3, longest+1))
	if !strings.HasSuffix(text, "\n") {
		text += "\n"
	}
	return "Resource " + uri + ":\n" + fence + "\n" + text + fence
}
