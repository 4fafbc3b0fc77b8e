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
	"github.com/dsh-dev/dsh/internal/sandbox"
)

// scenarioSummary is what testdata/sdk-scenario.mjs reports.
type scenarioSummary struct {
	TextSession string `json:"textSession"`
	Text        string `json:"text"`
	Thought     string `json:"thought"`
	Model       string `json:"model"`
	Modes       struct {
		CurrentModeID  string `json:"currentModeId"`
		AvailableModes []struct {
			ID string `json:"id"`
		} `json:"availableModes"`
	} `json:"modes"`
	ToolUpdates   []map[string]any `json:"toolUpdates"`
	ModeUpdates   []string         `json:"modeUpdates"`
	Permission    map[string]any   `json:"permission"`
	RejectUpdates []map[string]any `json:"rejectUpdates"`
	Written       bool             `json:"written"`
	BusyError     *struct {
		Code int `json:"code"`
	} `json:"busyError"`
	CancelStop         string `json:"cancelStop"`
	CancelText         string `json:"cancelText"`
	UpdatesAfterCancel int    `json:"updatesAfterCancel"`
	FailError          *struct {
		Code int            `json:"code"`
		Data map[string]any `json:"data"`
	} `json:"failError"`
	CwdError *struct {
		Code int `json:"code"`
	} `json:"cwdError"`
	Exit struct {
		Code *int    `json:"code"`
		Sig  *string `json:"sig"`
	} `json:"exit"`
	ExitMs      int64            `json:"exitMs"`
	Negotiated  int              `json:"negotiated"`
	Listed      []string         `json:"listed"`
	ListedTitle string           `json:"listedTitle"`
	Replay      []map[string]any `json:"replay"`
	Exit2       struct {
		Code *int `json:"code"`
	} `json:"exit2"`
}

const scriptedAnswer = "Hello from the scripted model."

// TestOfficialSDKClient drives dsh acp with the official ACP TypeScript
// SDK against the scripted fake model, and validates every frame dsh
// wrote against the ACP v1 schema.
func TestOfficialSDKClient(t *testing.T) {
	sdk := sdkDir(t)
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skipf("node is not installed: %v", err)
	}
	if _, err := sandbox.Default().Backend(); err != nil {
		// The write under read-only asks only once the sandbox refused it.
		t.Skipf("no sandbox backend on this machine (the permission scenario needs one): %v", err)
	}
	schemas := loadSchemas(t, sdk)
	if len(schemas) == 0 {
		t.Fatal("no ACP schema found")
	}

	srv := llmtest.New()
	defer srv.Close()
	// 1. text
	srv.Enqueue(llmtest.Response{Reasoning: "pondering", Text: scriptedAnswer})
	// 2. tool
	srv.Enqueue(llmtest.Response{ToolCalls: []llmtest.ToolCall{{ID: "call_read", Name: "read", Arguments: `{"file_path":"hello.txt"}`}}})
	srv.Enqueue(llmtest.Response{Text: "It says hi."})
	// 3. reject
	// A write under read-only: file tools are refused outright there, a
	// command may ask to escalate once the sandbox refused it, which is an
	// approval.
	srv.Enqueue(llmtest.Response{ToolCalls: []llmtest.ToolCall{{ID: "call_try", Name: "bash",
		Arguments: `{"command":"echo x > out.txt","description":"write out.txt"}`}}})
	srv.Enqueue(llmtest.Response{ToolCalls: []llmtest.ToolCall{{ID: "call_write", Name: "bash",
		Arguments: `{"command":"echo x > out.txt","description":"write out.txt","sandbox_permissions":"workspace-write","justification":"the user asked for out.txt"}`}}})
	srv.Enqueue(llmtest.Response{Text: "Understood, nothing written."})
	// 4. cancel: a few chunks, then the stream stalls until cancelled.
	srv.Enqueue(llmtest.Response{Text: strings.Repeat("slow words ", 20), ChunkRunes: 4, StallAfter: 4})
	// 5. fail
	srv.Enqueue(llmtest.Response{Status: 401})

	cwd := t.TempDir()
	if err := os.WriteFile(filepath.Join(cwd, "hello.txt"), []byte("hi\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	frames := t.TempDir()
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, filepath.Join("testdata", "sdk-scenario.mjs"), dshBin)
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
	t.Logf("dsh stderr:\n%s", stderr.String())
	var s scenarioSummary
	if err := json.Unmarshal(stdout.Bytes(), &s); err != nil {
		t.Fatalf("summary: %v\n%s", err, stdout.String())
	}

	// 1. text: the chunks are the scripted text, the thought its reasoning.
	if s.Text != scriptedAnswer || s.Thought != "pondering" {
		t.Errorf("text %q thought %q", s.Text, s.Thought)
	}
	if s.Modes.CurrentModeID != "workspace-write" || len(s.Modes.AvailableModes) < 3 || s.Model != "deepseek/deepseek-v4-flash" {
		t.Errorf("modes %+v model %q", s.Modes, s.Model)
	}
	// 2. tool: tool_call, then exactly one final update with the same id.
	checkOneFinal(t, "read", s.ToolUpdates, "call_read", "completed")
	if k := s.ToolUpdates[0]["kind"]; k != "read" {
		t.Errorf("read call kind %v", k)
	}
	// 3. reject: read-only mode (logged, announced), the write asked,
	// rejected once, failed, nothing written.
	if !slices.Equal(s.ModeUpdates, []string{"read-only"}) {
		t.Errorf("mode updates %v", s.ModeUpdates)
	}
	if s.Permission == nil {
		t.Fatalf("no session/request_permission for the write: %v", s.RejectUpdates)
	}
	if tc, _ := s.Permission["toolCall"].(map[string]any); tc["toolCallId"] != "call_write" {
		t.Errorf("permission for %v", s.Permission["toolCall"])
	}
	checkOneFinal(t, "sandboxed write", byID(s.RejectUpdates, "call_try"), "call_try", "")
	checkOneFinal(t, "escalated write", byID(s.RejectUpdates, "call_write"), "call_write", "failed")
	if s.Written {
		t.Error("out.txt was written despite the rejection")
	}
	// 4. cancel.
	if s.CancelStop != "cancelled" || s.UpdatesAfterCancel != 0 || s.CancelText == "" {
		t.Errorf("cancel: stop %q, %d updates after the answer, text %q", s.CancelStop, s.UpdatesAfterCancel, s.CancelText)
	}
	if s.BusyError == nil || s.BusyError.Code != -32600 {
		t.Errorf("second prompt while busy: %+v", s.BusyError)
	}
	// 5. fail: a JSON-RPC error with the dsh failure code.
	if s.FailError == nil || s.FailError.Code != -32603 || s.FailError.Data["code"] != "AUTH" {
		t.Errorf("model failure: %+v", s.FailError)
	}
	// 6. cwd.
	if s.CwdError == nil || s.CwdError.Code != -32602 {
		t.Errorf("relative cwd: %+v", s.CwdError)
	}
	// stdin EOF: exit 0 within 5 s.
	if s.Exit.Code == nil || *s.Exit.Code != 0 || s.ExitMs > 5000 {
		t.Errorf("exit after EOF: %+v in %d ms", s.Exit, s.ExitMs)
	}
	// Second process: version negotiation, list, load.
	if s.Negotiated != 1 {
		t.Errorf("a client offering 7 got %d", s.Negotiated)
	}
	if !slices.Contains(s.Listed, s.TextSession) || s.ListedTitle != "say hello" {
		t.Errorf("list %v (title %q) lacks %s", s.Listed, s.ListedTitle, s.TextSession)
	}
	var user, agent, thought string
	for _, u := range s.Replay {
		c, _ := u["content"].(map[string]any)
		txt, _ := c["text"].(string)
		switch u["sessionUpdate"] {
		case "user_message_chunk":
			user += txt
		case "agent_message_chunk":
			agent += txt
		case "agent_thought_chunk":
			thought += txt
		}
	}
	if user != "say hello" || agent != scriptedAnswer || thought != "pondering" {
		t.Errorf("replay: user %q agent %q thought %q", user, agent, thought)
	}
	if s.Exit2.Code == nil || *s.Exit2.Code != 0 {
		t.Errorf("second process exit %+v", s.Exit2)
	}

	// Every frame dsh sent validates against the ACP schema.
	total := 0
	for i := 1; i <= 2; i++ {
		out, err := os.ReadFile(filepath.Join(frames, itoa(i)+".out"))
		if err != nil {
			t.Fatal(err)
		}
		in, err := os.ReadFile(filepath.Join(frames, itoa(i)+".in"))
		if err != nil {
			t.Fatal(err)
		}
		total += validateAgentFrames(t, schemas, out, in)
	}
	if total < 30 {
		t.Errorf("only %d frames validated", total)
	}
}

func byID(ups []map[string]any, id string) []map[string]any {
	var out []map[string]any
	for _, u := range ups {
		if u["toolCallId"] == id {
			out = append(out, u)
		}
	}
	return out
}

func itoa(i int) string { return string(rune('0' + i)) }

// checkOneFinal checks a call's updates: a tool_call, then updates of the
// same id of which exactly one (the last) is final, with status want
// ("" accepts either).
func checkOneFinal(t *testing.T, what string, ups []map[string]any, id, want string) {
	t.Helper()
	if len(ups) == 0 || ups[0]["sessionUpdate"] != "tool_call" || ups[0]["toolCallId"] != id {
		t.Fatalf("%s: updates %v", what, ups)
	}
	finals := 0
	for i, u := range ups[1:] {
		if u["toolCallId"] != id || u["sessionUpdate"] != "tool_call_update" {
			t.Errorf("%s: update %d %v", what, i+1, u)
		}
		if st := u["status"]; st == "completed" || st == "failed" {
			finals++
			if (want != "" && st != want) || i != len(ups)-2 {
				t.Errorf("%s: final %v at %d of %d", what, st, i+1, len(ups)-1)
			}
		}
	}
	if finals != 1 {
		t.Errorf("%s: %d final updates: %v", what, finals, ups)
	}
}
