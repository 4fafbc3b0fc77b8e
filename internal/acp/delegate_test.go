package acp_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dsh-dev/dsh/internal/llm"
	"github.com/dsh-dev/dsh/internal/llm/llmtest"
	"github.com/dsh-dev/dsh/internal/permission"
	"github.com/dsh-dev/dsh/internal/proc"
	"github.com/dsh-dev/dsh/internal/sandbox"
	"github.com/dsh-dev/dsh/internal/session"
	"github.com/dsh-dev/dsh/internal/subagent"
	"github.com/dsh-dev/dsh/internal/subagent/acpclient"
)

// TestDelegateToDshOverACP is dsh delegating to dsh: dsh's own ACP
// client (the provider that runs ACP agents as subagents) drives `dsh
// acp` through a turn with a tool call.
func TestDelegateToDshOverACP(t *testing.T) {
	srv := llmtest.New()
	defer srv.Close()
	const answer = "the child read it: hi"
	srv.Enqueue(llmtest.Response{ToolCalls: []llmtest.ToolCall{{ID: "call_r", Name: "read", Arguments: `{"file_path":"hello.txt"}`}}})
	srv.Enqueue(llmtest.Response{Text: answer})

	cwd := t.TempDir()
	if err := os.WriteFile(filepath.Join(cwd, "hello.txt"), []byte("hi\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	home := t.TempDir()
	p, err := acpclient.New(acpclient.Options{
		Name:    "acp:dsh",
		Command: []string{dshBin, "acp"},
		Env: proc.EnvPolicy{Set: map[string]string{
			"DSH_HOME": home, "DEEPSEEK_API_KEY": "test-key", "DEEPSEEK_BASE_URL": srv.URL(),
		}},
		Timeout:   60 * time.Second,
		KillGrace: time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	svc, err := subagent.NewService(subagent.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := svc.Register(p); err != nil {
		t.Fatal(err)
	}
	parent, err := session.NewLog(session.Header{Version: session.FormatVersion, ID: "parent", Cwd: cwd}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	h, err := svc.Start(ctx, "acp:dsh", subagent.Request{
		Prompt:     []llm.Block{llm.TextBlock("what does hello.txt say?")},
		Parent:     parent,
		Permission: permission.State{Mode: sandbox.WorkspaceWrite},
		Progress:   func(s string) { lines = append(lines, s) },
	})
	if err != nil {
		t.Fatal(err)
	}
	res, err := h.Wait(ctx)
	if derr := h.Dispose(); derr != nil {
		t.Error(derr)
	}
	if err != nil {
		t.Fatal(err)
	}
	if res.StopReason != subagent.StopCompleted || res.Text() != answer {
		t.Fatalf("result %+v", res)
	}
	if !strings.HasPrefix(res.ChildID, "acp:dsh/") {
		t.Errorf("child id %q", res.ChildID)
	}
	progress := strings.Join(lines, "\n")
	for _, want := range []string{"tool call_r [read] read hello.txt: started", "tool call_r read hello.txt: completed"} {
		if !strings.Contains(progress, want) {
			t.Errorf("progress lacks %q:\n%s", want, progress)
		}
	}
	// The child's conversation is a dsh session in its own home.
	if n := len(srv.Requests()); n != 2 {
		t.Errorf("%d model requests", n)
	}
}
