package agent_test

import (
	"testing"

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
