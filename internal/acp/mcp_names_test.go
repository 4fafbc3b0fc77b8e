package acp

import (
	"encoding/json"
	"testing"
)

// Free-text ACP server names that reduce to "__" or a trailing "_" (which
// dsh refuses: they blur MCP tool names) are reduced further, not refused.
func TestMCPServerNamesReduced(t *testing.T) {
	var raw []json.RawMessage
	for _, n := range []string{"filesystem (local)", "a  b", "___", "git hub."} {
		b, _ := json.Marshal(map[string]any{"name": n, "command": "x"})
		raw = append(raw, b)
	}
	cfgs, err := mcpConfigs(raw)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range cfgs {
		got = append(got, c.Name)
	}
	want := []string{"filesystem_local", "a_b", "mcp", "git_hub"}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("names %q, want %q", got, want)
		}
	}
}
