// Package rpc is `dsh rpc`: a JSON-RPC 2.0 runtime on stdio for programs
// in any language (docs/rpc.md is its reference). Like every dsh surface
// it is a thin driver over the session host: sessions are created,
// prompted, cancelled and listed through internal/host, the event
// notifications are the session logs as they are appended (host.Follow,
// and the live logs of subagent children), and approvals come from the
// host's queue and are answered with host.Answer.
package rpc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"sync"
	"time"

	"github.com/dsh-dev/dsh/internal/host"
	"github.com/dsh-dev/dsh/internal/jsonrpc"
	"github.com/dsh-dev/dsh/internal/llm"
	"github.com/dsh-dev/dsh/internal/session"
)

// ProtocolVersion is the version of the dsh rpc protocol.
const ProtocolVersion = 1

// Error codes beyond JSON-RPC's. A host error is CodeHostError with
// data {"code": STABLE_CODE}.
const (
	CodeNotInitialized = -32002
	CodeHostError      = -32000
)

// Options configure a connection.
type Options struct {
	// Log receives diagnostics; nil discards them.
	Log io.Writer
	// Version is dsh's version, for serverInfo.
	Version string
	// Defaults fill the choices a session/create leaves out.
	Defaults host.CreateRequest
}

type server struct {
	h    *host.Host
	o    Options
	conn *jsonrpc.Conn
	ctx  context.Context
	stop context.CancelFunc
	wg   sync.WaitGroup

	mu          sync.Mutex
	initialized bool                          // guarded by mu
	sessions    map[string]context.CancelFunc // guarded by mu; attached sessions' followers
	prompts     map[string]int                // guarded by mu; prompts in flight per session
	// emitted is the seq of the last event notified per session (math.MaxInt64
	// once its follower ended), and emitWake is closed and replaced whenever
	// it grows, so a prompt's answer can wait until the turn's last event
	// was notified: the client reads every update before the result.
	emitted  map[string]int64 // guarded by mu
	emitWake chan struct{}    // guarded by mu
}

// Serve speaks the dsh rpc protocol on in/out until in ends or ctx ends;
// then the connection's running turns are cancelled and its sessions
// disposed (logs flushed, leases released). It never closes h.
func Serve(ctx context.Context, h *host.Host, in io.Reader, out io.Writer, o Options) error {
	if o.Log == nil {
		o.Log = io.Discard
	}
	sctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	s := &server{h: h, o: o, ctx: sctx, stop: stop, sessions: map[string]context.CancelFunc{}, prompts: map[string]int{},
		emitted: map[string]int64{}, emitWake: make(chan struct{})}
	s.conn = jsonrpc.NewConn(in, out, jsonrpc.Options{
		Dialect:         jsonrpc.V2,
		Server:          true,
		OnRequest:       s.onRequest,
		OnProtocolError: func(err error) { fmt.Fprintf(o.Log, "dsh rpc: %v\n", err) },
	})
	feed := h.Subscribe()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.watchFeed(feed)
	}()
	select {
	case <-s.conn.ReadDone():
	case <-ctx.Done():
	}
	s.shutdown()
	// The requests read before the input ended are answered (a prompt
	// with its turn's end) before the connection closes, for at most
	// ShutdownWait: a client may write its requests and close its end.
	dctx, cancelDrain := context.WithTimeout(context.Background(), ShutdownWait)
	if err := s.conn.Drain(dctx); err != nil {
		fmt.Fprintf(o.Log, "dsh rpc: requests still unanswered after %v; exiting anyway\n", ShutdownWait)
	}
	cancelDrain()
	feed.Close()
	stop()
	s.conn.Close()
	// As in dsh acp: a goroutine blocked writing to a client that stopped
	// reading is not waited for past ShutdownWait.
	waited := make(chan struct{})
	go func() {
		s.wg.Wait()
		close(waited)
	}()
	select {
	case <-waited:
	case <-time.After(ShutdownWait):
		fmt.Fprintf(o.Log, "dsh rpc: a write to the client is still blocked after %v; exiting anyway\n", ShutdownWait)
	}
	return nil
}

// ShutdownWait bounds how long Serve waits, once its input ended, for
// its goroutines to end.
const ShutdownWait = time.Second

func (s *server) shutdown() {
	s.mu.Lock()
	ids := make([]string, 0, len(s.sessions))
	for id := range s.sessions {
		ids = append(ids, id)
	}
	s.mu.Unlock()
	cctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	for _, id := range ids {
		if err := s.h.Dispose(cctx, id); err != nil {
			fmt.Fprintf(s.o.Log, "dsh rpc: close session %s: %v\n", id, err)
		}
	}
}

func (s *server) onRequest(_ context.Context, method string, params json.RawMessage) (any, *jsonrpc.Error) {
	s.wg.Add(1)
	defer s.wg.Done()
	if method == "initialize" {
		s.mu.Lock()
		s.initialized = true
		s.mu.Unlock()
		return map[string]any{"protocolVersion": ProtocolVersion, "serverInfo": map[string]string{"name": "dsh", "version": s.o.Version}}, nil
	}
	s.mu.Lock()
	ok := s.initialized
	s.mu.Unlock()
	if !ok {
		return nil, &jsonrpc.Error{Code: CodeNotInitialized, Message: "call initialize first (got " + method + ")"}
	}
	ctx := s.ctx
	switch method {
	case "session/create":
		return s.create(ctx, params)
	case "session/resume":
		return s.resume(ctx, params)
	case "session/prompt":
		return s.prompt(ctx, params)
	case "session/cancel":
		return s.cancel(ctx, params)
	case "session/list":
		return s.list(ctx, params)
	case "session/get":
		return s.get(ctx, params)
	case "session/events":
		return s.events(ctx, params)
	case "approval/respond":
		return s.respond(ctx, params)
	case "question/respond":
		return s.respondQuestion(ctx, params)
	}
	return nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "method not found: " + method}
}

// hostError is a host error on the wire.
func hostError(err error) *jsonrpc.Error {
	data, _ := json.Marshal(map[string]string{"code": host.ErrorCode(err)})
	return &jsonrpc.Error{Code: CodeHostError, Message: err.Error(), Data: data}
}

func invalid(format string, args ...any) *jsonrpc.Error {
	data, _ := json.Marshal(map[string]string{"code": host.CodeInvalidArgument})
	return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf(format, args...), Data: data}
}

// decode reads params strictly: unknown fields are errors, so a typo
// never silently changes a request.
func decode(params json.RawMessage, v any) *jsonrpc.Error {
	if len(params) == 0 || string(params) == "null" {
		params = json.RawMessage("{}")
	}
	dec := json.NewDecoder(bytesReader(params))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return invalid("invalid params: %v", err)
	}
	return nil
}

func (s *server) create(ctx context.Context, params json.RawMessage) (any, *jsonrpc.Error) {
	var r host.CreateRequest
	if err := decode(params, &r); err != nil {
		return nil, err
	}
	d := s.o.Defaults
	r.Model, r.Permission, r.AgentPreset = or(r.Model, d.Model), or(r.Permission, d.Permission), or(r.AgentPreset, d.AgentPreset)
	if !filepath.IsAbs(r.Cwd) {
		// A relative one would be dsh's own directory's, not the client's.
		return nil, invalid("cwd %q: an absolute directory is required", r.Cwd)
	}
	info, err := s.h.Create(ctx, r)
	if err != nil {
		return nil, hostError(err)
	}
	s.attach(info.Header.ID, -1)
	return map[string]any{"session": info}, nil
}

func or(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func (s *server) resume(ctx context.Context, params json.RawMessage) (any, *jsonrpc.Error) {
	var p struct {
		SessionID  string `json:"sessionId"`
		Model      string `json:"model"`
		Effort     string `json:"effort"`
		Permission string `json:"permission"`
		Approval   string `json:"approval"`
		After      *int64 `json:"after"`
	}
	if err := decode(params, &p); err != nil {
		return nil, err
	}
	info, err := s.h.Resume(ctx, host.ResumeRequest{ID: p.SessionID, Model: p.Model, Effort: p.Effort, Permission: p.Permission, Approval: p.Approval})
	if err != nil {
		return nil, hostError(err)
	}
	after := info.LastSeq
	if p.After != nil {
		after = *p.After
	}
	s.attach(info.Header.ID, after)
	return map[string]any{"session": info}, nil
}

// attach streams session id's events from after on, once per
// connection.
func (s *server) attach(id string, after int64) {
	s.mu.Lock()
	if _, ok := s.sessions[id]; ok {
		s.mu.Unlock()
		return
	}
	ctx, cancel := context.WithCancel(s.ctx)
	s.sessions[id] = cancel
	s.wg.Add(1)
	s.mu.Unlock()
	go func() {
		defer s.wg.Done()
		s.follow(ctx, id, after)
	}()
}

type promptParams struct {
	SessionID string      `json:"sessionId"`
	Text      string      `json:"text"`
	Content   []llm.Block `json:"content"`
}

func (s *server) prompt(ctx context.Context, params json.RawMessage) (any, *jsonrpc.Error) {
	var p promptParams
	if err := decode(params, &p); err != nil {
		return nil, err
	}
	msg := llm.Message{Role: llm.RoleUser, Content: p.Content}
	if p.Text != "" {
		msg.Content = append([]llm.Block{llm.TextBlock(p.Text)}, msg.Content...)
	}
	if len(msg.Content) == 0 {
		return nil, invalid("a prompt needs text or content")
	}
	info, err := s.h.Get(ctx, p.SessionID)
	if err != nil {
		return nil, hostError(err)
	}
	id := info.Header.ID
	s.attach(id, info.LastSeq)
	res, err := Prompt(ctx, s.h, id, msg)
	if err != nil {
		return nil, hostError(err)
	}
	// The answer follows the notification of the turn's last event.
	if err := s.waitEmitted(ctx, id, res.EndSeq); err != nil {
		return nil, hostError(err)
	}
	return map[string]any{"sessionId": id, "result": res}, nil
}

// noteEmitted records that session id's events up to seq were notified.
func (s *server) noteEmitted(id string, seq int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if seq <= s.emitted[id] {
		return
	}
	s.emitted[id] = seq
	close(s.emitWake)
	s.emitWake = make(chan struct{})
}

// waitEmitted waits until session id's events up to seq were notified (or
// its follower ended).
func (s *server) waitEmitted(ctx context.Context, id string, seq int64) error {
	for {
		s.mu.Lock()
		done, wake := s.emitted[id] >= seq, s.emitWake
		s.mu.Unlock()
		if done {
			return nil
		}
		select {
		case <-wake:
		case <-ctx.Done():
			return ctx.Err()
		case <-s.ctx.Done():
			return s.ctx.Err()
		}
	}
}

func (s *server) cancel(ctx context.Context, params json.RawMessage) (any, *jsonrpc.Error) {
	var p struct {
		SessionID  string `json:"sessionId"`
		ClearQueue bool   `json:"clearQueue"`
	}
	if err := decode(params, &p); err != nil {
		return nil, err
	}
	if err := s.h.Cancel(ctx, p.SessionID, p.ClearQueue); err != nil {
		return nil, hostError(err)
	}
	return map[string]any{}, nil
}

func (s *server) list(ctx context.Context, params json.RawMessage) (any, *jsonrpc.Error) {
	var raw struct {
		Cwd             string `json:"cwd"`
		IncludeChildren bool   `json:"includeChildren"`
		Limit           int    `json:"limit"`
		Cursor          string `json:"cursor"`
	}
	if err := decode(params, &raw); err != nil {
		return nil, err
	}
	page, err := s.h.ListPage(ctx, host.ListFilter{Cwd: raw.Cwd, IncludeChildren: raw.IncludeChildren, Limit: raw.Limit, Before: raw.Cursor})
	if err != nil {
		return nil, hostError(err)
	}
	list := page.Sessions
	if list == nil {
		list = []host.Info{}
	}
	res := map[string]any{"sessions": list}
	if page.Next != "" {
		res["nextCursor"] = page.Next
	}
	return res, nil
}

func (s *server) get(ctx context.Context, params json.RawMessage) (any, *jsonrpc.Error) {
	var p struct {
		SessionID string `json:"sessionId"`
	}
	if err := decode(params, &p); err != nil {
		return nil, err
	}
	info, err := s.h.Get(ctx, p.SessionID)
	if err != nil {
		return nil, hostError(err)
	}
	return map[string]any{"session": info}, nil
}

func (s *server) events(ctx context.Context, params json.RawMessage) (any, *jsonrpc.Error) {
	p := struct {
		SessionID string `json:"sessionId"`
		After     int64  `json:"after"`
		Limit     int    `json:"limit"`
	}{After: -1}
	if err := decode(params, &p); err != nil {
		return nil, err
	}
	events, next, err := s.h.Events(ctx, p.SessionID, p.After, p.Limit)
	if err != nil {
		return nil, hostError(err)
	}
	if events == nil {
		events = []session.Event{}
	}
	return map[string]any{"events": events, "next": next}, nil
}

func (s *server) respond(ctx context.Context, params json.RawMessage) (any, *jsonrpc.Error) {
	var p struct {
		SessionID  string `json:"sessionId"`
		ApprovalID string `json:"approvalId"`
		Decision   string `json:"decision"`
		Feedback   string `json:"feedback"`
	}
	if err := decode(params, &p); err != nil {
		return nil, err
	}
	if err := s.h.Answer(ctx, p.SessionID, p.ApprovalID, host.Answer{Decision: p.Decision, Feedback: p.Feedback}); err != nil {
		return nil, hostError(err)
	}
	return map[string]any{}, nil
}

// respondQuestion answers a pending question (ask_user_question,
// exit_plan_mode): {sessionId, questionId, answers?, approve?, feedback?}.
func (s *server) respondQuestion(ctx context.Context, params json.RawMessage) (any, *jsonrpc.Error) {
	var p struct {
		SessionID  string `json:"sessionId"`
		QuestionID string `json:"questionId"`
		host.QuestionAnswer
	}
	if err := decode(params, &p); err != nil {
		return nil, err
	}
	if err := s.h.AnswerQuestion(ctx, p.SessionID, p.QuestionID, p.QuestionAnswer); err != nil {
		return nil, hostError(err)
	}
	return map[string]any{}, nil
}

// watchFeed forwards status changes and approvals of the connection's
// sessions.
func (s *server) watchFeed(feed *host.Feed) {
	for {
		events, err := feed.Next(s.ctx)
		if errors.Is(err, host.ErrFeedOverflow) {
			_ = s.conn.Notify("feed/overflow", map[string]string{"message": err.Error()})
			feed = s.h.Subscribe()
			defer feed.Close()
			continue
		}
		if err != nil {
			return
		}
		for _, e := range events {
			s.mu.Lock()
			_, mine := s.sessions[e.SessionID]
			s.mu.Unlock()
			if !mine {
				continue
			}
			switch e.Type {
			case host.FeedSessionStatus:
				_ = s.conn.Notify("session/status", map[string]any{"sessionId": e.SessionID, "status": e.Status})
			case host.FeedApprovalPending:
				_ = s.conn.Notify("approval/requested", map[string]any{"approval": e.Approval})
			case host.FeedApprovalResolved:
				_ = s.conn.Notify("approval/resolved", map[string]any{"sessionId": e.SessionID, "approvalId": e.ApprovalID, "outcome": e.Outcome})
			case host.FeedQuestion:
				_ = s.conn.Notify("question/requested", map[string]any{"question": e.Question})
			case host.FeedQuestionResolved:
				_ = s.conn.Notify("question/resolved", map[string]any{"sessionId": e.SessionID, "questionId": e.ID, "status": e.Status})
			}
		}
	}
}
