package claudecode_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dsh-dev/dsh/internal/llm"
	"github.com/dsh-dev/dsh/internal/llm/llmtest"
	"github.com/dsh-dev/dsh/internal/peers"
	"github.com/dsh-dev/dsh/internal/proc"
	"github.com/dsh-dev/dsh/internal/sandbox"
	"github.com/dsh-dev/dsh/internal/subagent"
	"github.com/dsh-dev/dsh/internal/subagent/claudecode"
)

// TestRealClaude drives the real Claude Code against dsh's fake model
// server (Anthropic Messages): a delegation with a Bash tool call, a
// resume of that session, and a structured-output run.
func TestRealClaude(t *testing.T) {
	bin, err := peers.Find("claude")
	if err != nil {
		t.Skip(err)
	}
	srv := llmtest.New()
	defer srv.Close()
	req := request(t, sandbox.DangerFullAccess)
	cwd, err := filepath.EvalSymlinks(req.Parent.Header().Cwd)
	if err != nil {
		t.Fatal(err)
	}
	inside := func(name string) string { return filepath.Join(cwd, name) }
	outside := filepath.Join(t.TempDir(), "out.txt")
	usage := &llmtest.Usage{Input: 100, Output: 7, CacheRead: 5, CacheWrite: 3}
	srv.Enqueue(
		llmtest.Response{ToolCalls: []llmtest.ToolCall{{Name: "Bash", Arguments: `{"command":"echo hi-from-bash"}`}}, Usage: usage},
		llmtest.Response{Text: "FIRST ANSWER", Usage: usage},
		// The resumed run is read-only: a write through Bash is refused.
		llmtest.Response{ToolCalls: []llmtest.ToolCall{{Name: "Bash", Arguments: bashArgs("touch " + inside("ro.txt"))}}, Usage: usage},
		llmtest.Response{Text: "SECOND ANSWER", Usage: usage},
		llmtest.Response{ToolCalls: []llmtest.ToolCall{{Name: "StructuredOutput", Arguments: `{"name":"bob"}`}}, Usage: usage},
		// Workspace-write: Write inside the workspace is accepted, outside
		// it refused.
		llmtest.Response{ToolCalls: []llmtest.ToolCall{{Name: "Write", Arguments: writeArgs(inside("in.txt"))}}, Usage: usage},
		llmtest.Response{ToolCalls: []llmtest.ToolCall{{Name: "Write", Arguments: writeArgs(outside)}}, Usage: usage},
		llmtest.Response{Text: "WROTE", Usage: usage},
	)
	home := t.TempDir()
	p, err := claudecode.New(claudecode.Options{
		Command: bin, Model: "claude-fake-model", Timeout: time.Minute,
		Env: proc.EnvPolicy{Set: map[string]string{
			"ANTHROPIC_BASE_URL": srv.URL(), "ANTHROPIC_API_KEY": "dummy",
			"HOME": home, "CLAUDE_CONFIG_DIR": filepath.Join(home, ".claude"),
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	// Full access: bypassPermissions, or as root the acceptEdits fallback;
	// either way Bash runs without approval.
	progress := &lines{t: t}
	req.Progress = progress.add
	start := time.Now()
	r, err := p.Start(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	res := wait(t, r)
	dispose(t, r)
	got := progress.close()
	t.Logf("first run %v: %+v\nprogress:\n%s", time.Since(start), res, strings.Join(got, "\n"))
	if res.StopReason != subagent.StopCompleted || res.Text() != "FIRST ANSWER" {
		t.Fatalf("result %+v", res)
	}
	sid, ok := strings.CutPrefix(res.ChildID, "claude-code/")
	if !ok || len(sid) != 36 || r.ChildID() != res.ChildID {
		t.Fatalf("child id %q / %q", res.ChildID, r.ChildID())
	}
	// Two model calls of the scripted usage each.
	if res.Usage != (llm.Usage{InputTokens: 200, OutputTokens: 14, CacheReadTokens: 10, CacheWriteTokens: 6}) {
		t.Errorf("usage %+v", res.Usage)
	}
	if !slices.Contains(got, "tool Bash: echo hi-from-bash") || !slices.Contains(got, "tool Bash ok") || !slices.Contains(got, "claude: FIRST ANSWER") {
		t.Errorf("progress %q", got)
	}
	reqs := srv.Requests()
	var models []string
	for _, rq := range reqs {
		if rq.Format == llmtest.FormatAnthropic {
			models = append(models, rq.Model())
		}
	}
	if len(models) != 2 || models[0] != "claude-fake-model" {
		t.Errorf("model requests %q", models)
	}

	// Resume: same cwd, same config dir, same session id; the model sees
	// the first conversation.
	req2 := request(t, sandbox.ReadOnly)
	req2.Parent = req.Parent
	req2.Prompt = []llm.Block{llm.TextBlock("and again")}
	start = time.Now()
	r, err = p.StartResume(ctx, req2, sid)
	if err != nil {
		t.Fatal(err)
	}
	if r.ChildID() != res.ChildID {
		t.Errorf("resumed child id %q, want %q", r.ChildID(), res.ChildID)
	}
	res2 := wait(t, r)
	dispose(t, r)
	t.Logf("resumed run %v: %+v", time.Since(start), res2)
	if res2.StopReason != subagent.StopCompleted || res2.Text() != "SECOND ANSWER" || res2.ChildID != res.ChildID {
		t.Fatalf("resumed result %+v", res2)
	}
	if _, err := os.Stat(inside("ro.txt")); err == nil || !strings.Contains(res2.Diagnostic, "permission denials (1): Bash (touch ") {
		t.Errorf("read-only run wrote (stat: %v); diagnostic %q", err, res2.Diagnostic)
	}
	reqs = srv.Requests()
	last := reqs[len(reqs)-1]
	if body := string(last.Body); !strings.Contains(body, "hi-from-bash") || !strings.Contains(body, "and again") {
		t.Errorf("the resumed request does not carry the first conversation: %d messages", len(last.Messages()))
	}

	// Structured output through --json-schema, verified by dsh.
	req3 := request(t, sandbox.WorkspaceWrite)
	req3.OutputSchema = json.RawMessage(`{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]}`)
	start = time.Now()
	r, err = p.Start(ctx, req3)
	if err != nil {
		t.Fatal(err)
	}
	res3 := wait(t, r)
	dispose(t, r)
	t.Logf("structured run %v: %+v", time.Since(start), res3)
	if res3.StopReason != subagent.StopCompleted || string(res3.Structured) != `{"name":"bob"}` {
		t.Fatalf("structured result %+v", res3)
	}

	// Workspace-write confines the file tools to the workspace.
	start = time.Now()
	req4 := request(t, sandbox.WorkspaceWrite)
	req4.Parent = req.Parent
	r, err = p.Start(ctx, req4)
	if err != nil {
		t.Fatal(err)
	}
	res4 := wait(t, r)
	dispose(t, r)
	t.Logf("workspace-write run %v: %+v", time.Since(start), res4)
	if res4.StopReason != subagent.StopCompleted || res4.Text() != "WROTE" {
		t.Fatalf("workspace-write result %+v", res4)
	}
	if _, err := os.Stat(inside("in.txt")); err != nil {
		t.Errorf("no write inside the workspace: %v", err)
	}
	if _, err := os.Stat(outside); err == nil || !strings.Contains(res4.Diagnostic, "permission denials (1): Write ("+outside+")") {
		t.Errorf("wrote outside the workspace (stat: %v); diagnostic %q", err, res4.Diagnostic)
	}
}

func bashArgs(command string) string {
	b, _ := json.Marshal(map[string]string{"command": command})
	return string(b)
}

func writeArgs(path string) string {
	b, _ := json.Marshal(map[string]string{"file_path": path, "content": "x"})
	return string(b)
}
