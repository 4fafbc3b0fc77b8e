// Package server is dsh serve's HTTP face: a JSON API over the session
// host (internal/host) and the workspace registry, Server-Sent Event
// streams of session logs and of the host feed, and the embedded web UI.
//
// Every request passes the fence (Host, Origin and Sec-Fetch-Site checks
// against DNS rebinding and cross-site use) and, under /api except
// /api/health, the token (a bearer header or the dsh_token cookie). Every
// route is one row of the table routes builds; the mux and the OpenAPI
// test both read that table.
package server

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/dsh-dev/dsh/internal/app"
	"github.com/dsh-dev/dsh/internal/host"
	"github.com/dsh-dev/dsh/internal/workspace"
)

// Options configure a Server.
type Options struct {
	// Token is required on every /api route but /api/health.
	Token string
	// Listen is the address the server listens on (host:port); its host is
	// accepted in the Host header.
	Listen string
	// TrustedHosts are further Host header values to accept (a name, or
	// name:port).
	TrustedHosts []string
	// Version is reported by /api/health.
	Version string
	// App answers /api/config (models and presets); nil leaves those lists
	// empty.
	App *app.App
	// MaxBody bounds request bodies (0: DefaultMaxBody).
	MaxBody int64
	// Heartbeat is the SSE ping interval (0: DefaultHeartbeat).
	Heartbeat time.Duration
	// Home is the directory /api/directories starts at (""; the user's
	// home directory).
	Home string
	// Now is the clock of the sign-in codes' expiry (nil: time.Now).
	Now func() time.Time
}

// Server is the http.Handler of dsh serve.
type Server struct {
	host   *host.Host
	reg    *workspace.Registry
	opts   Options
	fence  *fence
	mux    *http.ServeMux
	routes []Route
	public map[string]bool // mux patterns of the routes that need no token

	// base ends every stream when the server shuts down.
	base    context.Context
	stopAll context.CancelFunc
	// logins are the one-time sign-in codes (NewLoginCode).
	logins loginCodes

	mu      sync.Mutex
	closed  bool // guarded by mu
	streams sync.WaitGroup
}

// Route is one API route: the table the mux registers and the OpenAPI
// document is checked against.
type Route struct {
	Method  string // GET, POST, PATCH, DELETE
	Pattern string // a net/http pattern path: /api/sessions/{id}
	// Public routes need no token.
	Public  bool
	handler http.HandlerFunc
}

// New builds the server over h and reg.
func New(h *host.Host, reg *workspace.Registry, opts Options) *Server {
	if opts.MaxBody <= 0 {
		opts.MaxBody = DefaultMaxBody
	}
	if opts.Heartbeat <= 0 {
		opts.Heartbeat = DefaultHeartbeat
	}
	s := &Server{
		host: h, reg: reg, opts: opts,
		fence: newFence(opts.Listen, opts.TrustedHosts),
		mux:   http.NewServeMux(),
	}
	s.base, s.stopAll = context.WithCancel(context.Background())
	s.routes = s.routeTable()
	s.public = map[string]bool{}
	for _, r := range s.routes {
		s.mux.HandleFunc(r.Method+" "+r.Pattern, r.handler)
		s.public[r.Method+" "+r.Pattern] = r.Public
	}
	// Anything else under /api is a JSON 404 (or 405), never the UI.
	s.mux.HandleFunc("/api/", s.notFound)
	s.mux.Handle("/", s.static())
	return s
}

// Routes returns the API route table.
func (s *Server) Routes() []Route { return append([]Route(nil), s.routes...) }

// ServeHTTP applies the fence, the token and the body rules, then routes.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("X-Content-Type-Options", "nosniff")
	if err := s.fence.check(r); err != nil {
		writeError(w, err)
		return
	}
	if r.URL.Path == LoginPath {
		s.login(w, r)
		return
	}
	if !strings.HasPrefix(r.URL.Path, "/api/") {
		s.mux.ServeHTTP(w, r)
		return
	}
	_, pattern := s.mux.Handler(r)
	if !s.public[pattern] && !authorized(r, s.opts.Token) {
		writeError(w, newError(CodeUnauthorized, "a valid token is required: open the URL dsh serve printed, or send Authorization: Bearer TOKEN (the token is in $DSH_HOME/serve/token)"))
		return
	}
	if err := checkBody(r, s.opts.MaxBody); err != nil {
		writeError(w, err)
		return
	}
	s.mux.ServeHTTP(w, r)
}

// Close ends every open stream and waits for their handlers to finish.
// Call it before http.Server.Shutdown (or register it with
// RegisterOnShutdown), since streams never become idle on their own.
func (s *Server) Close() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.stopAll()
	s.streams.Wait()
}

// streamContext is r's context, also ended by Close; ok is false once
// the server is closing. The caller must call done when the stream ends.
func (s *Server) streamContext(r *http.Request) (ctx context.Context, done func(), ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, nil, false
	}
	s.streams.Add(1)
	ctx, cancel := context.WithCancel(r.Context())
	stop := context.AfterFunc(s.base, cancel)
	return ctx, func() { stop(); cancel(); s.streams.Done() }, true
}

// notFound answers an /api path no route has: 405 when another method
// has it, else 404.
func (s *Server) notFound(w http.ResponseWriter, r *http.Request) {
	var allow []string
	for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodPatch, http.MethodDelete} {
		probe := r.Clone(r.Context())
		probe.Method = m
		if _, p := s.mux.Handler(probe); p != "" && p != "/api/" && p != "/" {
			allow = append(allow, m)
		}
	}
	if len(allow) > 0 {
		w.Header().Set("Allow", strings.Join(allow, ", "))
		writeError(w, newError(CodeMethodNotAllowed, r.Method+" is not allowed on "+r.URL.Path))
		return
	}
	writeError(w, newError(CodeNotFound, "no API route "+r.Method+" "+r.URL.Path))
}
