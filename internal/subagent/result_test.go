package subagent

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/dsh-dev/dsh/internal/llm"
	"github.com/dsh-dev/dsh/internal/session"
)

func appendAll(t *testing.T, entries ...func(*session.Log) error) []session.Event {
	t.Helper()
	log, err := session.NewLog(session.Header{ID: "x"}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range entries {
		if err := f(log); err != nil {
			t.Fatal(err)
		}
	}
	return log.Events()
}

func assistant(usage *llm.Usage, blocks ...llm.Block) func(*session.Log) error {
	return func(l *session.Log) error {
		_, err := l.Append(session.TypeAssistantMsg, session.AssistantMessage{Message: llm.Message{Role: llm.RoleAssistant, Content: blocks}, Usage: usage})
		return err
	}
}

func delta(s string) func(*session.Log) error {
	return func(l *session.Log) error {
		_, err := l.Append(session.TypeAssistantChunk, session.AssistantChunk{Chunk: llm.Chunk{Type: llm.ChunkTextDelta, Text: s}})
		return err
	}
}

func TestFinalOutput(t *testing.T) {
	call := llm.Block{Type: llm.BlockToolCall, ID: "c", Name: "bash", Arguments: "{}"}
	for _, tc := range []struct {
		name    string
		entries []func(*session.Log) error
		want    string
		blocks  int
	}{
		{"nothing", nil, "", 0},
		{"last message with text wins", []func(*session.Log) error{
			assistant(nil, llm.TextBlock("first")), assistant(nil, llm.TextBlock("a"), call, llm.TextBlock("b")),
		}, "ab", 2},
		{"tool-only messages are skipped", []func(*session.Log) error{
			assistant(nil, llm.TextBlock("answer")), assistant(nil, call), assistant(nil, llm.Block{Type: llm.BlockReasoning, Text: "hmm"}),
		}, "answer", 1},
		{"streamed text when no message has text", []func(*session.Log) error{
			delta("half "), delta("done"), assistant(nil, call),
		}, "half done", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := finalOutput(appendAll(t, tc.entries...))
			if len(out) != tc.blocks || (Result{Output: out}).Text() != tc.want {
				t.Fatalf("finalOutput = %+v, want %d blocks %q", out, tc.blocks, tc.want)
			}
		})
	}
}

func TestTotalUsage(t *testing.T) {
	events := appendAll(t,
		assistant(&llm.Usage{InputTokens: 10, OutputTokens: 2}),
		assistant(nil, llm.TextBlock("x")),
		assistant(&llm.Usage{InputTokens: 5, CacheReadTokens: 7, OutputTokens: 3, ReasoningTokens: 1}),
	)
	if got, want := totalUsage(events), (llm.Usage{InputTokens: 15, CacheReadTokens: 7, OutputTokens: 5, ReasoningTokens: 1}); got != want {
		t.Fatalf("usage %+v, want %+v", got, want)
	}
}

func TestStopReason(t *testing.T) {
	for _, tc := range []struct {
		reason     session.TurnEndReason
		stop, diag string
	}{
		{session.TurnEndReason{Kind: session.EndCompleted}, StopCompleted, ""},
		{session.TurnEndReason{Kind: session.EndMaxTokens}, StopMaxTokens, "output token limit"},
		{session.TurnEndReason{Kind: session.EndAborted, Cause: "parent"}, StopAborted, "cause: parent"},
		{session.TurnEndReason{Kind: session.EndInterrupted}, StopAborted, "cause: unknown"},
		{session.TurnEndReason{Kind: session.EndBlocked}, StopError, "blocked"},
		{session.TurnEndReason{Kind: session.EndError, Failure: &llm.Failure{Code: llm.CodeRateLimit, Message: "slow down"}}, StopError, "RATE_LIMIT: slow down"},
		{session.TurnEndReason{Kind: session.EndError}, StopError, "ended with error"},
	} {
		stop, diag := stopReason(tc.reason)
		if stop != tc.stop || !strings.Contains(diag, tc.diag) || (tc.diag == "" && diag != "") {
			t.Errorf("%+v → %s %q, want %s %q", tc.reason, stop, diag, tc.stop, tc.diag)
		}
	}
}

func TestClip(t *testing.T) {
	for _, s := range []string{"", "short", strings.Repeat("a", 100), strings.Repeat("ü", 100)} {
		got := clip(s, 51)
		if len(got) > 51 || !utf8.ValidString(got) || (len(s) <= 51 && got != s) {
			t.Errorf("clip(%d bytes) = %q", len(s), got)
		}
	}
}

func TestToolFilter(t *testing.T) {
	for _, tc := range []struct {
		f    ToolFilter
		name string
		want bool
	}{
		{ToolFilter{}, "bash", true},
		{ToolFilter{Allow: []string{}}, "bash", false},
		{ToolFilter{Allow: []string{"bash"}}, "bash", true},
		{ToolFilter{Allow: []string{"bash"}}, "read", false},
		{ToolFilter{Deny: []string{"bash"}}, "bash", false},
		{ToolFilter{Allow: []string{"bash"}, Deny: []string{"bash"}}, "bash", false},
	} {
		if got := tc.f.Permits(tc.name); got != tc.want {
			t.Errorf("%+v.Permits(%s) = %v", tc.f, tc.name, got)
		}
	}
	if !(ToolFilter{}).IsZero() || (ToolFilter{Allow: []string{}}).IsZero() {
		t.Error("IsZero")
	}
}
