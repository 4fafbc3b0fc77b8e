package mcp

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/dsh-dev/dsh/internal/mcp"
	"github.com/dsh-dev/dsh/internal/tool"
)

// TestCrossServerCollisionNotShadowed: two bound servers whose tools take
// one model-facing name (here two managers' servers both named x, which
// each manager's validation cannot see): the server bound first keeps the
// name, the later tool is dropped with a warning naming it, and when the
// first server goes away the name does not pass to the other.
func TestCrossServerCollisionNotShadowed(t *testing.T) {
	answer := func(text string) func(*sdk.Server) {
		return func(srv *sdk.Server) {
			srv.AddTool(&sdk.Tool{Name: "echo", InputSchema: json.RawMessage(`{"type":"object"}`)},
				func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
					return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: text}}}, nil
				})
		}
	}
	first := inproc(t, mcp.ServerConfig{Name: "x", Approval: mcp.ApprovalAuto}, answer("first"))
	second := inproc(t, mcp.ServerConfig{Name: "x", Approval: mcp.ApprovalAuto}, answer("second"))
	reg := tool.NewRegistry()
	var warned []string
	b := Bind(reg, append(first.Servers(), second.Servers()...), Options{Warn: func(s string) { warned = append(warned, s) }})
	defer b.Close()
	p := tool.NewPipeline(reg)
	if r := run(t, p, "mcp__x__echo", `{}`); textOf(r) != "first" {
		t.Fatalf("mcp__x__echo answered %q, want the first server", textOf(r))
	}
	if len(warned) != 1 || !strings.Contains(warned[0], "mcp server x: tool echo dropped: its name mcp__x__echo is already the name of a tool of server x") {
		t.Fatalf("warnings %q", warned)
	}
	first.Close()
	b.sync()
	if r := run(t, p, "mcp__x__echo", `{}`); textOf(r) == "second" {
		t.Fatal("with the first server gone, its tool name reached the other server")
	}
	if len(warned) != 1 {
		t.Fatalf("the drop was said again: %q", warned)
	}
}
