// Package mcp is dsh's Model Context Protocol client: it starts the
// configured servers (stdio children in guarded process groups with a
// scrubbed environment, or streamable HTTP endpoints), keeps each one's
// tool list current (paging, notifications/tools/list_changed resyncs),
// reconnects a server that crashed with exponential backoff, and calls
// tools, resources and prompts with stable error codes. It uses the
// official Go SDK. The bridge to dsh's tool pipeline is internal/tools/mcp.
package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// Backoff is the reconnection schedule of a server whose connection
// ended: attempt n waits Initial·2^(n-1), capped at Max; after Attempts
// failed attempts in one outage the server is given up. A connection that
// stays up StableAfter ends the outage (so a server that crashes right
// after every start is a crash loop, not a fresh outage each time).
type Backoff struct {
	Initial     time.Duration
	Max         time.Duration
	Attempts    int
	StableAfter time.Duration
}

// DefaultBackoff is 500 ms doubling to 30 s, 10 attempts per outage.
var DefaultBackoff = Backoff{Initial: 500 * time.Millisecond, Max: 30 * time.Second, Attempts: 10, StableAfter: 30 * time.Second}

func (b Backoff) withDefaults() Backoff {
	d := DefaultBackoff
	if b.Initial > 0 {
		d.Initial = b.Initial
	}
	if b.Max > 0 {
		d.Max = b.Max
	}
	if b.Attempts > 0 {
		d.Attempts = b.Attempts
	}
	if b.StableAfter > 0 {
		d.StableAfter = b.StableAfter
	}
	return d
}

// Delay is the wait before reconnection attempt n (1-based).
func (b Backoff) Delay(n int) time.Duration {
	b = b.withDefaults()
	d := b.Initial
	for i := 1; i < n && d < b.Max; i++ {
		d *= 2
	}
	return min(d, b.Max)
}

// Options configure a Manager.
type Options struct {
	// Dir is the working directory of stdio servers without cwd.
	Dir string
	// ClientVersion is the version dsh reports in the handshake.
	ClientVersion string
	// Backoff is the reconnection schedule (zero fields: DefaultBackoff).
	Backoff Backoff
	// Warn reports a problem that does not stop dsh (a skipped server, a
	// lost connection); nil drops them.
	Warn func(msg string)
	// Trace, when set, sees every frame dsh writes to a stdio server.
	Trace func(server string, frame []byte)
	// Transport, when set and returning a transport for a server, is
	// used instead of starting its command or reaching its url: a server
	// implemented inside the process (embedding, tests). It is called for
	// every connection attempt.
	Transport func(cfg ServerConfig) (sdk.Transport, error)

	clock func() time.Time
}

func (o Options) now() time.Time {
	if o.clock != nil {
		return o.clock()
	}
	return time.Now()
}

// Manager runs a set of servers for as long as it is open.
type Manager struct {
	servers []*Server // in configuration order
	cancel  context.CancelFunc
	once    sync.Once
}

// Start starts every enabled server in parallel and waits until each
// has connected or failed (each bounded by its startup_timeout). A
// required server that fails makes Start fail (and stop the others);
// any other failure is reported through Options.Warn and the server's
// status, and its tools are simply absent. ctx bounds the start-up only.
func Start(ctx context.Context, cfgs []ServerConfig, o Options) (*Manager, error) {
	if err := ValidateSet(cfgs); err != nil {
		return nil, err
	}
	lifetime, cancel := context.WithCancel(context.WithoutCancel(ctx))
	m := &Manager{cancel: cancel}
	type started struct {
		s     *Server
		ready chan error
	}
	var pending []started
	for _, cfg := range cfgs {
		s := newServer(cfg, o)
		m.servers = append(m.servers, s)
		if cfg.Disabled {
			s.state = StateDisabled
			close(s.done)
			continue
		}
		ready := make(chan error, 1)
		pending = append(pending, started{s, ready})
		go s.run(lifetime, ready)
	}
	var errs []error
	for _, p := range pending {
		select {
		case err := <-p.ready:
			if err == nil {
				continue
			}
			if p.s.cfg.Required {
				errs = append(errs, fmt.Errorf("required mcp server %s failed to start: %w", p.s.cfg.Name, err))
			} else if o.Warn != nil {
				o.Warn(fmt.Sprintf("mcp server %s skipped: %v", p.s.cfg.Name, err))
			}
		case <-ctx.Done():
			errs = append(errs, fmt.Errorf("mcp servers: start-up interrupted: %w", ctx.Err()))
		}
		if ctx.Err() != nil {
			break
		}
	}
	if len(errs) > 0 {
		m.Close()
		return nil, errors.Join(errs...)
	}
	return m, nil
}

// Close stops every server (each stdio server's process group is torn
// down) and waits for their goroutines. Safe to call more than once.
func (m *Manager) Close() {
	if m == nil {
		return
	}
	m.once.Do(func() {
		m.cancel()
		var wg sync.WaitGroup
		for _, s := range m.servers {
			wg.Go(func() {
				<-s.done
				s.mu.Lock()
				c := s.conn
				s.mu.Unlock()
				if c != nil {
					c.close()
				}
			})
		}
		wg.Wait()
	})
}

// Servers returns the servers in configuration order.
func (m *Manager) Servers() []*Server {
	if m == nil {
		return nil
	}
	return slices.Clone(m.servers)
}

// Server returns the named server.
func (m *Manager) Server(name string) (*Server, bool) {
	if m == nil {
		return nil, false
	}
	for _, s := range m.servers {
		if s.cfg.Name == name {
			return s, true
		}
	}
	return nil, false
}

// Status returns every server's status in configuration order.
func (m *Manager) Status() []Status {
	var out []Status
	for _, s := range m.Servers() {
		out = append(out, s.Status())
	}
	return out
}

// errCallTimeout is the cause of a call's own deadline.
var errCallTimeout = errors.New("mcp call timeout")

// session returns the live session or MCP_DISCONNECTED.
func (s *Server) session() (*conn, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.conn == nil || s.state != StateConnected {
		why := "it is " + s.state
		if s.lastErr != nil {
			why += ": " + s.lastErr.Error()
		}
		return nil, errorf(CodeDisconnected, s.cfg.Name, "not connected (%s)", why)
	}
	return s.conn, nil
}

// classify turns an SDK error of a request into a coded error. ctx is
// the caller's context and cctx the request's own (with the timeout).
func (s *Server) classify(ctx, cctx context.Context, c *conn, what string, err error) error {
	switch {
	case ctx.Err() != nil:
		// The caller gave up (the turn was cancelled); the SDK has sent
		// notifications/cancelled for the request.
		return fmt.Errorf("mcp server %s: %s cancelled: %w", s.cfg.Name, what, context.Cause(ctx))
	case errors.Is(context.Cause(cctx), errCallTimeout):
		return errorf(CodeTimeout, s.cfg.Name, "%s: no answer within %s (the request was cancelled on the server)", what, s.cfg.ToolTimeout)
	}
	select {
	case <-c.done:
		return errorf(CodeDisconnected, s.cfg.Name, "%s: the connection ended: %v", what, c.endErr)
	default:
	}
	if errors.Is(err, sdk.ErrConnectionClosed) {
		return errorf(CodeDisconnected, s.cfg.Name, "%s: %w", what, err)
	}
	return errorf(CodeProtocol, s.cfg.Name, "%s: %w", what, err)
}

// CallTool calls the server's tool raw with args (a JSON object) under
// tool_timeout. The result is returned as the server sent it; see
// CheckStructured for output-schema validation.
func (s *Server) CallTool(ctx context.Context, raw string, args json.RawMessage) (*sdk.CallToolResult, error) {
	c, err := s.session()
	if err != nil {
		return nil, err
	}
	if len(args) == 0 {
		args = json.RawMessage("{}")
	}
	cctx, cancel := context.WithTimeoutCause(ctx, s.cfg.ToolTimeout, errCallTimeout)
	defer cancel()
	res, err := c.session().CallTool(cctx, &sdk.CallToolParams{Name: raw, Arguments: args})
	if err != nil {
		return nil, s.classify(ctx, cctx, c, "tools/call "+raw, err)
	}
	return res, nil
}

// Lookup returns the current tool with the given model-facing name.
func (s *Server) Lookup(name string) (*Tool, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, t := range s.tools {
		if t.Name == name {
			return t, true
		}
	}
	return nil, false
}

// CheckStructured validates a result's structured content against the
// tool's output schema. It returns nil when there is nothing to check,
// MCP_SCHEMA on a mismatch (or structured content missing where the
// schema requires it), and an explanatory non-coded error when the schema
// uses keywords dsh does not validate.
func (t *Tool) CheckStructured(res *sdk.CallToolResult) error {
	if t.OutputSchema == nil || res.IsError {
		return nil
	}
	if t.outputErr != nil {
		return fmt.Errorf("output schema not checked: %w", t.outputErr)
	}
	if res.StructuredContent == nil {
		return errorf(CodeSchema, t.Server, "tool %s declares an output schema but returned no structured content", t.Raw)
	}
	b, err := json.Marshal(res.StructuredContent)
	if err != nil {
		return errorf(CodeSchema, t.Server, "tool %s: structured content: %w", t.Raw, err)
	}
	if err := t.output.Validate(b); err != nil {
		return errorf(CodeSchema, t.Server, "tool %s: structured content does not match its output schema: %w", t.Raw, err)
	}
	return nil
}

// Resource is one listed resource.
type Resource struct {
	Server      string `json:"server"`
	URI         string `json:"uri"`
	Name        string `json:"name"`
	Title       string `json:"title,omitempty"`
	Description string `json:"description,omitempty"`
	MIMEType    string `json:"mimeType,omitempty"`
}

// ListResources lists one page of the server's resources.
func (s *Server) ListResources(ctx context.Context, cursor string) ([]Resource, string, error) {
	c, err := s.session()
	if err != nil {
		return nil, "", err
	}
	cctx, cancel := context.WithTimeoutCause(ctx, s.cfg.ToolTimeout, errCallTimeout)
	defer cancel()
	res, err := c.session().ListResources(cctx, &sdk.ListResourcesParams{Cursor: cursor})
	if err != nil {
		return nil, "", s.classify(ctx, cctx, c, "resources/list", err)
	}
	out := make([]Resource, 0, len(res.Resources))
	for _, r := range res.Resources {
		out = append(out, Resource{Server: s.cfg.Name, URI: r.URI, Name: r.Name, Title: r.Title, Description: r.Description, MIMEType: r.MIMEType})
	}
	return out, res.NextCursor, nil
}

// ReadResource reads one resource.
func (s *Server) ReadResource(ctx context.Context, uri string) ([]*sdk.ResourceContents, error) {
	c, err := s.session()
	if err != nil {
		return nil, err
	}
	cctx, cancel := context.WithTimeoutCause(ctx, s.cfg.ToolTimeout, errCallTimeout)
	defer cancel()
	res, err := c.session().ReadResource(cctx, &sdk.ReadResourceParams{URI: uri})
	if err != nil {
		return nil, s.classify(ctx, cctx, c, "resources/read "+uri, err)
	}
	return res.Contents, nil
}

// Prompt is one listed prompt.
type Prompt struct {
	Server      string   `json:"server"`
	Name        string   `json:"name"`
	Description string   `json:"description,omitempty"`
	Arguments   []string `json:"arguments,omitempty"`
}

// ListPrompts lists every prompt of the server (all pages).
func (s *Server) ListPrompts(ctx context.Context) ([]Prompt, error) {
	c, err := s.session()
	if err != nil {
		return nil, err
	}
	cctx, cancel := context.WithTimeoutCause(ctx, s.cfg.ToolTimeout, errCallTimeout)
	defer cancel()
	var out []Prompt
	for p, err := range c.session().Prompts(cctx, nil) {
		if err != nil {
			return nil, s.classify(ctx, cctx, c, "prompts/list", err)
		}
		pr := Prompt{Server: s.cfg.Name, Name: p.Name, Description: p.Description}
		for _, a := range p.Arguments {
			pr.Arguments = append(pr.Arguments, a.Name)
		}
		out = append(out, pr)
	}
	return out, nil
}

// GetPrompt renders a prompt with its arguments.
func (s *Server) GetPrompt(ctx context.Context, name string, args map[string]string) (*sdk.GetPromptResult, error) {
	c, err := s.session()
	if err != nil {
		return nil, err
	}
	cctx, cancel := context.WithTimeoutCause(ctx, s.cfg.ToolTimeout, errCallTimeout)
	defer cancel()
	res, err := c.session().GetPrompt(cctx, &sdk.GetPromptParams{Name: name, Arguments: args})
	if err != nil {
		return nil, s.classify(ctx, cctx, c, "prompts/get "+name, err)
	}
	return res, nil
}
