package agent_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/dsh-dev/dsh/internal/agent"
	"github.com/dsh-dev/dsh/internal/llm"
	"github.com/dsh-dev/dsh/internal/llm/llmtest"
	"github.com/dsh-dev/dsh/internal/session"
)

// The tests in this file are DSH's test vectors for the model adapters,
// run end to end through the agent against the scripted model server.

// TestDoneWithoutFinishReason: a chat stream that reaches [DONE] without
// any finish_reason is a normal stop, for an answer and for tool calls.
func TestDoneWithoutFinishReason(t *testing.T) {
	h := newHarness(t)
	h.srv.Enqueue(
		llmtest.Response{ToolCalls: []llmtest.ToolCall{bashCall("echo hi")}, NoFinishReason: true},
		llmtest.Response{Text: "the answer", NoFinishReason: true},
	)
	out := h.run(t.Context(), "go")
	if out.Reason.Kind != session.EndCompleted || out.Text != "the answer" {
		t.Fatalf("outcome %+v", out)
	}
	events := h.log.Events()
	checkBalanced(t, events)
	if n := len(eventsOf[session.LLMRetry](t, events, session.TypeLLMRetry)); n != 0 {
		t.Errorf("%d retries, want none", n)
	}
	if res := toolResults(t, events); len(res) != 1 || res[0].IsError {
		t.Errorf("tool results %+v", res)
	}
	if n := h.srv.RequestCount(); n != 2 {
		t.Errorf("%d requests, want 2", n)
	}
}

// TestReasoningOnlyReply: a reply with reasoning and no text or tool call
// completes the turn without a retry, and its reasoning goes back to the
// model on the next request like any other.
func TestReasoningOnlyReply(t *testing.T) {
	h := newHarness(t)
	h.srv.Enqueue(
		llmtest.Response{Reasoning: "Nothing needs saying."},
		llmtest.Response{Text: "second"},
	)
	out := h.run(t.Context(), "first")
	if out.Reason.Kind != session.EndCompleted || out.Text != "" {
		t.Fatalf("outcome %+v", out)
	}
	events := h.log.Events()
	if n := len(eventsOf[session.LLMRetry](t, events, session.TypeLLMRetry)); n != 0 {
		t.Errorf("%d retries, want none", n)
	}
	if n := h.srv.RequestCount(); n != 1 {
		t.Fatalf("%d requests, want 1", n)
	}
	if out := h.run(t.Context(), "again"); out.Reason.Kind != session.EndCompleted || out.Text != "second" {
		t.Fatalf("second outcome %+v", out)
	}
	msgs := h.srv.Requests()[1].Messages()
	var found bool
	for _, m := range msgs {
		if m["role"] == "assistant" {
			found = m["reasoning_content"] == "Nothing needs saying." && m["content"] == ""
		}
	}
	if !found {
		t.Errorf("second request lacks the reasoning-only turn: %s", h.srv.Requests()[1].Body)
	}
}

// TestToolCallTurnContentEmptyString: an assistant turn with tool calls and
// no text is sent back with "content": "", never null.
func TestToolCallTurnContentEmptyString(t *testing.T) {
	h := newHarness(t)
	h.srv.Enqueue(
		llmtest.Response{ToolCalls: []llmtest.ToolCall{bashCall("true")}},
		llmtest.Response{Text: "done"},
	)
	if out := h.run(t.Context(), "go"); out.Reason.Kind != session.EndCompleted {
		t.Fatalf("outcome %+v", out)
	}
	var seen bool
	for _, m := range h.srv.Requests()[1].Messages() {
		if m["role"] != "assistant" {
			continue
		}
		seen = true
		c, ok := m["content"]
		if !ok || c != "" {
			t.Errorf("assistant content = %#v (present %v); want \"\"", c, ok)
		}
	}
	if !seen {
		t.Error("no assistant message in the second request")
	}
}

// TestPromptLargerThanWindowRefused: input that cannot fit the context
// window is refused before any request (no pre-step hook runs, so not even
// a compaction is attempted), with both sizes in a PROMPT_TOO_LARGE
// failure; it never enters the history, and the session goes on.
func TestPromptLargerThanWindowRefused(t *testing.T) {
	h := newHarness(t)
	var hooked int
	h.agent = h.newAgentWith(h.log, func(c *agent.Config) {
		c.Hooks.PreStep = append(c.Hooks.PreStep, func(_ context.Context, in agent.PreStep) ([]llm.Message, bool, error) {
			hooked++
			return in.Messages, false, nil
		})
	})
	h.srv.Enqueue(llmtest.Response{Text: "small one answered"})
	huge := strings.Repeat("lorem ipsum ", 1000) // 3,000 tokens for a 1,000-token window
	out := h.run(t.Context(), huge)
	f := out.Reason.Failure
	if out.Reason.Kind != session.EndError || f == nil || f.Code != llm.CodePromptTooLarge {
		t.Fatalf("outcome %+v", out)
	}
	if f.ContextWindow != 1000 || f.EstimatedTokens != 3000 ||
		!strings.Contains(f.Message, "1000 tokens") || !strings.Contains(f.Message, fmt.Sprint(f.EstimatedTokens)) {
		t.Errorf("failure %+v lacks the sizes", f)
	}
	if n := h.srv.RequestCount(); n != 0 || hooked != 0 {
		t.Fatalf("%d requests and %d pre-step hooks before the refusal", n, hooked)
	}
	events := h.log.Events()
	checkBalanced(t, events)
	if n := len(eventsOf[llm.Message](t, events, session.TypeUserMessage)); n != 0 {
		t.Errorf("%d user messages logged for a refused prompt", n)
	}
	var refused int
	for _, sp := range eventsOf[session.InboxSpliced](t, events, session.TypeInboxSpliced) {
		if sp.Outcome == "refused" && sp.RemovedCount == 1 {
			refused++
		}
	}
	if refused != 1 {
		t.Errorf("%d refused splices, want 1", refused)
	}
	ends := eventsOf[session.TurnEnd](t, events, session.TypeTurnEnd)
	if len(ends) != 1 || ends[0].Reason.Failure == nil || ends[0].Reason.Failure.EstimatedTokens != f.EstimatedTokens {
		t.Errorf("turn/end %+v", ends)
	}

	// The refused prompt is not pending any more and never reaches a request.
	out = h.run(t.Context(), "small")
	if out.Reason.Kind != session.EndCompleted || out.Text != "small one answered" {
		t.Fatalf("second outcome %+v", out)
	}
	if body := string(h.srv.Requests()[0].Body); strings.Contains(body, "lorem") {
		t.Error("the refused prompt reached a request")
	}
}

// TestPromptNearWindowSent: a prompt that fits, even close to the window,
// is sent.
func TestPromptNearWindowSent(t *testing.T) {
	h := newHarness(t)
	h.srv.Enqueue(llmtest.Response{Text: "ok"})
	prompt := strings.Repeat("x", 4*1000)
	if out := h.run(t.Context(), prompt); out.Reason.Kind != session.EndCompleted {
		t.Fatalf("outcome %+v", out)
	}
	if n := h.srv.RequestCount(); n != 1 {
		t.Errorf("%d requests, want 1", n)
	}
}

// memSink records what a log stores.
type memSink struct{ events []session.Event }

func (m *memSink) Append(_ context.Context, _ string, evs []session.Event) error {
	m.events = append(m.events, evs...)
	return nil
}

// TestPromptStoredOnce: a prompt is stored once, in the splice that queued
// it; its user/message is stored as a reference, also for a prompt queued
// before a restart and claimed by the resumed agent, and the requests
// carry it whole.
func TestPromptStoredOnce(t *testing.T) {
	h := newHarness(t)
	sink := &memSink{}
	hd := session.Header{ID: "stored-once", Cwd: t.TempDir()}
	log, err := session.NewLog(hd, nil, sink)
	if err != nil {
		t.Fatal(err)
	}
	first := h.newAgent(log)
	h.srv.Enqueue(llmtest.Response{Text: "one"}, llmtest.Response{Text: "two"})
	if err := first.Queue(agent.NewUserMessage("prompt-alpha")); err != nil {
		t.Fatal(err)
	}
	if _, err := first.Run(t.Context()); err != nil {
		t.Fatal(err)
	}
	// Queued, then the process stops before running it.
	if err := first.Queue(agent.NewUserMessage("prompt-beta")); err != nil {
		t.Fatal(err)
	}
	if err := log.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	resumed, err := session.NewLog(hd, sink.events, sink)
	if err != nil {
		t.Fatal(err)
	}
	if out, err := h.newAgent(resumed).Run(t.Context()); err != nil || out.Text != "two" {
		t.Fatalf("resumed run: %+v, %v", out, err)
	}
	if err := resumed.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"prompt-alpha", "prompt-beta"} {
		n := 0
		for _, e := range sink.events {
			n += strings.Count(string(e.Data), `"text":"`+p+`"`)
		}
		if n != 1 {
			t.Errorf("%s is stored %d times, want once", p, n)
		}
	}
	var texts []string
	for _, m := range resumed.Messages() {
		if m.Role == llm.RoleUser {
			texts = append(texts, m.Text())
		}
	}
	if strings.Join(texts, ",") != "prompt-alpha,prompt-beta" {
		t.Errorf("history user texts %v", texts)
	}
	if body := string(h.srv.Requests()[1].Body); !strings.Contains(body, "prompt-alpha") || !strings.Contains(body, "prompt-beta") {
		t.Errorf("second request lacks a prompt: %s", body)
	}
}
