package agent_test

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"

	"github.com/dsh-dev/dsh/internal/llm"
	"github.com/dsh-dev/dsh/internal/llm/llmtest"
	"github.com/dsh-dev/dsh/internal/llm/openai"
	"github.com/dsh-dev/dsh/internal/session"
)

// TestRequestRebuiltFromLogAlone proves invariant 1: every request the
// agent sent can be rebuilt byte for byte from the session log alone
// (request/header for system, tools and config; derived history for the
// messages).
func TestRequestRebuiltFromLogAlone(t *testing.T) {
	h := newHarness(t)
	h.srv.Enqueue(
		llmtest.Response{Reasoning: "look first", ToolCalls: []llmtest.ToolCall{bashCall("echo a"), bashCall("echo b")}},
		llmtest.Response{Text: "interim", ToolCalls: []llmtest.ToolCall{{Name: "bash", Arguments: `{"command":`}}},
		llmtest.Response{Text: "done"},
		llmtest.Response{Text: "second turn"},
	)
	h.run(t.Context(), "first")
	h.run(t.Context(), "second")
	original := h.srv.Requests()
	events := h.log.Events()

	// Replay each request through a fresh adapter against a second server.
	replay := llmtest.New()
	defer replay.Close()
	replay.SetFallback(func(llmtest.Request) llmtest.Response { return llmtest.Response{Text: "x"} })
	ad := openai.New(openai.Config{Provider: "deepseek", BaseURL: replay.URL(), APIKey: "k", DeepSeek: true})
	n := 0
	for _, e := range events {
		if e.Type != session.TypeAssistantMsg {
			continue
		}
		cut := e.SourceEventSeqs[0]
		var hdr session.RequestHeader
		for _, prev := range events[:cut] {
			if prev.Type == session.TypeRequestHeader {
				_ = prev.Decode(&hdr)
			}
		}
		msgs, err := session.DeriveMessages(events[:cut])
		if err != nil {
			t.Fatal(err)
		}
		req := llm.Request{
			Model: hdr.Header.Config.Model, System: hdr.Header.System, Tools: hdr.Header.Tools,
			Effort: hdr.Header.Config.Effort, MaxTokens: hdr.Header.Config.MaxTokens,
			Temperature: hdr.Header.Config.Temperature, Messages: msgs, SessionID: h.log.ID(),
		}
		for _, err := range ad.Stream(context.Background(), req) {
			if err != nil {
				t.Fatal(err)
			}
		}
		n++
	}
	rebuilt := replay.Requests()
	if n != 4 || len(rebuilt) != len(original) {
		t.Fatalf("rebuilt %d requests from %d messages, original %d", len(rebuilt), n, len(original))
	}
	for i := range original {
		var a, b bytes.Buffer
		_ = json.Compact(&a, original[i].Body)
		_ = json.Compact(&b, rebuilt[i].Body)
		if a.String() != b.String() {
			t.Errorf("request %d differs:\noriginal %s\nrebuilt  %s", i, a.String(), b.String())
		}
	}
}
