package acpclient_test

// An integration test that delegates to the real codex-acp (Zed's ACP
// adapter for Codex, peers.Packages["codex-acp"]) with Codex pointed at the
// fake model server's Responses API. It skips when the binary is not
// installed (see package peers: $DSH_PEERS_DIR, then $PATH).

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dsh-dev/dsh/internal/llm"
	"github.com/dsh-dev/dsh/internal/llm/llmtest"
	"github.com/dsh-dev/dsh/internal/peers"
	"github.com/dsh-dev/dsh/internal/permission"
	"github.com/dsh-dev/dsh/internal/proc"
	"github.com/dsh-dev/dsh/internal/sandbox"
	"github.com/dsh-dev/dsh/internal/session"
	"github.com/dsh-dev/dsh/internal/subagent"
	"github.com/dsh-dev/dsh/internal/subagent/acpclient"
)

func TestRealCodexACPDelegation(t *testing.T) {
	bin, err := peers.Find("codex-acp")
	if err != nil {
		t.Skip(err.Error())
	}
	srv := llmtest.New()
	defer srv.Close()
	const answer = "delegated answer from the fake model"
	srv.Enqueue(llmtest.Response{Reasoning: "easy", Text: answer, Phase: "final_answer",
		Usage: &llmtest.Usage{Input: 120, CacheRead: 30, Output: 9}})

	// HOME and CODEX_HOME are private so that the real ~/.codex is never
	// read or written. A known model slug keeps Codex from sending a
	// "model metadata not found" warning, which codex-acp would forward
	// as answer text.
	home := t.TempDir()
	codexHome := filepath.Join(home, ".codex")
	if err := llmtest.WriteCodexConfig(codexHome, srv.URL(), "gpt-5.5"); err != nil {
		t.Fatal(err)
	}
	p, err := acpclient.New(acpclient.Options{
		Name:    "acp:codex",
		Command: []string{bin},
		Env: proc.EnvPolicy{
			Passthrough: []string{"PATH"}, // the npm bin is a node script
			Set: map[string]string{
				"HOME":              home,
				"CODEX_HOME":        codexHome,
				llmtest.CodexKeyEnv: llmtest.CodexKey,
			},
		},
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
	cwd := t.TempDir()
	parent, err := session.NewLog(session.Header{Version: session.FormatVersion, ID: "parent", Cwd: cwd}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	start := time.Now()
	h, err := svc.Start(ctx, "acp:codex", subagent.Request{
		Prompt:     []llm.Block{{Type: llm.BlockText, Text: "summarise the plan"}},
		Parent:     parent,
		Permission: permission.State{Mode: sandbox.WorkspaceWrite},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := h.Dispose(); err != nil {
			t.Error(err)
		}
	}()
	res, err := h.Wait(ctx)
	t.Logf("delegation took %v", time.Since(start))
	if err != nil {
		t.Fatal(err)
	}
	if res.StopReason != subagent.StopCompleted || res.Text() != answer {
		t.Fatalf("result %+v", res)
	}
	if !strings.HasPrefix(res.ChildID, "acp:codex/") || len(res.ChildID) == len("acp:codex/") {
		t.Errorf("child id %q", res.ChildID)
	}

	reqs := srv.Requests()
	if len(reqs) != 1 {
		t.Fatalf("%d model requests", len(reqs))
	}
	r := reqs[0]
	if r.Path != "/v1/responses" || r.Format != llmtest.FormatResponses || !r.Stream || r.Model() != "gpt-5.5" ||
		r.Header.Get("Authorization") != "Bearer "+llmtest.CodexKey {
		t.Fatalf("request %s format=%s stream=%t model=%q", r.Path, r.Format, r.Stream, r.Model())
	}
	if !slices.Contains(r.InputTexts("user"), "summarise the plan") {
		t.Fatalf("user texts %q", r.InputTexts("user"))
	}
	// Codex runs in the delegating session's directory.
	if !slices.ContainsFunc(r.InputTexts("user"), func(s string) bool { return strings.Contains(s, "<cwd>"+cwd+"</cwd>") }) {
		t.Errorf("environment context does not name cwd %s", cwd)
	}
}
