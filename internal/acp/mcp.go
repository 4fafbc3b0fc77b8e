package acp

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/dsh-dev/dsh/internal/jsonrpc"
	"github.com/dsh-dev/dsh/internal/mcp"
)

// mcpServer is an ACP McpServer: stdio (no type), http or sse.
type mcpServer struct {
	Type    string      `json:"type"`
	Name    string      `json:"name"`
	Command string      `json:"command"`
	Args    []string    `json:"args"`
	Env     []nameValue `json:"env"`
	URL     string      `json:"url"`
	Headers []nameValue `json:"headers"`
}

type nameValue struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// mcpConfigs turns the MCP servers a client names into dsh server
// configurations for the session alone. Their tools ask before every
// call (the default approval), as any server dsh has not been told to
// trust. ACP names are free text; dsh's are part of tool names, so they
// are reduced to [A-Za-z0-9_-]{1,32} and made unique.
func mcpConfigs(raw []json.RawMessage) ([]mcp.ServerConfig, *jsonrpc.Error) {
	var out []mcp.ServerConfig
	used := map[string]bool{}
	for i, r := range raw {
		var m mcpServer
		if err := json.Unmarshal(r, &m); err != nil {
			return nil, invalidParams("mcpServers[%d]: %v", i, err)
		}
		c := mcp.ServerConfig{Name: uniqueName(serverName(m.Name), used), Source: "acp session/new"}
		switch m.Type {
		case "", "stdio":
			if m.Command == "" {
				return nil, invalidParams("mcpServers[%d] (%s): a stdio server needs a command", i, m.Name)
			}
			c.Command, c.Args = m.Command, m.Args
			if len(m.Env) > 0 {
				c.Env = map[string]string{}
				for _, kv := range m.Env {
					c.Env[kv.Name] = kv.Value
				}
			}
		case "http":
			c.URL = m.URL
			if len(m.Headers) > 0 {
				c.Headers = map[string]string{}
				for _, kv := range m.Headers {
					c.Headers[kv.Name] = kv.Value
				}
			}
		case "sse":
			return nil, invalidParams("mcpServers[%d] (%s): SSE servers are not supported (mcpCapabilities.sse is false); use streamable HTTP", i, m.Name)
		default:
			return nil, invalidParams("mcpServers[%d] (%s): unknown type %q", i, m.Name, m.Type)
		}
		if err := c.Validate(); err != nil {
			return nil, invalidParams("mcpServers[%d]: %v", i, err)
		}
		out = append(out, c)
	}
	return out, nil
}

// serverName reduces an ACP server name to dsh's alphabet, without "__"
// and without a trailing "_".
func serverName(name string) string {
	var b strings.Builder
	for _, r := range name {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_', r == '-':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
		if b.Len() == 32 {
			break
		}
	}
	// "__" inside or "_" at the end would blur where the server's name
	// ends in its tools' names (mcp.ServerConfig.Validate refuses them).
	out := b.String()
	for strings.Contains(out, "__") {
		out = strings.ReplaceAll(out, "__", "_")
	}
	out = strings.TrimRight(out, "_")
	if out == "" {
		return "mcp"
	}
	return out
}

func uniqueName(name string, used map[string]bool) string {
	cand := name
	for n := 2; used[cand]; n++ {
		suffix := fmt.Sprintf("-%d", n)
		cand = name[:min(len(name), 32-len(suffix))] + suffix
	}
	used[cand] = true
	return cand
}
