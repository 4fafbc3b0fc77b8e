package app

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"

	"go.yaml.in/yaml/v4"

	"github.com/dsh-dev/dsh/internal/compose"
	"github.com/dsh-dev/dsh/internal/mcp"
	"github.com/dsh-dev/dsh/internal/permission"
	"github.com/dsh-dev/dsh/internal/prompt"
	"github.com/dsh-dev/dsh/internal/sandbox"
	"github.com/dsh-dev/dsh/internal/tool"
	toolsmcp "github.com/dsh-dev/dsh/internal/tools/mcp"
)

// mcpServerDef is the value of an "mcp-server" row: one MCP server whose
// tools (and resources) every session of this process is offered.
type mcpServerDef struct {
	mcp.ServerConfig `yaml:",inline"`
}

// DumpConfig implements compose.Dumper.
func (d mcpServerDef) DumpConfig() any { return d.ServerConfig }

func decodeMCPServer(n *yaml.Node) (any, error) {
	d, err := compose.Decode(n, mcpServerDef{})
	if err != nil {
		return nil, err
	}
	if err := d.Validate(); err != nil {
		return nil, err
	}
	return d, nil
}

func registerMCPModules(must func(compose.Module)) {
	must(compose.Module{Name: "mcp-server", Doc: "a Model Context Protocol server whose tools the agent may call", Decode: decodeMCPServer})
}

// mcpRows turns config.yaml's mcp_servers entries into "mcp-server"
// profile rows (ids "mcp.<name>"), so both spellings compose alike and a
// profile row with the same id replaces the entry.
func mcpRows(servers []mcp.ServerConfig) ([]compose.Row, error) {
	var rows []compose.Row
	for _, s := range servers {
		var node yaml.Node
		if err := node.Encode(s); err != nil {
			return nil, err
		}
		rows = append(rows, compose.Row{ID: "mcp." + s.Name, Module: "mcp-server", Config: node})
	}
	return rows, nil
}

// MCPServers returns the configured MCP servers of a composition, in row
// order, with their sources; it fails when two rows name the same server.
func MCPServers(comp *compose.Composition) ([]mcp.ServerConfig, error) {
	var out []mcp.ServerConfig
	for _, e := range comp.Entries {
		d, ok := e.Value.(mcpServerDef)
		if !ok {
			continue
		}
		c := d.ServerConfig
		c.Source = e.Source + " (row " + e.ID + ")"
		out = append(out, c)
	}
	if err := mcp.ValidateSet(out); err != nil {
		return nil, &ConfigError{err}
	}
	return out, nil
}

// mcpState is the process's MCP servers from the profile, started on the
// first session that is wired and shared by every session (subagent
// children included) until App.Close.
type mcpState struct {
	mu      sync.Mutex
	started bool
	mgr     *mcp.Manager
	err     error
}

// MCPWarn reports MCP problems that do not stop dsh; tests replace it.
var MCPWarn = func(msg string) { fmt.Fprintln(os.Stderr, "dsh: "+msg) }

// mcpManager starts the profile's servers once (in parallel, each
// bounded by its startup timeout) and returns them. A required server
// that failed fails every session of this process.
func (a *App) mcpManager(ctx context.Context, dir string) (*mcp.Manager, error) {
	a.mcp.mu.Lock()
	defer a.mcp.mu.Unlock()
	if a.mcp.started {
		return a.mcp.mgr, a.mcp.err
	}
	cfgs, err := MCPServers(a.Composition)
	if err != nil {
		return nil, err
	}
	a.mcp.started = true
	if len(cfgs) == 0 {
		return nil, nil
	}
	a.mcp.mgr, a.mcp.err = mcp.Start(ctx, cfgs, mcp.Options{Dir: dir, Warn: MCPWarn, ClientVersion: Version})
	return a.mcp.mgr, a.mcp.err
}

// MCP returns the process's profile servers once a session started them
// (nil before, or when none are configured).
func (a *App) MCP() *mcp.Manager {
	a.mcp.mu.Lock()
	defer a.mcp.mu.Unlock()
	return a.mcp.mgr
}

func (a *App) closeMCP() {
	a.mcp.mu.Lock()
	m := a.mcp.mgr
	a.mcp.mu.Unlock()
	m.Close()
}

// wireMCP offers the profile's servers and the session's own (extra:
// e.g. servers an ACP client names in session/new, started for this
// session only and stopped with it) to the session's registry, and
// installs the MCP approval middleware.
func (a *App) wireMCP(ctx context.Context, e *env, extra []mcp.ServerConfig, offer func(string) bool) (own *mcp.Manager, b *toolsmcp.Bridge, err error) {
	shared, err := a.mcpManager(ctx, e.cwd)
	if err != nil {
		return nil, nil, &ConfigError{err}
	}
	servers := shared.Servers()
	if len(extra) > 0 {
		for i := range extra {
			if extra[i].Source == "" {
				extra[i].Source = "session"
			}
			if _, dup := shared.Server(extra[i].Name); dup {
				return nil, nil, &ConfigError{fmt.Errorf("mcp server %s is configured in the profile and again for the session", extra[i].Name)}
			}
		}
		own, err = mcp.Start(ctx, extra, mcp.Options{Dir: e.cwd, Warn: MCPWarn, ClientVersion: Version})
		if err != nil {
			return nil, nil, err
		}
		servers = append(servers, own.Servers()...)
	}
	if len(servers) == 0 {
		return nil, nil, nil
	}
	images := e.route.Model.Images
	perm := e.perm
	log := e.log
	b = toolsmcp.Bind(e.reg, servers, toolsmcp.Options{
		Images: func(*tool.Call) bool { return images },
		ReadOnly: func() bool {
			if perm != nil {
				return perm.State().Mode == sandbox.ReadOnly
			}
			return permission.Current(log).Mode == sandbox.ReadOnly
		},
		Warn:  MCPWarn,
		Offer: offer,
	})
	e.pipe.UsePreExecute(b.PreExecute)
	e.runtime.Add(prompt.RuntimeSection{Name: "mcp:approval", Order: 30, Render: func() string {
		return mcpApprovalText(servers)
	}})
	return own, b, nil
}

// mcpApprovalText tells the model which MCP servers' calls need
// approval. It depends on the configuration only, so it does not change
// with a server's connection state.
func mcpApprovalText(servers []*mcp.Server) string {
	var ask, auto []string
	for _, s := range servers {
		if s.Config().Disabled {
			continue
		}
		if s.Config().Approval == mcp.ApprovalAuto {
			auto = append(auto, s.Name())
		} else {
			ask = append(ask, s.Name())
		}
	}
	if len(ask)+len(auto) == 0 {
		return ""
	}
	text := "MCP tools (mcp__SERVER__TOOL) are run by external servers, outside the sandbox."
	if len(ask) > 0 {
		text += " Every call to a tool of " + strings.Join(ask, ", ") + " needs approval."
	}
	if len(auto) > 0 {
		text += " The user trusts " + strings.Join(auto, ", ") + ": their calls need no approval, except under the read-only preset, where every MCP call does."
	}
	return text
}

// MCPServer returns the named MCP server of the session (the profile's or
// the session's own), connected or not.
func (s *Session) MCPServer(name string) (*mcp.Server, bool) {
	if s.mcpBridge == nil {
		return nil, false
	}
	return s.mcpBridge.Lookup(name)
}
