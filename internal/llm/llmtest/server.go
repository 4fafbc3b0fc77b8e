// Package llmtest is a scripted fake model server for tests and
// benchmarks. It serves real HTTP on loopback and speaks the real wire
// formats of OpenAI-compatible Chat Completions (as DeepSeek serves it),
// Anthropic Messages and the OpenAI Responses API (as the Codex CLI uses
// it), streaming and not, so that provider adapters and external agents
// are exercised end to end: tests script replies and faults with
// [Response] and assert what the harness sent with [Server.Requests].
//
// Endpoints: /chat/completions and /v1/chat/completions (chat),
// /v1/messages and /messages (Anthropic), /v1/responses and /responses
// (Responses). Scripted responses are consumed one per request in order,
// whatever the format. [WriteCodexConfig] points a Codex CLI at a server.
package llmtest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"time"
)

// Server is a running fake model server. Its methods are safe for
// concurrent use.
type Server struct {
	ts        *httptest.Server
	done      chan struct{} // closed by Close, so stalled handlers end
	closeOnce sync.Once
	ids       atomic.Int64 // source of generated ids

	mu        sync.Mutex
	queue     []Response
	fallback  func(Request) Response
	onRequest func(Request)
	reqs      []Request
	arrived   chan struct{} // closed and replaced on every recorded request
}

// New starts a server on 127.0.0.1 at a free port. It panics if it cannot
// listen, like httptest.NewServer, because tests have no way to recover.
func New() *Server {
	s, err := Start("127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	return s
}

// Start starts a server listening on addr (host:port; port 0 picks one).
func Start(addr string) (*Server, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("llmtest: listen: %w", err)
	}
	s := &Server{done: make(chan struct{}), arrived: make(chan struct{})}
	// httptest rather than a bare http.Server because its Close waits for
	// handlers to finish, so tests do not leak goroutines into each other.
	s.ts = httptest.NewUnstartedServer(http.HandlerFunc(s.serve))
	s.ts.Listener.Close()
	s.ts.Listener = l
	s.ts.Start()
	return s, nil
}

// URL returns the base URL, e.g. "http://127.0.0.1:41234", without a path.
func (s *Server) URL() string { return s.ts.URL }

// Close stops the server. Stalled or delayed responses are cut off (their
// connections closed abruptly) rather than waited for, so Close never
// hangs. It is safe to call more than once.
func (s *Server) Close() {
	s.closeOnce.Do(func() {
		close(s.done)
		s.ts.Close()
	})
}

// Enqueue appends scripted responses, consumed one per request in order.
func (s *Server) Enqueue(rs ...Response) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.queue = append(s.queue, rs...)
}

// SetFallback sets the function that answers when the queue is empty
// (nil removes it). Without one, such requests get HTTP 500 with a JSON
// error saying the script is exhausted. It is called without locks held,
// possibly concurrently, with the already-recorded request.
func (s *Server) SetFallback(f func(Request) Response) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fallback = f
}

// SetOnRequest sets a hook called with every request once it is recorded
// and before it is answered (nil removes it); dsh-fakellm logs with it.
// It is called without locks held, possibly concurrently.
func (s *Server) SetOnRequest(f func(Request)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.onRequest = f
}

// Pending returns how many enqueued responses have not been consumed.
func (s *Server) Pending() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.queue)
}

// Requests returns the requests received so far, in arrival order.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.reqs...)
}

// RequestCount returns how many requests have been received.
func (s *Server) RequestCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.reqs)
}

// WaitRequests blocks until at least n requests have been received, or
// returns ctx's error.
func (s *Server) WaitRequests(ctx context.Context, n int) error {
	for {
		s.mu.Lock()
		got, ch := len(s.reqs), s.arrived
		s.mu.Unlock()
		if got >= n {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("llmtest: waiting for %d requests, got %d: %w", n, got, ctx.Err())
		}
	}
}

// record stores req, wakes waiters and returns its 1-based number.
func (s *Server) record(req Request) (int, func(Request)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reqs = append(s.reqs, req)
	close(s.arrived)
	s.arrived = make(chan struct{})
	return len(s.reqs), s.onRequest
}

// next pops the next scripted response, or asks the fallback.
func (s *Server) next(req Request) (Response, bool) {
	s.mu.Lock()
	if len(s.queue) > 0 {
		r := s.queue[0]
		s.queue = s.queue[1:]
		s.mu.Unlock()
		return r, true
	}
	f := s.fallback
	s.mu.Unlock()
	if f == nil {
		return Response{}, false
	}
	return f(req), true
}

func (s *Server) nextID() int64 { return s.ids.Add(1) }

func formatOf(path string) string {
	switch path {
	case "/chat/completions", "/v1/chat/completions":
		return FormatChat
	case "/v1/messages", "/messages":
		return FormatAnthropic
	case "/v1/responses", "/responses":
		return FormatResponses
	}
	return ""
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	arrived := time.Now()
	body, _ := io.ReadAll(r.Body) // a short body is recorded as received
	req := Request{
		Arrived: arrived,
		Method:  r.Method,
		Path:    r.URL.Path,
		Header:  r.Header.Clone(),
		Body:    body,
		Format:  formatOf(r.URL.Path),
	}
	if json.Unmarshal(body, &req.JSON) != nil {
		req.JSON = nil
	}
	req.Stream, _ = req.JSON["stream"].(bool)
	n, hook := s.record(req)
	if hook != nil {
		hook(req)
	}

	id := fmt.Sprintf("req-%d", n)
	w.Header().Set("X-Request-Id", id)
	if req.Format == FormatAnthropic {
		w.Header().Set("Request-Id", id)
	}
	switch {
	case req.Format == "":
		s.writeError(w, FormatChat, Response{Status: http.StatusNotFound}, "llmtest: no endpoint at "+r.URL.Path)
		return
	case r.Method != http.MethodPost:
		s.writeError(w, req.Format, Response{Status: http.StatusMethodNotAllowed}, "llmtest: use POST")
		return
	}
	resp, ok := s.next(req)
	if !ok {
		s.writeError(w, req.Format, Response{Status: http.StatusInternalServerError},
			fmt.Sprintf("llmtest: script exhausted: request %d has no scripted response and no fallback is set", n))
		return
	}
	s.answer(w, r, req, resp)
}

// answer renders resp in req's format.
func (s *Server) answer(w http.ResponseWriter, r *http.Request, req Request, resp Response) {
	if resp.isError() {
		s.writeError(w, req.Format, resp, "")
		return
	}
	if resp.Raw != "" {
		ct := "application/json"
		if req.Stream {
			ct = "text/event-stream"
		}
		status := resp.Status
		if status == 0 {
			status = http.StatusOK
		}
		writeHead(w, resp, status, ct)
		_, _ = io.WriteString(w, resp.Raw)
		return
	}
	model := req.Model()
	if model == "" {
		model = "fake-model"
	}
	switch {
	case req.Stream && req.Format == FormatChat:
		s.stream(w, r, resp, s.chatEvents(resp, model))
	case req.Stream && req.Format == FormatResponses:
		s.stream(w, r, resp, s.responsesEvents(resp, req, model))
	case req.Stream:
		s.stream(w, r, resp, s.anthropicEvents(resp, model))
	case req.Format == FormatChat:
		s.single(w, r, resp, s.chatCompletion(resp, model))
	case req.Format == FormatResponses:
		s.single(w, r, resp, s.responsesObject(resp, req, model))
	default:
		s.single(w, r, resp, s.anthropicMessage(resp, model))
	}
}
