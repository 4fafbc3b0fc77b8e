package cli_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dsh-dev/dsh/internal/llm/llmtest"
)

// TestHookScriptProtectedInSandbox: in workspace-write, the script a
// trusted hook runs (outside .dsh, so only Policy.Protected covers it)
// cannot be rewritten by the model's bash or write; the hook keeps
// running the trusted script.
func TestHookScriptProtectedInSandbox(t *testing.T) {
	needSandbox(t)
	e := newEnv(t)
	// Outside the temp dirs, which Landlock grants whole (a gap it
	// reports): the protection is the same under both backends there.
	e.cwd = outsideDir(t)
	marks := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(e.cwd, ".dsh"), 0o700))
	must(os.MkdirAll(filepath.Join(e.cwd, "scripts"), 0o700))
	check := filepath.Join(e.cwd, "scripts", "check.sh")
	must(os.WriteFile(check, []byte("#!/bin/sh\necho ran >> '"+filepath.Join(marks, "good")+"'\n"), 0o755))
	doc := `{"hooks":{"PreToolUse":[{"hooks":[{"type":"command","command":"sh scripts/check.sh"}]}]}}`
	must(os.WriteFile(filepath.Join(e.cwd, ".dsh", "hooks.json"), []byte(doc), 0o600))
	if out, errOut, code := e.dsh("", "hooks", "trust"); code != 0 || !strings.Contains(out, check) {
		t.Fatalf("trust: %d %q %q", code, out, errOut)
	}
	evil := "echo ran >> " + filepath.Join(marks, "evil")
	wargs, _ := json.Marshal(map[string]string{"file_path": check, "content": evil + "\n"})
	e.srv.Enqueue(
		llmtest.Response{ToolCalls: []llmtest.ToolCall{bashCall("echo '" + evil + "' > scripts/check.sh; echo rc=$?")}},
		llmtest.Response{ToolCalls: []llmtest.ToolCall{{Name: "write", Arguments: string(wargs)}}},
		llmtest.Response{ToolCalls: []llmtest.ToolCall{bashCall("mv scripts/check.sh scripts/x.sh; rm -f scripts/check.sh; echo rc=$?")}},
		llmtest.Response{ToolCalls: []llmtest.ToolCall{bashCall("echo four")}},
		llmtest.Response{Text: "done"},
	)
	out, errOut, code := e.dsh("", "run", "--json", "--permission", "workspace-write", "--approval", "never", "work")
	if code != 0 {
		t.Fatalf("run: %d\n%s", code, errOut)
	}
	b, _ := os.ReadFile(check)
	if strings.Contains(string(b), "evil") {
		t.Fatalf("the sandboxed model rewrote the hook's script:\n%s\n%s", b, out)
	}
	good, _ := os.ReadFile(filepath.Join(marks, "good"))
	if _, err := os.Stat(filepath.Join(marks, "evil")); err == nil || strings.Count(string(good), "ran") != 4 {
		t.Fatalf("good ran %d times; evil: %v\n%s", strings.Count(string(good), "ran"), err, errOut)
	}
}
