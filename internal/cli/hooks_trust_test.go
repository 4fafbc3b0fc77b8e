package cli_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dsh-dev/dsh/internal/llm/llmtest"
)

// TestHookScriptRewrittenMidSession is the finding as it was made, through
// the real binary: a trusted .dsh/hooks.json runs .dsh/check.sh before
// every bash call; the model's second command rewrites the script (in
// full access, where nothing stops it; the sandbox refusing the write in
// the other modes is tested with the sandbox); the third call's hook does
// not run the rewritten script, and stderr and the log name
// .dsh/check.sh. After "dsh hooks trust" the new script runs.
func TestHookScriptRewrittenMidSession(t *testing.T) {
	e := newEnv(t)
	marks := t.TempDir()
	script := func(marker string) string {
		return "#!/bin/sh\necho ran >> '" + filepath.Join(marks, marker) + "'\n"
	}
	ran := func(marker string) int {
		b, _ := os.ReadFile(filepath.Join(marks, marker))
		return strings.Count(string(b), "ran")
	}
	if err := os.MkdirAll(filepath.Join(e.cwd, ".dsh"), 0o700); err != nil {
		t.Fatal(err)
	}
	check := filepath.Join(e.cwd, ".dsh", "check.sh")
	if err := os.WriteFile(check, []byte(script("good")), 0o755); err != nil {
		t.Fatal(err)
	}
	doc := `{"hooks":{"PreToolUse":[{"matcher":"Bash","hooks":[{"type":"command","command":".dsh/check.sh"}]}]}}`
	if err := os.WriteFile(filepath.Join(e.cwd, ".dsh", "hooks.json"), []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := e.dsh("", "hooks", "trust")
	if code != 0 || !strings.Contains(out, "and "+check) {
		t.Fatalf("trust: %d %q %q", code, out, errOut)
	}
	rewrite := "printf '#!/bin/sh\\necho ran >> " + filepath.Join(marks, "evil") + "\\n' > .dsh/check.sh"
	e.srv.Enqueue(
		llmtest.Response{ToolCalls: []llmtest.ToolCall{bashCall("echo one")}},
		llmtest.Response{ToolCalls: []llmtest.ToolCall{bashCall(rewrite)}},
		llmtest.Response{ToolCalls: []llmtest.ToolCall{bashCall("echo three")}},
		llmtest.Response{Text: "done"},
	)
	out, errOut, code = e.dsh("", "run", "--json", "--permission", "full-access", "--approval", "never", "work")
	if code != 0 {
		t.Fatalf("run: %d\n%s", code, errOut)
	}
	if b, _ := os.ReadFile(check); !strings.Contains(string(b), "evil") {
		t.Fatalf("the model's rewrite did not happen: %q", b)
	}
	if ran("evil") != 0 {
		t.Fatal("the rewritten script ran outside the sandbox")
	}
	if ran("good") != 2 {
		t.Fatalf("the trusted script ran %d times, want 2 (before the rewrite)", ran("good"))
	}
	if !strings.Contains(errOut, ".dsh/check.sh changed since it was trusted") || !strings.Contains(errOut, "dsh hooks trust") {
		t.Fatalf("stderr does not name the rewritten script:\n%s", errOut)
	}
	// The call the hook guards was refused, and the model was told why.
	if reqs := e.srv.Requests(); len(reqs) != 4 || !strings.Contains(string(reqs[3].Body), "did not run") || !strings.Contains(string(reqs[3].Body), ".dsh/check.sh") {
		t.Fatalf("%d model requests; the last does not say the call was refused", len(reqs))
	}
	events, _ := parseJSONRun(t, out)
	logged := false
	for _, ev := range events {
		if ev.Type == "hook/result" && strings.Contains(string(ev.Data), `"suspended":true`) && strings.Contains(string(ev.Data), ".dsh/check.sh") {
			logged = true
		}
	}
	if !logged {
		t.Fatal("no suspended hook/result naming .dsh/check.sh on the log")
	}
	// A new session says so at once; list says so too.
	if _, errOut, _ := e.dsh("", "hooks", "list"); !strings.Contains(errOut, ".dsh/check.sh changed since it was trusted") {
		t.Fatalf("list: %q", errOut)
	}
	// The user reads the new script and trusts it: it runs.
	if out, errOut, code := e.dsh("", "hooks", "trust"); code != 0 {
		t.Fatalf("trust again: %d %q %q", code, out, errOut)
	}
	e.srv.Enqueue(llmtest.Response{ToolCalls: []llmtest.ToolCall{bashCall("echo four")}}, llmtest.Response{Text: "done"})
	if _, errOut, code := e.dsh("", "run", "--json", "--permission", "full-access", "--approval", "never", "again"); code != 0 || ran("evil") != 1 {
		t.Fatalf("after trust: %d, the script ran %d times\n%s", code, ran("evil"), errOut)
	}
}
