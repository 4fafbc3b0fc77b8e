package codex_test

// Integration tests against the real Codex CLI (peers.Packages["codex"])
// pointed at dsh's fake model server over the Responses API. They skip,
// naming what is missing, when the binary is not installed.

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dsh-dev/dsh/internal/llm/llmtest"
	"github.com/dsh-dev/dsh/internal/peers"
	"github.com/dsh-dev/dsh/internal/proc"
	"github.com/dsh-dev/dsh/internal/subagent/codex"
)

func realProvider(t *testing.T, srv *llmtest.Server, model string) *codex.Provider {
	t.Helper()
	bin, err := peers.Find("codex")
	if err != nil {
		t.Skip(err.Error())
	}
	home := t.TempDir()
	codexHome := filepath.Join(home, ".codex")
	if err := llmtest.WriteCodexConfig(codexHome, srv.URL(), model); err != nil {
		t.Fatal(err)
	}
	p, err := codex.New(codex.Config{
		Command: []string{bin}, ModelSelection: true, Timeout: time.Minute,
		Env: proc.EnvPolicy{Set: map[string]string{"HOME": home, "CODEX_HOME": codexHome, llmtest.CodexKeyEnv: llmtest.CodexKey}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestRealCodexPersistentThreadResumes(t *testing.T) {
	srv := llmtest.New()
	defer srv.Close()
	p := realProvider(t, srv, "gpt-5.5")
	work := t.TempDir()
	srv.Enqueue(
		llmtest.Response{Text: "first answer", Phase: "final_answer", Usage: &llmtest.Usage{Input: 100, CacheRead: 20, Output: 7}},
		llmtest.Response{Text: "second answer", Phase: "final_answer", Usage: &llmtest.Usage{Input: 50, CacheRead: 100, Output: 5}},
	)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	var checkpoints []string
	first := p.Delegate(ctx, codex.Params{Description: "probe", Prompt: "say something", ThreadMode: codex.ThreadPersistent, Effort: "high"},
		codex.Caller{Cwd: work}, codex.Observer{Checkpoint: func(c codex.Checkpoint) { checkpoints = append(checkpoints, c.Name) }})
	if first.Status != codex.StatusCompleted {
		t.Fatalf("first run: %s %s: %s (stderr %s)", first.Status, first.Category, first.Error, first.Process.Stderr)
	}
	if first.Text != "first answer" || first.ThreadID == "" || first.Resumed {
		t.Fatalf("first run: text %q thread %q resumed %v", first.Text, first.ThreadID, first.Resumed)
	}
	if got := strings.Join(checkpoints, ","); got != "spawned,initialized,thread,turn-started,turn-completed" {
		t.Fatalf("checkpoints %s", got)
	}
	if !first.Cleanup.Confirmed || first.Process.Exit == nil {
		t.Fatalf("cleanup %+v exit %+v", first.Cleanup, first.Process.Exit)
	}
	if first.Usage.Completeness != codex.UsageComplete || first.Usage.Run == nil || first.Usage.Run.InputTokens != 120 || first.Usage.Run.CachedInputTokens != 20 || first.Usage.Run.OutputTokens != 7 {
		t.Fatalf("first usage %+v run %+v", first.Usage, first.Usage.Run)
	}
	if r := srv.Requests()[0]; r.ReasoningEffort() != "high" || !first.Effort.SentOnTurn {
		t.Fatalf("effort on the wire %q, evidence %+v", r.ReasoningEffort(), first.Effort)
	}

	second := p.Delegate(ctx, codex.Params{Description: "probe", Prompt: "go on", ThreadID: first.ThreadID, PermissionMode: codex.ModeReadOnly},
		codex.Caller{Cwd: work}, codex.Observer{})
	if second.Status != codex.StatusCompleted {
		t.Fatalf("second run: %s %s: %s", second.Status, second.Category, second.Error)
	}
	if second.ThreadID != first.ThreadID || !second.Resumed || second.Text != "second answer" {
		t.Fatalf("second run: thread %q (want %q) resumed %v text %q", second.ThreadID, first.ThreadID, second.Resumed, second.Text)
	}
	var sb struct{ Type string }
	if second.Effective == nil || json.Unmarshal(second.Effective.Sandbox, &sb) != nil || sb.Type != "readOnly" {
		t.Fatalf("effective %+v", second.Effective)
	}
	// The resumed run's usage is its own turn only, not the thread total.
	if second.Usage.Run == nil || second.Usage.Run.InputTokens != 150 || second.Usage.Run.OutputTokens != 5 {
		t.Fatalf("second usage %+v run %+v", second.Usage, second.Usage.Run)
	}
}

func TestRealCodexOutputSchemaVerified(t *testing.T) {
	srv := llmtest.New()
	defer srv.Close()
	p := realProvider(t, srv, "gpt-5.5")
	schema := `{"type":"object","properties":{"verdict":{"type":"string","enum":["pass","fail"]},"count":{"type":"integer"}},"required":["verdict","count"],"additionalProperties":false}`
	srv.Enqueue(
		llmtest.Response{Text: `{"verdict":"pass","count":2}`, Phase: "final_answer"},
		llmtest.Response{Text: `{"verdict":"maybe","count":2}`, Phase: "final_answer"},
	)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ok := p.Delegate(ctx, codex.Params{Description: "verdict", Prompt: "judge", OutputSchema: json.RawMessage(schema)}, codex.Caller{Cwd: t.TempDir()}, codex.Observer{})
	if ok.Status != codex.StatusCompleted || string(ok.Structured) != `{"verdict":"pass","count":2}` {
		t.Fatalf("%s %s %s structured %s", ok.Status, ok.Category, ok.Error, ok.Structured)
	}
	if f := srv.Requests()[0].TextFormat(); f["type"] != "json_schema" {
		t.Fatalf("text.format on the wire: %v", f)
	}
	bad := p.Delegate(ctx, codex.Params{Description: "verdict", Prompt: "judge", OutputSchema: json.RawMessage(schema)}, codex.Caller{Cwd: t.TempDir()}, codex.Observer{})
	if bad.Status != codex.StatusFailed || bad.Category != codex.CategorySchema || bad.Text != `{"verdict":"maybe","count":2}` {
		t.Fatalf("violation: %s %s %s text %q", bad.Status, bad.Category, bad.Error, bad.Text)
	}
}
