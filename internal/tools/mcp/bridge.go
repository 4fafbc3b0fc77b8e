// Package mcp bridges MCP servers (internal/mcp) into a session's tool
// registry: each server tool becomes mcp__<server>__<tool> and runs
// through the tool pipeline like any other tool; servers with resources
// add mcp_list_resources and mcp_read_resource; the bridge's pre-execute
// middleware makes calls to servers with approval ask (and every call
// under the read-only preset) ask for approval.
package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/dsh-dev/dsh/internal/llm"
	"github.com/dsh-dev/dsh/internal/mcp"
	"github.com/dsh-dev/dsh/internal/tool"
	"github.com/dsh-dev/dsh/internal/tools/fs"
)

// callGrace is how much longer the pipeline's limit on a call is than the
// server's tool_timeout, so the call's own MCP_TIMEOUT (which cancels the
// request on the server) is what the model reads.
const callGrace = 5 * time.Second

// Options configure a session's bridge.
type Options struct {
	// Images reports whether the call's model route accepts images.
	Images func(*tool.Call) bool
	// MaxImageSide and MaxImageBytes bound images (0: fs defaults).
	MaxImageSide, MaxImageBytes int
	// MaxText bounds one result's text (0: DefaultMaxText).
	MaxText int
	// ReadOnly reports whether the session is under the read-only
	// preset now: then every MCP tool call asks.
	ReadOnly func() bool
	// Warn reports a tool that could not be registered.
	Warn func(msg string)
	// Offer, when set, decides which model-facing names this session is
	// offered (a subagent child's tool filter); nil offers every tool.
	Offer func(name string) bool
}

// Bridge keeps one registry in step with a set of servers.
type Bridge struct {
	reg     *tool.Registry
	o       Options
	servers []*mcp.Server

	mu sync.Mutex
	// owned maps every name the bridge registered to its entry.
	owned  map[string]entry
	stops  []func()
	closed bool
	// warned keeps a name that could not be registered from being
	// reported again at every resync.
	warned map[string]bool
	// down maps a tool withdrawn because its server lost the connection
	// to that server, so a call the model makes to it meanwhile ends
	// MCP_DISCONNECTED rather than as an unknown tool.
	down map[string]*mcp.Server
	// claims maps each model-facing name to the server that first
	// offered it.
	claims map[string]*mcp.Server
}

type entry struct {
	server *mcp.Server
	tool   *mcp.Tool // nil for the resource tools
}

// Bind registers the servers' current tools into reg and keeps them in
// step until Close: a resync or reconnection re-registers, a lost
// connection unregisters. A name already registered by something else
// (a built-in tool) is never replaced.
func Bind(reg *tool.Registry, servers []*mcp.Server, o Options) *Bridge {
	b := &Bridge{reg: reg, o: o, servers: slices.Clone(servers), owned: map[string]entry{}, warned: map[string]bool{}, down: map[string]*mcp.Server{}, claims: map[string]*mcp.Server{}}
	reg.AddExplainer(b.explain)
	for _, s := range b.servers {
		b.stops = append(b.stops, s.Watch(b.sync))
	}
	b.sync()
	return b
}

// Close stops following the servers and unregisters the bridge's tools.
func (b *Bridge) Close() {
	b.mu.Lock()
	stops := b.stops
	b.stops, b.closed = nil, true
	b.mu.Unlock()
	for _, stop := range stops {
		stop()
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for name := range b.owned {
		b.reg.Unregister("", name)
	}
	b.owned = map[string]entry{}
}

// Lookup returns the bound server with the given name.
func (b *Bridge) Lookup(name string) (*mcp.Server, bool) {
	for _, s := range b.servers {
		if s.Name() == name {
			return s, true
		}
	}
	return nil, false
}

// Server returns the bound server that owns the model-facing tool name.
func (b *Bridge) Server(name string) (*mcp.Server, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	e, ok := b.owned[name]
	return e.server, ok && e.tool != nil
}

// sync reconciles the registry with the servers' current tools.
// The servers are read under b.mu, so two servers' notifications cannot
// interleave into a stale view (servers never call back while holding
// their own lock).
func (b *Bridge) sync() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return
	}
	want := map[string]entry{}
	resources := false
	for _, s := range b.servers {
		for _, t := range s.Tools() {
			if !b.offered(t.Name) {
				continue
			}
			// Two servers' tools with one name (validated server names
			// prevent it; servers bound from two managers may not): the
			// server listed first keeps it, the later tool is dropped and
			// said so, never silently shadowed.
			// A name stays with the server that first offered it, even
			// while that server is disconnected: a call never silently
			// reaches another server than the one the name stood for.
			if first, claimed := b.claims[t.Name]; claimed && first != s {
				b.warnOnce(s.Name()+"\x00"+t.Name, "mcp server %s: tool %s dropped: its name %s is already the name of a tool of server %s",
					s.Name(), t.Raw, t.Name, first.Name())
				continue
			}
			b.claims[t.Name] = s
			want[t.Name] = entry{server: s, tool: t}
		}
		resources = resources || s.HasResources()
	}
	for name, have := range b.owned {
		if have.tool == nil {
			continue
		}
		if w, ok := want[name]; !ok || w.tool != have.tool {
			b.reg.Unregister("", name)
			delete(b.owned, name)
			if !ok && !have.server.Connected() {
				b.down[name] = have.server
			}
		}
	}
	for name, s := range b.down {
		if s.Connected() {
			delete(b.down, name) // back, or gone for good after a resync
		}
	}
	for _, name := range slices.Sorted(maps.Keys(want)) {
		if _, ok := b.owned[name]; ok {
			continue
		}
		e := want[name]
		if _, taken := b.reg.Lookup("", name); taken {
			b.warnOnce(name, "mcp server %s: tool %s not offered: the name is taken by another tool", e.server.Name(), name)
			continue
		}
		if err := b.reg.Register("", b.definition(e.server, e.tool)); err != nil {
			b.warnOnce(name, "mcp server %s: tool %s not offered: %v", e.server.Name(), name, err)
			continue
		}
		b.owned[name] = e
	}
	_, haveList := b.owned[ListResourcesName]
	_, haveRead := b.owned[ReadResourceName]
	haveRes := haveList || haveRead
	switch {
	case resources && !haveRes:
		for _, def := range []tool.Definition{b.listResources(), b.readResource()} {
			if !b.offered(def.Name) {
				continue
			}
			if _, taken := b.reg.Lookup("", def.Name); taken {
				b.warnOnce(def.Name, "mcp: %s not offered: the name is taken by another tool", def.Name)
				continue
			}
			if err := b.reg.Register("", def); err != nil {
				b.warnOnce(def.Name, "mcp: %s not offered: %v", def.Name, err)
				continue
			}
			b.owned[def.Name] = entry{}
		}
	case !resources && haveRes:
		for _, name := range []string{ListResourcesName, ReadResourceName} {
			if _, ok := b.owned[name]; ok {
				b.reg.Unregister("", name)
				delete(b.owned, name)
			}
		}
	}
}

// explain is the registry's explainer for tools withdrawn while their
// server is disconnected.
func (b *Bridge) explain(name string) *tool.Error {
	b.mu.Lock()
	defer b.mu.Unlock()
	s, ok := b.down[name]
	if !ok || b.closed || s.Connected() {
		return nil
	}
	why := s.Status().LastError
	if why == "" {
		why = "the connection ended"
	}
	return tool.Errorf(mcp.CodeDisconnected, "tool %s is unavailable: MCP server %s is disconnected (%s); its tools return when it reconnects", name, s.Name(), why)
}

func (b *Bridge) offered(name string) bool { return b.o.Offer == nil || b.o.Offer(name) }

// warnOnce reports a problem with name the first time it happens.
// Called with b.mu held.
func (b *Bridge) warnOnce(name, format string, args ...any) {
	if b.warned[name] {
		return
	}
	b.warned[name] = true
	if b.o.Warn != nil {
		b.o.Warn(fmt.Sprintf(format, args...))
	}
}

// description is the model-facing description of a server tool.
func description(s *mcp.Server, t *mcp.Tool) string {
	d := strings.TrimSpace(t.Description)
	if d == "" {
		d = strings.TrimSpace(t.Title)
	}
	head := "[MCP server " + s.Name() + ", tool " + t.Raw + "]"
	if d == "" {
		return head
	}
	return head + " " + d
}

func (b *Bridge) definition(s *mcp.Server, t *mcp.Tool) tool.Definition {
	cfg := s.Config()
	def := tool.Definition{
		Name:        t.Name,
		Description: description(s, t),
		Parameters:  t.InputSchema,
		Timeout:     cfg.ToolTimeout + callGrace,
		Execute: func(ctx context.Context, c *tool.Call) (tool.Result, error) {
			return b.call(ctx, s, t, c)
		},
	}
	// Annotations never grant approval; a read-only hint from a server
	// the user trusts only lets its calls overlap.
	if t.ReadOnlyHint && cfg.Approval == mcp.ApprovalAuto {
		def.ConcurrencySafe = func(json.RawMessage) bool { return true }
	}
	return def
}

// toolError turns an internal/mcp error into a tool error with its code;
// a cancellation stays a plain error, which the pipeline reports as the
// aborted call it is.
func toolError(err error) error {
	var me *mcp.Error
	if errors.As(err, &me) {
		return &tool.Error{Name: "ToolError", Code: me.Code, Message: err.Error()}
	}
	return err
}

func (b *Bridge) contentOptions(c *tool.Call) contentOptions {
	o := contentOptions{maxImageSide: b.o.MaxImageSide, maxImage: b.o.MaxImageBytes, maxText: b.o.MaxText}
	if o.maxText <= 0 {
		o.maxText = DefaultMaxText
	}
	if o.maxImageSide <= 0 {
		o.maxImageSide = fs.DefaultMaxImageSide
	}
	if o.maxImage <= 0 {
		o.maxImage = fs.DefaultMaxImageBytes
	}
	o.images = b.o.Images != nil && b.o.Images(c)
	return o
}

type callMeta struct {
	Server       string `json:"server"`
	Tool         string `json:"tool"`
	Structured   bool   `json:"structured,omitempty"`
	SchemaNotice string `json:"schemaNotice,omitempty"`
}

func (b *Bridge) call(ctx context.Context, s *mcp.Server, t *mcp.Tool, c *tool.Call) (tool.Result, error) {
	res, err := s.CallTool(ctx, t.Raw, c.Arguments)
	if err != nil {
		return tool.Result{}, toolError(err)
	}
	content := blocks(res.Content, b.contentOptions(c))
	if len(content) == 0 && res.StructuredContent != nil {
		content = []llm.Block{llm.TextBlock(structuredText(res.StructuredContent))}
	}
	meta := callMeta{Server: s.Name(), Tool: t.Raw, Structured: res.StructuredContent != nil}
	if res.IsError {
		msg := "the tool reported an error"
		if txt := firstText(content); txt != "" {
			msg = txt
		}
		return tool.Result{Content: prefixed("Error: ", content), IsError: true, Meta: marshal(meta),
			Error: &tool.Error{Name: "ToolError", Code: mcp.CodeToolError, Message: msg}}, nil
	}
	if err := t.CheckStructured(res); err != nil {
		if mcp.CodeOf(err) == mcp.CodeSchema {
			return tool.Result{}, toolError(err)
		}
		meta.SchemaNotice = err.Error()
	}
	if len(content) == 0 {
		content = []llm.Block{llm.TextBlock("(the tool returned no content)")}
	}
	return tool.Result{Content: content, Meta: marshal(meta)}, nil
}

func firstText(bs []llm.Block) string {
	for _, b := range bs {
		if b.Type == llm.BlockText {
			return b.Text
		}
	}
	return ""
}

func prefixed(p string, bs []llm.Block) []llm.Block {
	out := slices.Clone(bs)
	for i := range out {
		if out[i].Type == llm.BlockText {
			out[i].Text = p + out[i].Text
			return out
		}
	}
	return append([]llm.Block{llm.TextBlock(strings.TrimSpace(p) + " the tool reported an error")}, out...)
}

func marshal(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	return b
}

// PreExecute is the tools/pre-execute middleware of MCP approval: a call
// to a server whose approval is ask asks (reason "mcp:<server>"), and so
// does every MCP call under the read-only preset; a deny or cancel from
// the rest of the chain stands. Server annotations play no part.
func (b *Bridge) PreExecute(ctx context.Context, c *tool.Call, next func(context.Context) tool.Decision) tool.Decision {
	d := next(ctx)
	s, ok := b.Server(c.Name)
	if !ok || d.Kind == tool.Deny || d.Kind == tool.Cancel {
		return d
	}
	readOnly := b.o.ReadOnly != nil && b.o.ReadOnly()
	if s.Config().Approval == mcp.ApprovalAuto && !readOnly {
		return d
	}
	reason := "mcp:" + s.Name()
	if readOnly && s.Config().Approval == mcp.ApprovalAuto {
		reason += " (read-only preset)"
	}
	if d.Kind == tool.Ask && d.Reason != "" {
		reason = d.Reason + "; " + reason
	}
	return tool.Decision{Kind: tool.Ask, Reason: reason}
}
