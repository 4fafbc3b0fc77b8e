package permission

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dsh-dev/dsh/internal/sandbox"
	"github.com/dsh-dev/dsh/internal/tool"
)

// TestReadFenceArguments: the read fence finds what each reading tool
// reads (grep and glob default to the cwd, so a search started inside a
// denied directory is refused), leaves other tools and
// danger-full-access alone, and leaves malformed arguments to the tool.
func TestReadFenceArguments(t *testing.T) {
	denied := filepath.Join(t.TempDir(), "secrets")
	mode := sandbox.WorkspaceWrite
	g := ReadFence(sandbox.Policy.CheckRead, func(*tool.Call) sandbox.Policy {
		return sandbox.Policy{Mode: mode, Workspace: "/w", DenyRead: []string{denied}}
	})
	call := func(name, cwd string, args any) string {
		raw, _ := json.Marshal(args)
		return g(&tool.Call{Name: name, Arguments: raw, Cwd: cwd})
	}
	key := filepath.Join(denied, "id_rsa")
	for _, c := range []struct {
		name, cwd string
		args      any
		deny      bool
	}{
		{"read", "/w", map[string]any{"file_path": key}, true},
		{"read", denied, map[string]any{"file_path": "id_rsa"}, true},
		{"read", "/w", map[string]any{"file_path": "/w/main.go"}, false},
		{"read_image", "/w", map[string]any{"file_path": key}, true},
		{"edit", "/w", map[string]any{"file_path": key}, true},
		{"write", "/w", map[string]any{"file_path": key}, true},
		{"str_replace_based_edit_tool", "/w", map[string]any{"command": "view", "path": denied}, true},
		{"grep", "/w", map[string]any{"pattern": "x", "path": denied}, true},
		{"grep", denied, map[string]any{"pattern": "x"}, true},
		{"grep", denied, map[string]any{"pattern": "x", "path": nil}, true},
		{"glob", denied, map[string]any{"pattern": "*"}, true},
		{"glob", "/w", map[string]any{"pattern": "*"}, false},
		{"bash", "/w", map[string]any{"command": "cat " + key}, false},
		{"read", "/w", map[string]any{"file_path": 7}, false},
		{"read", "/w", "not an object", false},
	} {
		got := call(c.name, c.cwd, c.args)
		if c.deny != (got != "") {
			t.Errorf("%s %v in %s: %q, want denied %v", c.name, c.args, c.cwd, got, c.deny)
		}
		if c.deny && !strings.HasPrefix(got, "[sandbox: file access denied — reading ") {
			t.Errorf("%s: %q", c.name, got)
		}
	}
	mode = sandbox.DangerFullAccess
	if got := call("read", "/w", map[string]any{"file_path": key}); got != "" {
		t.Errorf("danger-full-access: %q", got)
	}
}

// TestNewInstallsReadFence: Config.CheckRead and Config.Reads.DenyRead reach
// the guard through the session's policy (BashConfiner.Policy), so a
// read of a denied path never runs the tool.
func TestNewInstallsReadFence(t *testing.T) {
	dir := t.TempDir()
	secrets := filepath.Join(dir, "secrets")
	s, err := New(Config{Log: newLog(t, dir), Sandbox: &fakeBox{}, CheckRead: sandbox.Policy.CheckRead, Reads: Reads{DenyRead: []string{secrets}}})
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Confiner.Policy(&tool.Call{Cwd: dir}).DenyRead; len(got) != 1 || got[0] != secrets {
		t.Fatalf("policy DenyRead %v", got)
	}
	reg := tool.NewRegistry()
	ran := 0
	if err := reg.Register("", tool.Definition{Name: "read", Parameters: json.RawMessage(`{"type":"object"}`),
		Execute: func(context.Context, *tool.Call) (tool.Result, error) { ran++; return tool.Text("ok"), nil }}); err != nil {
		t.Fatal(err)
	}
	p := tool.NewPipeline(reg)
	s.Install(p, nil)
	run := func(args string) tool.Result {
		return p.Run(context.Background(), &tool.Call{ID: "c", Name: "read", RawArguments: args, Cwd: dir})
	}
	if r := run(`{"file_path":"secrets/id_rsa"}`); !r.IsError || ran != 0 || !strings.Contains(resultText(r), "[sandbox: file access denied — reading ") {
		t.Fatalf("read fence not installed: %+v", r)
	}
	if r := run(`{"file_path":"notes.txt"}`); r.IsError || ran != 1 {
		t.Fatalf("read fence refused a plain file: %+v", r)
	}
}
