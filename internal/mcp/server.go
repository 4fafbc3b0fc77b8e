package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/dsh-dev/dsh/internal/schema"
)

// Server states.
const (
	StateStarting     = "starting"
	StateConnected    = "connected"
	StateReconnecting = "reconnecting"
	StateFailed       = "failed"
	StateDisabled     = "disabled"
	StateStopped      = "stopped"
)

// Tool is one tool a server offers, as dsh offers it to the model.
type Tool struct {
	Server string
	// Raw is the server's own name for the tool (what tools/call uses).
	Raw string
	// Name is the model-facing name (ToolName(Server, Raw)).
	Name        string
	Title       string
	Description string
	// InputSchema is the arguments schema, compact JSON with sorted keys,
	// so an unchanged listing gives identical bytes.
	InputSchema json.RawMessage
	// OutputSchema is the structured-content schema (nil when none).
	OutputSchema json.RawMessage
	// ReadOnlyHint is the server's claim that the tool changes nothing.
	// It never grants approval.
	ReadOnlyHint bool

	// output is OutputSchema compiled; outputErr says why it could not
	// be (a keyword outside internal/schema's subset).
	output    *schema.Schema
	outputErr error
}

// Status is a server's state as dsh mcp list shows it.
type Status struct {
	Name      string   `json:"name"`
	Transport string   `json:"transport"`
	State     string   `json:"state"`
	Tools     []string `json:"tools"`
	Resources bool     `json:"resources"`
	Prompts   bool     `json:"prompts"`
	Approval  string   `json:"approval"`
	Required  bool     `json:"required,omitempty"`
	LastError string   `json:"lastError,omitempty"`
	Source    string   `json:"source,omitempty"`
	// Reconnects counts successful reconnections, Resyncs tool-list
	// refreshes after notifications/tools/list_changed.
	Reconnects int `json:"reconnects"`
	Resyncs    int `json:"resyncs"`
	// PID is the stdio server's process id while it is connected.
	PID int `json:"pid,omitempty"`
}

// Server supervises one configured server: it connects, keeps the tool
// list current, reconnects after a crash and reports its state. Its
// goroutine is owned by the Manager and ends at Manager.Close.
type Server struct {
	cfg ServerConfig
	o   Options

	resync chan struct{} // a tools/list_changed arrived (buffered 1)
	done   chan struct{} // closed when run returns

	mu         sync.Mutex
	state      string
	conn       *conn
	tools      []*Tool
	caps       *sdk.ServerCapabilities
	lastErr    error
	reconnects int
	resyncs    int
	watchers   map[int]func()
	nextWatch  int
	// collided holds the raw names already reported as dropped for
	// taking another tool's model-facing name.
	collided map[string]bool
}

func newServer(cfg ServerConfig, o Options) *Server {
	return &Server{cfg: cfg.WithDefaults(), o: o, resync: make(chan struct{}, 1), done: make(chan struct{}), state: StateStarting, watchers: map[int]func(){}}
}

// Config returns the server's configuration (defaults filled in).
func (s *Server) Config() ServerConfig { return s.cfg }

// Name is the server's configured name.
func (s *Server) Name() string { return s.cfg.Name }

// Tools returns the current tool list, sorted by name; empty while the
// server is not connected.
func (s *Server) Tools() []*Tool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.tools)
}

// Connected reports whether the server is connected now.
func (s *Server) Connected() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.state == StateConnected
}

// HasResources reports whether the connected server offers resources.
func (s *Server) HasResources() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.state == StateConnected && s.caps != nil && s.caps.Resources != nil
}

// Status returns a snapshot of the server's state.
func (s *Server) Status() Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := Status{
		Name: s.cfg.Name, Transport: s.cfg.Transport(), State: s.state, Tools: []string{},
		Approval: s.cfg.Approval, Required: s.cfg.Required, Source: s.cfg.Source,
		Reconnects: s.reconnects, Resyncs: s.resyncs,
	}
	for _, t := range s.tools {
		st.Tools = append(st.Tools, t.Name)
	}
	if s.caps != nil && s.state == StateConnected {
		st.Resources, st.Prompts = s.caps.Resources != nil, s.caps.Prompts != nil
	}
	if s.lastErr != nil {
		st.LastError = s.lastErr.Error()
	}
	if s.conn != nil && s.conn.proc != nil {
		st.PID = s.conn.proc.Pid()
	}
	return st
}

// Watch calls f (from the server's goroutine, without locks held)
// after every change of the tool list or the connection state. The
// returned function stops the calls.
func (s *Server) Watch(f func()) (stop func()) {
	s.mu.Lock()
	id := s.nextWatch
	s.nextWatch++
	s.watchers[id] = f
	s.mu.Unlock()
	return func() {
		s.mu.Lock()
		delete(s.watchers, id)
		s.mu.Unlock()
	}
}

func (s *Server) notify() {
	s.mu.Lock()
	fs := make([]func(), 0, len(s.watchers))
	for _, id := range slices.Sorted(maps.Keys(s.watchers)) {
		fs = append(fs, s.watchers[id])
	}
	s.mu.Unlock()
	for _, f := range fs {
		f()
	}
}

// run is the server's supervisor loop. ready receives the outcome of the
// first connection attempt. A server that fails to start is not retried
// (it is skipped, or fails the run when required); a connection that
// ends later is re-established with exponential backoff, its tools
// unregistered meanwhile, until Backoff.Attempts consecutive attempts
// failed.
func (s *Server) run(ctx context.Context, ready chan<- error) {
	defer close(s.done)
	defer func() {
		// A server given up stays failed, with its reason.
		if st := s.Status().State; st != StateFailed {
			s.setState(StateStopped, nil)
		}
	}()
	b := s.o.Backoff.withDefaults()
	c, err := s.connect(ctx, false)
	if err != nil {
		// The state first, so whoever reads ready sees it.
		s.setState(StateFailed, err)
	}
	ready <- err
	if err != nil {
		return
	}
	outage := 0
	for {
		up := s.o.now()
		endErr := s.serve(ctx, c)
		c.close()
		if ctx.Err() != nil {
			return
		}
		// A connection that stayed up long enough ends the outage; one
		// that dies at once keeps counting (a crash loop).
		if s.o.now().Sub(up) >= b.StableAfter {
			outage = 0
		}
		s.down(fmt.Errorf("disconnected: %w", endErr))
		for {
			outage++
			if outage > b.Attempts {
				// Warn before publishing the state: whoever watches for
				// "failed" may read the warnings at once.
				gaveUp := fmt.Errorf("gave up after %d reconnection attempts; last: %w", b.Attempts, s.lastError())
				s.warn("mcp server %s: %v; its tools are unavailable", s.cfg.Name, gaveUp)
				s.setState(StateFailed, gaveUp)
				return
			}
			if !sleep(ctx, b.Delay(outage)) {
				return
			}
			c, err = s.connect(ctx, true)
			if err == nil {
				break
			}
			if ctx.Err() != nil {
				return
			}
			s.setState(StateReconnecting, err)
		}
	}
}

// warnCollision reports a dropped tool once per raw name for the
// server's lifetime (a resync lists it again).
func (s *Server) warnCollision(raw, msg string) {
	s.mu.Lock()
	said := s.collided[raw]
	if s.collided == nil {
		s.collided = map[string]bool{}
	}
	s.collided[raw] = true
	s.mu.Unlock()
	if !said {
		s.warn("%s", msg)
	}
}

func (s *Server) warn(format string, args ...any) {
	if s.o.Warn != nil {
		s.o.Warn(fmt.Sprintf(format, args...))
	}
}

func (s *Server) lastError() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lastErr
}

// connect dials, lists the tools and publishes the connection (counted
// as a reconnection when again is set).
func (s *Server) connect(ctx context.Context, again bool) (*conn, error) {
	sctx, cancel := context.WithTimeout(ctx, s.cfg.StartupTimeout)
	defer cancel()
	handlers := &sdk.ClientOptions{
		ToolListChangedHandler: func(context.Context, *sdk.ToolListChangedRequest) {
			select {
			case s.resync <- struct{}{}:
			default: // a resync is already pending; it will see this change too
			}
		},
	}
	c, err := dial(sctx, ctx, s.cfg, s.o, handlers)
	if err != nil {
		return nil, err
	}
	var caps *sdk.ServerCapabilities
	if r := c.session().InitializeResult(); r != nil {
		caps = r.Capabilities
	}
	var tools []*Tool
	if caps == nil || caps.Tools != nil {
		if tools, err = s.list(sctx, c.session()); err != nil {
			c.close()
			return nil, errorf(CodeStart, s.cfg.Name, "list tools: %w", err)
		}
	}
	s.mu.Lock()
	s.conn, s.tools, s.caps, s.state, s.lastErr = c, tools, caps, StateConnected, nil
	if again {
		s.reconnects++
	}
	s.mu.Unlock()
	s.notify()
	return c, nil
}

// serve waits for the connection to end, resyncing the tool list when
// the server says it changed.
func (s *Server) serve(ctx context.Context, c *conn) error {
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-c.done:
			return c.endErr
		case <-s.resync:
			s.refresh(ctx, c)
		}
	}
}

// refresh re-lists the tools; a failed listing keeps the previous list.
func (s *Server) refresh(ctx context.Context, c *conn) {
	lctx, cancel := context.WithTimeout(ctx, s.cfg.ToolTimeout)
	defer cancel()
	tools, err := s.list(lctx, c.session())
	s.mu.Lock()
	s.resyncs++
	if err != nil {
		s.lastErr = fmt.Errorf("tool list resync failed (keeping the previous list): %w", err)
		s.mu.Unlock()
		s.notify()
		return
	}
	if !slices.EqualFunc(s.tools, tools, sameTool) {
		// Unchanged tools keep their values, so a bridge re-registers
		// only what changed.
		old := map[string]*Tool{}
		for _, t := range s.tools {
			old[t.Name] = t
		}
		for i, t := range tools {
			if o, ok := old[t.Name]; ok && sameTool(o, t) {
				tools[i] = o
			}
		}
		s.tools = tools
	}
	s.mu.Unlock()
	// Watchers hear of every resync; an unchanged list keeps the very
	// same *Tool values, so a bridge re-registers nothing.
	s.notify()
}

func sameTool(x, y *Tool) bool {
	return x.Name == y.Name && x.Raw == y.Raw && x.Description == y.Description && x.Title == y.Title &&
		string(x.InputSchema) == string(y.InputSchema) && string(x.OutputSchema) == string(y.OutputSchema) && x.ReadOnlyHint == y.ReadOnlyHint
}

// down records a lost connection and unregisters the tools.
func (s *Server) down(err error) {
	s.mu.Lock()
	s.conn, s.tools, s.state, s.lastErr = nil, nil, StateReconnecting, err
	s.mu.Unlock()
	s.warn("mcp server %s: %v; reconnecting", s.cfg.Name, err)
	s.notify()
}

func (s *Server) setState(state string, err error) {
	s.mu.Lock()
	changed := s.state != state || len(s.tools) > 0
	s.state = state
	if err != nil {
		s.lastErr = err
	}
	if state != StateConnected {
		s.conn, s.tools = nil, nil
	}
	s.mu.Unlock()
	if changed {
		s.notify()
	}
}

// list fetches every page of the tool list and converts it.
func (s *Server) list(ctx context.Context, cs *sdk.ClientSession) ([]*Tool, error) {
	var out []*Tool
	seen := map[string]bool{}
	names := map[string]string{}
	for t, err := range cs.Tools(ctx, nil) {
		if err != nil {
			return nil, err
		}
		if seen[t.Name] {
			// An ambiguous list cannot be bridged faithfully: which of the
			// two would a call reach?
			return nil, fmt.Errorf("the server lists tool %q twice", t.Name)
		}
		seen[t.Name] = true
		if !s.cfg.Tools.Match(t.Name) {
			continue
		}
		bt, err := convertTool(s.cfg.Name, t)
		if err != nil {
			s.warn("mcp server %s: tool %s skipped: %v", s.cfg.Name, t.Name, err)
			continue
		}
		if other, dup := names[bt.Name]; dup {
			// Two raw names that map to one model-facing name (a crafted
			// name equal to another's normalised form): the first keeps
			// it, the later is dropped, and said so, never shadowed.
			s.warnCollision(t.Name, fmt.Sprintf("mcp server %s: tool %q dropped: it maps to %s, the name of its tool %q", s.cfg.Name, t.Name, bt.Name, other))
			continue
		}
		names[bt.Name] = t.Name
		out = append(out, bt)
	}
	slices.SortFunc(out, func(a, b *Tool) int {
		switch {
		case a.Name < b.Name:
			return -1
		case a.Name > b.Name:
			return 1
		}
		return 0
	})
	return out, nil
}

func convertTool(server string, t *sdk.Tool) (*Tool, error) {
	in, err := canonicalJSON(t.InputSchema)
	if err != nil {
		return nil, fmt.Errorf("input schema: %w", err)
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(in, &obj) != nil || obj == nil || string(obj["type"]) != `"object"` {
		return nil, errors.New(`input schema is not an object schema ("type": "object")`)
	}
	bt := &Tool{Server: server, Raw: t.Name, Name: ToolName(server, t.Name), Title: t.Title, Description: t.Description, InputSchema: in}
	if t.Annotations != nil {
		bt.ReadOnlyHint = t.Annotations.ReadOnlyHint
	}
	if t.OutputSchema != nil {
		out, err := canonicalJSON(t.OutputSchema)
		if err != nil {
			return nil, fmt.Errorf("output schema: %w", err)
		}
		bt.OutputSchema = out
		bt.output, bt.outputErr = schema.Compile(out)
	}
	return bt, nil
}

// canonicalJSON re-encodes a decoded JSON value: objects get sorted keys
// and no insignificant space, so equal schemas have equal bytes.
func canonicalJSON(v any) (json.RawMessage, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var generic any
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	if err := d.Decode(&generic); err != nil {
		return nil, err
	}
	return json.Marshal(generic)
}

// sleep waits d or until ctx ends; it reports whether d passed.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
