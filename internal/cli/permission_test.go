package cli_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dsh-dev/dsh/internal/llm/llmtest"
	"github.com/dsh-dev/dsh/internal/sandbox"
	"github.com/dsh-dev/dsh/internal/session"
)

// outsideDir is a directory outside the workspace and outside every temp
// and cache directory the sandbox leaves writable.
func outsideDir(t *testing.T) string {
	home, err := os.UserHomeDir()
	if err != nil {
		t.Skip("no home directory")
	}
	dir, err := os.MkdirTemp(home, ".dsh-sandbox-test-")
	if err != nil {
		t.Skipf("cannot create a directory outside the temp dirs: %v", err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

func needSandbox(t *testing.T) {
	if _, err := sandbox.Default().Backend(); err != nil {
		t.Skipf("no sandbox backend on this machine: %v", err)
	}
}

func results(t *testing.T, events []session.Event) []session.ToolResult {
	var out []session.ToolResult
	for _, ev := range events {
		if ev.Type == session.TypeToolResult {
			var r session.ToolResult
			if err := ev.Decode(&r); err != nil {
				t.Fatal(err)
			}
			out = append(out, r)
		}
	}
	return out
}

func text(r session.ToolResult) string {
	var b strings.Builder
	for _, c := range r.Content {
		b.WriteString(c.Text)
	}
	return b.String()
}

func TestWorkspaceWriteFencesBashAndFileTools(t *testing.T) {
	needSandbox(t)
	e := newEnv(t)
	out := outsideDir(t)
	// The workspace must not lie inside a temp dir: those are writable
	// as a whole (Landlock cannot carve .git out of them).
	e.cwd = outsideDir(t)
	writeFile(t, filepath.Join(e.cwd, ".git", "config"), "[core]\n", 0o644)
	// Under Landlock a repository root's own entries are fixed (see
	// internal/sandbox); writes go into an existing subdirectory.
	writeFile(t, filepath.Join(e.cwd, "src", "keep"), "", 0o644)
	port := strings.TrimPrefix(e.srv.URL(), "http://127.0.0.1:")
	e.srv.Enqueue(
		llmtest.Response{ToolCalls: []llmtest.ToolCall{
			bashCall("echo in > src/inside.txt"),
			bashCall("echo out > " + out + "/escaped.txt"),
			bashCall("echo x >> .git/config"),
			bashCall("exec 3<>/dev/tcp/127.0.0.1/" + port + " && echo connected"),
			toolCall("write", map[string]any{"file_path": out + "/by-write-tool.txt", "content": "x"}),
		}},
		llmtest.Response{ToolCalls: []llmtest.ToolCall{toolCall("bash", map[string]any{
			"command": "echo out > " + out + "/escaped.txt", "description": "retry",
			"sandbox_permissions": "danger-full-access", "justification": "the user asked for it",
		})}},
		llmtest.Response{Text: "done"},
	)
	stdout, stderr, code := e.dsh("", "run", "--json", "--approval", "never", "try writing")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	events, _ := parseJSONRun(t, stdout)
	res := results(t, events)
	if len(res) != 6 {
		t.Fatalf("%d results", len(res))
	}
	if got, err := os.ReadFile(filepath.Join(e.cwd, "src", "inside.txt")); err != nil || string(got) != "in\n" {
		t.Errorf("write inside the workspace failed: %q %v (%s)", got, err, text(res[0]))
	}
	for _, name := range []string{"escaped.txt", "by-write-tool.txt"} {
		if _, err := os.Stat(filepath.Join(out, name)); err == nil {
			t.Errorf("%s was written outside the workspace", name)
		}
	}
	if !strings.Contains(text(res[1]), "[sandbox:") || res[1].IsError {
		t.Errorf("outside write result: %q", text(res[1]))
	}
	if b, _ := os.ReadFile(filepath.Join(e.cwd, ".git", "config")); string(b) != "[core]\n" || !strings.Contains(text(res[2]), "[sandbox:") {
		t.Errorf(".git/config changed or not reported: %q / %q", b, text(res[2]))
	}
	if strings.Contains(text(res[3]), "connected") {
		t.Errorf("network was reachable: %q", text(res[3]))
	}
	if !res[4].IsError || !strings.Contains(text(res[4]), "[sandbox: file access denied") {
		t.Errorf("write tool outside: %+v", res[4])
	}
	// The escalation was asked and, with --approval never, denied.
	if !res[5].IsError {
		t.Errorf("escalation ran: %q", text(res[5]))
	}
	c := countTypes(events)
	if c[session.TypeApprovalAsked] != 1 || c[session.TypeApprovalDecided] != 1 || c[session.TypeSandboxBackend] != 1 {
		t.Errorf("permission events %v", c)
	}
	if !strings.Contains(stdout, `"outcome":"unavailable"`) {
		t.Error("approval/decided is not unavailable")
	}
	// The model was told the policy.
	if !strings.Contains(string(e.srv.Requests()[0].Body), "Sandbox mode: workspace-write") {
		t.Error("runtime context lacks the sandbox mode")
	}
}

func TestPermissionPresets(t *testing.T) {
	needSandbox(t)
	out := outsideDir(t)
	for _, tc := range []struct {
		preset       string
		inside, escd bool
	}{
		{"read-only", false, false},
		{"workspace-write", true, false},
		{"full-access", true, true},
	} {
		t.Run(tc.preset, func(t *testing.T) {
			e := newEnv(t)
			target := filepath.Join(out, tc.preset+".txt")
			e.srv.Enqueue(
				llmtest.Response{ToolCalls: []llmtest.ToolCall{bashCall("echo a > inside.txt"), bashCall("echo b > " + target)}},
				llmtest.Response{Text: "ok"},
			)
			stdout, stderr, code := e.dsh("", "run", "--json", "--permission", tc.preset, "go")
			if code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			_, errIn := os.Stat(filepath.Join(e.cwd, "inside.txt"))
			_, errOut := os.Stat(target)
			if (errIn == nil) != tc.inside || (errOut == nil) != tc.escd {
				t.Errorf("inside written=%v outside written=%v", errIn == nil, errOut == nil)
			}
			if !strings.Contains(stdout, `"type":"permission/preset","seq":`) || !strings.Contains(stdout, `"preset":"`+tc.preset+`"`) {
				t.Errorf("preset not logged")
			}
		})
	}
}
