package cli_test

import (
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/dsh-dev/dsh/internal/cli"
	"github.com/dsh-dev/dsh/internal/llm"
	"github.com/dsh-dev/dsh/internal/session"
)

var update = flag.Bool("update", false, "rewrite golden files")

func TestTranscriptGolden(t *testing.T) {
	h := session.Header{Version: 0, ID: "golden", CreatedAt: 1780000000000, Cwd: "/work/repo"}
	log, err := session.NewLog(h, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	app := func(typ string, data any) {
		t.Helper()
		if _, err := log.Append(typ, data); err != nil {
			t.Fatal(err)
		}
	}
	call := llm.Block{Type: llm.BlockToolCall, ID: "c1", Name: "bash", Arguments: `{"command":"ls"}`}
	app(session.TypeTurnStart, session.TurnStart{Turn: 1})
	app(session.TypeStepStart, session.StepRef{Turn: 1, Step: 1})
	app(session.TypeUserMessage, llm.Message{ID: "u", Role: llm.RoleUser, Content: []llm.Block{llm.TextBlock("list the files\nplease")}, Source: llm.Source{Kind: "user"}})
	app(session.TypeTitle, session.Title{Provider: "p", Model: "small", Error: &llm.Failure{Code: llm.CodeRateLimit, Message: "slow down"}})
	app(session.TypeTitle, session.Title{Title: "List the files", Provider: "p", Model: "small"})
	app(session.TypeLLMRetry, session.LLMRetry{Retry: 1, DelayMs: 500, Failure: &llm.Failure{Code: llm.CodeRateLimit, Message: "slow down", Status: 429}})
	app(session.TypeAssistantMsg, session.AssistantMessage{Turn: 1, Step: 1, Message: llm.Message{ID: "a", Role: llm.RoleAssistant, Content: []llm.Block{{Type: llm.BlockReasoning, Text: "use ls"}, llm.TextBlock("Listing."), call}}})
	app(session.TypeToolCall, session.ToolCall{Turn: 1, Step: 1, CallID: "c1", Name: "bash", Arguments: call.Arguments})
	app(session.TypeToolResult, session.ToolResult{Turn: 1, Step: 1, CallID: "c1", Name: "bash", Content: []llm.Block{llm.TextBlock("a.go\nb.go\n\n[exit code: 0]")}})
	app(session.TypeStepEnd, session.StepRef{Turn: 1, Step: 1})
	app(session.TypeStepStart, session.StepRef{Turn: 1, Step: 2})
	app(session.TypeToolResult, session.ToolResult{Turn: 1, Step: 2, CallID: "c2", Name: "bash", IsError: true, Content: []llm.Block{llm.TextBlock("Error: boom")}, Error: &session.ToolError{Name: "ToolError", Code: "TOOL_TIMEOUT"}})
	app(session.TypeAssistantMsg, session.AssistantMessage{Turn: 1, Step: 2, Message: llm.Message{ID: "b", Role: llm.RoleAssistant, Content: []llm.Block{llm.TextBlock("Two files.")}}})
	app(session.TypeStepEnd, session.StepRef{Turn: 1, Step: 2})
	app(session.TypeTurnEnd, session.TurnEnd{Turn: 1, Reason: session.TurnEndReason{Kind: session.EndCompleted}})
	app(session.TypeTurnStart, session.TurnStart{Turn: 2})
	app(session.TypeTurnEnd, session.TurnEnd{Turn: 2, Reason: session.TurnEndReason{Kind: session.EndAborted, Cause: "user"}})

	got := cli.Transcript(log.Header(), log.Events())
	path := filepath.Join("testdata", "transcript.golden")
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create)", err)
	}
	if got != string(want) {
		t.Errorf("transcript differs from %s (-update rewrites it):\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}
