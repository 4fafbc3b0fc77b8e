package app

import (
	"fmt"
	"maps"
	"os/exec"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v4"

	"github.com/dsh-dev/dsh/internal/compose"
	"github.com/dsh-dev/dsh/internal/lsp"
	"github.com/dsh-dev/dsh/internal/tool"
	lsptool "github.com/dsh-dev/dsh/internal/tools/lsp"
)

// lspConfig is the configuration of the lsp tool row.
type lspConfig struct {
	// Servers maps a file extension (".go") to its language server. When
	// absent, .go files get gopls if it is on PATH (lsp.DefaultServers);
	// when that leaves no server, the tool is not offered.
	Servers map[string]lsp.ServerConfig `yaml:"servers,omitempty"`
	// StartTimeout bounds a server's start and initialize handshake;
	// RequestTimeout one request (defaults 60s each).
	StartTimeout   time.Duration `yaml:"start_timeout,omitempty"`
	RequestTimeout time.Duration `yaml:"request_timeout,omitempty"`
	// MaxResults bounds the locations listed; MaxHoverChars the hover text.
	MaxResults    int `yaml:"max_results,omitempty"`
	MaxHoverChars int `yaml:"max_hover_chars,omitempty"`
}

// buildLSP makes the session's server manager and the tool over it; the
// manager is stopped with the session.
func buildLSP(e *env, c lspConfig) (tool.Definition, error) {
	servers := c.Servers
	if servers == nil {
		servers = lsp.DefaultServers()
	}
	if len(servers) == 0 {
		return tool.Definition{}, fmt.Errorf("no language server configured: %w", errUnavailable)
	}
	m, err := lsp.New(lsp.Options{
		Workspace: e.cwd, Servers: servers, StartTimeout: c.StartTimeout, RequestTimeout: c.RequestTimeout,
		ClientVersion: Version,
	})
	if err != nil {
		return tool.Definition{}, err
	}
	e.closers = append(e.closers, m.Close)
	return lsptool.New(lsptool.Options{Manager: m, MaxResults: c.MaxResults, MaxHoverChars: c.MaxHoverChars}), nil
}

func registerLSPModules(must func(compose.Module)) {
	m := toolModule("tool/lsp", lsptool.Name, lspConfig{}, buildLSP)
	decode := m.Decode
	// A bad server table fails when the profile loads, naming the row,
	// not at the first session.
	m.Decode = func(n *yaml.Node) (any, error) {
		v, err := decode(n)
		if err != nil {
			return nil, err
		}
		if p, ok := v.(toolPlugin); ok {
			if row, ok := p.config.(lspRow); ok {
				if err := lsp.Validate(row.Options.Servers); err != nil {
					return nil, err
				}
			}
		}
		return v, nil
	}
	must(m)
}

// lspRow is the decoded value toolModule keeps for the tool/lsp row (the
// same struct type it builds: guidance plus the inlined options).
type lspRow = struct {
	Guidance string    `yaml:"guidance,omitempty"`
	Options  lspConfig `yaml:",inline"`
}

// LSPServerStatus is one configured language server, for dsh doctor.
type LSPServerStatus struct {
	Ext, Command string
	// Path is the resolved executable; Err why it is not found.
	Path string
	Err  error
	// Default marks the built-in gopls default (no servers configured).
	Default bool
}

// LSPStatus lists the language servers the tool/lsp row of comp would
// use (nil when the row is absent or disabled, or no server is
// configured and gopls is not on PATH).
func LSPStatus(comp *compose.Composition) []LSPServerStatus {
	var out []LSPServerStatus
	for _, en := range comp.Entries {
		p, ok := en.Value.(toolPlugin)
		if !ok || p.name != lsptool.Name {
			continue
		}
		row, ok := p.config.(lspRow)
		if !ok {
			continue
		}
		servers, def := row.Options.Servers, false
		if servers == nil {
			servers, def = lsp.DefaultServers(), true
		}
		out = out[:0]
		for _, ext := range slices.Sorted(maps.Keys(servers)) {
			c := servers[ext]
			st := LSPServerStatus{Ext: ext, Command: strings.Join(c.Command, " "), Default: def}
			if len(c.Command) > 0 {
				st.Path, st.Err = exec.LookPath(c.Command[0])
			}
			out = append(out, st)
		}
	}
	return out
}
