package anthropic

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"

	"github.com/dsh-dev/dsh/internal/llm"
	"github.com/dsh-dev/dsh/internal/llm/llmtest"
)

// TestEncodeCacheSameBytes builds the requests of a long session step by
// step, with the history copied each time as the log hands it out,
// compacted twice and its last message rewritten once, and checks that
// the cached encoding sends exactly the bytes of encoding each request
// from scratch.
func TestEncodeCacheSameBytes(t *testing.T) {
	temp := 0.5
	cache := new(llm.EncodeCache)
	var history []llm.Message
	for i := range 300 {
		history = append(history, llmtest.HistoryStep(i)...)
		switch i {
		case 120, 250:
			// Compaction: a summary replaces the oldest part.
			summary := llm.Message{ID: fmt.Sprint("summary", i), Role: llm.RoleUser, Content: []llm.Block{llm.TextBlock("summary")}}
			history = append([]llm.Message{summary}, history[len(history)/2:]...)
		case 200:
			// Same ID, new content: a different message.
			last := &history[len(history)-1]
			last.Content = append(slices.Clone(last.Content), llm.TextBlock("more"))
		}
		req := llm.Request{Model: "m\"<x>", Messages: slices.Clone(history), EncodeCache: cache}
		if i%3 != 0 {
			req.System = "system <&> prompt"
		}
		if i%10 == 0 {
			req.Tools = []llm.ToolSchema{{Name: "bash", Description: "run", Parameters: json.RawMessage(`{"type": "object"}`)}, {Name: "none"}}
			req.Effort, req.MaxTokens, req.Temperature = llm.EffortMax, 100, &temp
		}
		if i%13 == 0 {
			req.Effort, req.MaxTokens = llm.EffortLow, 0
		}
		if i%17 == 0 {
			req.Effort, req.MaxTokens = llm.EffortHigh, 20000
		}
		want, err := json.Marshal(buildRequest(req))
		if err != nil {
			t.Fatal(err)
		}
		got, err := encodeRequest(req)
		if err != nil {
			t.Fatal(err)
		}
		if string(got.Bytes()) != string(want) {
			t.Fatalf("step %d: cached encoding differs:\ngot  %s\nwant %s", i, got.Bytes(), want)
		}
		uncached := req
		uncached.EncodeCache = nil
		if got, err := encodeRequest(uncached); err != nil || string(got.Bytes()) != string(want) {
			t.Fatalf("step %d: uncached encoding differs (%v):\ngot  %s\nwant %s", i, err, got.Bytes(), want)
		}
	}
}

// TestEncodeEmpty covers a request without system prompt or messages,
// whose messages member is null.
func TestEncodeEmpty(t *testing.T) {
	req := llm.Request{Model: "m", EncodeCache: new(llm.EncodeCache)}
	want, _ := json.Marshal(buildRequest(req))
	got, err := encodeRequest(req)
	if err != nil || string(got.Bytes()) != string(want) {
		t.Fatalf("got %s (%v), want %s", got.Bytes(), err, want)
	}
}
