// Package acp is dsh's Agent Client Protocol (v1) agent: the server
// behind `dsh acp`, which editors (Zed, JetBrains IDEs, Neovim plugins)
// and other ACP clients run as a subprocess over newline-delimited
// JSON-RPC 2.0 on stdio.
//
// It is a thin driver over the session host (internal/host): sessions are
// created, resumed, prompted, cancelled and closed through the host; the
// session/update notifications are derived from the session log as it is
// appended (host.Follow), never from state of their own; approvals come
// from the host's approval queue (its feed) and go back through
// host.Answer. One connection serves any number of sessions; each has one
// pump goroutine that follows its log and writes its updates in log
// order, so a prompt's response, written once the pump has passed the
// turn's turn/end, comes after the turn's last update.
package acp

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/dsh-dev/dsh/internal/host"
	"github.com/dsh-dev/dsh/internal/jsonrpc"
)

// ProtocolVersion is the ACP version dsh speaks.
const ProtocolVersion = 1

// ACP error codes beyond JSON-RPC's.
const (
	// CodeResourceNotFound is ACP's "resource not found" (an unknown
	// session).
	CodeResourceNotFound = -32002
)

// Options configure a connection.
type Options struct {
	// Model ("provider/model"), Permission (a preset) and AgentPreset are
	// the choices of the sessions the connection creates; "" takes the
	// profile's defaults.
	Model       string
	Permission  string
	AgentPreset string
	// Log receives diagnostics (stderr); nil discards them.
	Log io.Writer
	// Version is dsh's version, for agentInfo.
	Version string
}

// server is one ACP connection.
type server struct {
	h    *host.Host
	o    Options
	conn *jsonrpc.Conn
	ctx  context.Context // ends when the connection ends
	stop context.CancelFunc
	// wg counts the connection's goroutines: pumps, the feed reader,
	// permission requests, request handlers.
	wg sync.WaitGroup

	mu          sync.Mutex
	initialized bool             // guarded by mu
	sessions    map[string]*sess // guarded by mu; by session id
	asking      map[string]context.CancelFunc
	// formElicitation: the client advertised elicitation.form, so
	// questions go to it as forms (guarded by mu).
	formElicitation bool
}

// Serve speaks ACP on in/out until in ends (EOF) or ctx ends: then every
// running turn of the connection's sessions is cancelled, their prompts
// answered, the sessions disposed (logs flushed, leases released), and
// Serve returns nil. It never closes h.
func Serve(ctx context.Context, h *host.Host, in io.Reader, out io.Writer, o Options) error {
	if o.Log == nil {
		o.Log = io.Discard
	}
	sctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	s := &server{h: h, o: o, ctx: sctx, stop: stop, sessions: map[string]*sess{}, asking: map[string]context.CancelFunc{}}
	s.conn = jsonrpc.NewConn(in, out, jsonrpc.Options{
		Dialect:         jsonrpc.V2,
		Server:          true,
		OnRequest:       s.onRequest,
		OnNotification:  s.onNotification,
		OnProtocolError: func(err error) { fmt.Fprintf(o.Log, "dsh acp: %v\n", err) },
		CancelMethod:    jsonrpc.ACPCancelMethod,
	})
	feed := h.Subscribe()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.watchApprovals(feed)
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
		fmt.Fprintf(o.Log, "dsh acp: requests still unanswered after %v; exiting anyway\n", ShutdownWait)
	}
	cancelDrain()
	feed.Close()
	stop()
	s.conn.Close()
	// Every goroutine ends now (handlers and pumps see their contexts
	// end, writes fail on the closed connection), except one blocked in a
	// write to a client that stopped reading without closing its end: it
	// is not waited for past ShutdownWait, so the process can still exit.
	waited := make(chan struct{})
	go func() {
		s.wg.Wait()
		close(waited)
	}()
	select {
	case <-waited:
	case <-time.After(ShutdownWait):
		fmt.Fprintf(o.Log, "dsh acp: a write to the client is still blocked after %v; exiting anyway\n", ShutdownWait)
	}
	return nil
}

// ShutdownWait bounds how long Serve waits, once its input ended, for
// its goroutines to end.
const ShutdownWait = time.Second

// shutdown cancels the connection's running turns, waits for their
// prompts to settle, and disposes its sessions.
func (s *server) shutdown() {
	s.mu.Lock()
	list := make([]*sess, 0, len(s.sessions))
	for _, ss := range s.sessions {
		list = append(list, ss)
	}
	s.mu.Unlock()
	cctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	for _, ss := range list {
		if ss.busy() {
			_ = s.h.Cancel(cctx, ss.id, false)
		}
	}
	for _, ss := range list {
		ss.waitIdle(cctx)
		if err := s.h.Dispose(cctx, ss.id); err != nil {
			fmt.Fprintf(s.o.Log, "dsh acp: close session %s: %v\n", ss.id, err)
		}
		ss.stopWithin(cctx)
	}
}

// onRequest dispatches a client request.
func (s *server) onRequest(_ context.Context, method string, params json.RawMessage) (any, *jsonrpc.Error) {
	s.wg.Add(1)
	defer s.wg.Done()
	if method == "initialize" {
		return s.initialize(params)
	}
	s.mu.Lock()
	ok := s.initialized
	s.mu.Unlock()
	if !ok {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: "initialize first: " + method + " before initialize"}
	}
	ctx := s.ctx
	switch method {
	case "authenticate":
		return obj{}, nil // no authentication methods are offered
	case "session/new":
		return s.newSession(ctx, params)
	case "session/load":
		return s.loadSession(ctx, params, true)
	case "session/resume":
		return s.loadSession(ctx, params, false)
	case "session/list":
		return s.listSessions(ctx, params)
	case "session/close":
		return s.closeSession(ctx, params)
	case "session/prompt":
		return s.prompt(ctx, params)
	case "session/set_mode":
		return s.setMode(ctx, params)
	case "session/set_config_option":
		return s.setConfigOption(ctx, params)
	}
	return nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "method not found: " + method}
}

// onNotification handles session/cancel (and ignores the rest).
func (s *server) onNotification(method string, params json.RawMessage) {
	if method != "session/cancel" {
		return
	}
	var p struct {
		SessionID string `json:"sessionId"`
	}
	if json.Unmarshal(params, &p) != nil {
		return
	}
	ss := s.session(p.SessionID)
	if ss == nil {
		return // unknown sessions are no-ops
	}
	// Cancel runs off the reader goroutine: it waits for the agent.
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		if err := s.h.Cancel(s.ctx, ss.id, false); err != nil {
			fmt.Fprintf(s.o.Log, "dsh acp: cancel %s: %v\n", ss.id, err)
		}
	}()
}

func (s *server) initialize(params json.RawMessage) (any, *jsonrpc.Error) {
	var p struct {
		ProtocolVersion    *int `json:"protocolVersion"`
		ClientCapabilities struct {
			Elicitation *struct {
				Form json.RawMessage `json:"form"`
			} `json:"elicitation"`
		} `json:"clientCapabilities"`
	}
	if err := json.Unmarshal(params, &p); err != nil || p.ProtocolVersion == nil {
		return nil, invalidParams("initialize needs a protocolVersion")
	}
	el := p.ClientCapabilities.Elicitation
	s.mu.Lock()
	s.initialized = true
	s.formElicitation = el != nil && len(el.Form) > 0 && string(el.Form) != "null"
	s.mu.Unlock()
	_, images := s.defaultRoute()
	return obj{
		"protocolVersion": ProtocolVersion,
		"agentCapabilities": obj{
			"loadSession":         true,
			"promptCapabilities":  obj{"image": images, "audio": false, "embeddedContext": true},
			"mcpCapabilities":     obj{"http": true, "sse": false},
			"sessionCapabilities": obj{"list": obj{}, "resume": obj{}, "close": obj{}},
		},
		"authMethods": []any{},
		"agentInfo":   obj{"name": "dsh", "title": "dsh", "version": s.o.Version},
	}, nil
}

// defaultRoute is the model new sessions get and whether it takes images.
func (s *server) defaultRoute() (string, bool) {
	a := s.h.App()
	spec := s.o.Model
	if spec == "" {
		spec = a.DefaultModel()
	}
	r, err := a.Catalog.Resolve(spec, "")
	if err != nil {
		return spec, false
	}
	return r.Provider + "/" + r.Model.ID, r.Model.Images
}

func (s *server) session(id string) *sess {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sessions[id]
}

func invalidParams(format string, args ...any) *jsonrpc.Error {
	return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf(format, args...)}
}

// hostError maps a host error onto a JSON-RPC error whose data carries
// the stable dsh code.
func hostError(err error) *jsonrpc.Error {
	code := host.ErrorCode(err)
	rpc := jsonrpc.CodeInternalError
	switch code {
	case host.CodeSessionNotFound:
		rpc = CodeResourceNotFound
	case host.CodeInvalidArgument, host.CodeSessionAmbiguous:
		rpc = jsonrpc.CodeInvalidParams
	case host.CodeSessionBusy:
		rpc = jsonrpc.CodeInvalidRequest
	}
	data, _ := json.Marshal(obj{"code": code})
	return &jsonrpc.Error{Code: rpc, Message: err.Error(), Data: data}
}

// decode reads params strictly enough to report a clear error.
func decode(params json.RawMessage, v any) *jsonrpc.Error {
	if len(params) == 0 {
		return invalidParams("params are required")
	}
	if err := json.Unmarshal(params, v); err != nil {
		return invalidParams("invalid params: %v", err)
	}
	return nil
}
