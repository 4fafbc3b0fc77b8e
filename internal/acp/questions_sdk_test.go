package acp_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dsh-dev/dsh/internal/llm/llmtest"
)

// questionsSummary is what testdata/sdk-questions.mjs reports.
type questionsSummary struct {
	Modes struct {
		CurrentModeID  string `json:"currentModeId"`
		AvailableModes []struct {
			ID string `json:"id"`
		} `json:"availableModes"`
	} `json:"modes"`
	ModeUpdates []string `json:"modeUpdates"`
	Permissions []struct {
		ToolCall map[string]any `json:"toolCall"`
		Options  []struct {
			OptionID string `json:"optionId"`
			Name     string `json:"name"`
			Kind     string `json:"kind"`
		} `json:"options"`
	} `json:"permissions"`
	Elicitations []map[string]any `json:"elicitations"`
	Written      bool             `json:"written"`
	Exit1, Exit2 struct {
		Code *int `json:"code"`
	}
}

func jsonArgs(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// TestOfficialSDKQuestions: questions and plan mode through the official
// ACP TypeScript SDK: plan mode as an ACP mode, a question and the plan
// through session/request_permission, a form through elicitation/create;
// every frame dsh wrote validates against the ACP schema.
func TestOfficialSDKQuestions(t *testing.T) {
	sdk := sdkDir(t)
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skipf("node is not installed: %v", err)
	}
	schemas := loadSchemas(t, sdk)
	srv := llmtest.New()
	defer srv.Close()
	cwd := t.TempDir()
	db := map[string]any{"id": "db", "question": "Which database?", "header": "Storage",
		"options": []map[string]string{{"label": "SQLite", "description": "embedded"}, {"label": "Postgres"}}}
	langs := map[string]any{"id": "langs", "question": "Which languages?", "multi_select": true,
		"options": []map[string]string{{"label": "Go"}, {"label": "Rust"}, {"label": "Zig"}}}
	srv.Enqueue(
		llmtest.Response{ToolCalls: []llmtest.ToolCall{{ID: "call_ask", Name: "ask_user_question", Arguments: jsonArgs(map[string]any{"questions": []any{db}})}}},
		llmtest.Response{ToolCalls: []llmtest.ToolCall{{ID: "call_plan1", Name: "exit_plan_mode", Arguments: jsonArgs(map[string]string{"plan": "# Write planned.txt\n1. write it"})}}},
		llmtest.Response{ToolCalls: []llmtest.ToolCall{{ID: "call_plan2", Name: "exit_plan_mode", Arguments: jsonArgs(map[string]string{"plan": "# Write planned.txt carefully\n1. write it"})}}},
		llmtest.Response{ToolCalls: []llmtest.ToolCall{{ID: "call_write", Name: "write", Arguments: jsonArgs(map[string]string{"file_path": filepath.Join(cwd, "planned.txt"), "content": "ok\n"})}}},
		llmtest.Response{Text: "done"},
		llmtest.Response{ToolCalls: []llmtest.ToolCall{{ID: "call_form", Name: "ask_user_question", Arguments: jsonArgs(map[string]any{"questions": []any{db, langs}})}}},
		llmtest.Response{Text: "thanks"},
	)
	frames := t.TempDir()
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, filepath.Join("testdata", "sdk-questions.mjs"), dshBin)
	cmd.Env = append(os.Environ(),
		"ACP_SDK="+filepath.Join(sdk, "dist", "v1", "stable", "acp.js"),
		"FRAMES="+frames, "CWD="+cwd,
		"DSH_HOME="+t.TempDir(), "DEEPSEEK_API_KEY=test-key", "DEEPSEEK_BASE_URL="+srv.URL(),
	)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("scenario: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	var s questionsSummary
	if err := json.Unmarshal(stdout.Bytes(), &s); err != nil {
		t.Fatalf("summary: %v\n%s", err, stdout.String())
	}
	var ids []string
	for _, m := range s.Modes.AvailableModes {
		ids = append(ids, m.ID)
	}
	if s.Modes.CurrentModeID != "workspace-write" || !slices.Contains(ids, "plan") {
		t.Errorf("modes %+v", s.Modes)
	}
	if !slices.Equal(s.ModeUpdates, []string{"plan", "workspace-write"}) {
		t.Errorf("mode updates %v", s.ModeUpdates)
	}
	if len(s.Permissions) != 3 {
		t.Fatalf("%d permission requests: %+v", len(s.Permissions), s.Permissions)
	}
	ask := s.Permissions[0]
	if ask.ToolCall["toolCallId"] != "call_ask" || len(ask.Options) != 3 || ask.Options[0].Name != "SQLite" || ask.Options[1].Name != "Postgres" || ask.Options[2].Kind != "reject_once" {
		t.Errorf("question as a permission request: %+v", ask)
	}
	for i, p := range s.Permissions[1:] {
		content, _ := json.Marshal(p.ToolCall["content"])
		if p.ToolCall["kind"] != "switch_mode" || !strings.Contains(string(content), "Write planned.txt") || len(p.Options) != 2 {
			t.Errorf("plan %d: %+v", i+1, p)
		}
	}
	if !s.Written {
		t.Error("the write after the approved plan did not happen")
	}
	if len(s.Elicitations) != 1 {
		t.Fatalf("elicitations %+v", s.Elicitations)
	}
	el := s.Elicitations[0]
	schemaJSON, _ := json.Marshal(el["requestedSchema"])
	if el["mode"] != "form" || el["toolCallId"] != "call_form" || !strings.Contains(string(schemaJSON), `"langs":{"description":"Which languages?","items":{"anyOf"`) {
		t.Errorf("elicitation %v", el)
	}
	if s.Exit1.Code == nil || *s.Exit1.Code != 0 || s.Exit2.Code == nil || *s.Exit2.Code != 0 {
		t.Errorf("exits %+v %+v", s.Exit1, s.Exit2)
	}
	// What the model read.
	reqs := srv.Requests()
	if len(reqs) != 7 {
		t.Fatalf("%d model requests", len(reqs))
	}
	for i, want := range map[int]string{1: "db (Which database?): Postgres", 3: "keep planning", 4: "approved", 6: "langs (Which languages?): Go, Zig"} {
		body, _ := json.Marshal(reqs[i].Messages())
		if !strings.Contains(string(body), want) {
			t.Errorf("request %d lacks %q", i, want)
		}
	}
	for i := 1; i <= 2; i++ {
		out, err := os.ReadFile(filepath.Join(frames, itoa(i)+".out"))
		if err != nil {
			t.Fatal(err)
		}
		in, err := os.ReadFile(filepath.Join(frames, itoa(i)+".in"))
		if err != nil {
			t.Fatal(err)
		}
		validateAgentFrames(t, schemas, out, in)
	}
}
