package openai

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"

	"github.com/dsh-dev/dsh/internal/llm"
)

// scriptedStep returns the messages step i of a long session adds: every
// kind of block the adapters translate, in the shapes the agent logs.
func scriptedStep(i int) []llm.Message {
	id := func(s string) string { return fmt.Sprintf("%s%d", s, i) }
	call := llm.Block{Type: llm.BlockToolCall, ID: id("call_"), Name: "bash", Arguments: `{"command":"echo <a> & \"b\""}`}
	var msgs []llm.Message
	if i%7 == 0 {
		content := []llm.Block{llm.TextBlock(fmt.Sprintf("step %d: go on — ünïcode <&>", i))}
		if i%14 == 0 {
			content = append(content, llm.Block{Type: llm.BlockImage, MediaType: "image/png", Data: "iVBORw0KGgo="})
		}
		msgs = append(msgs, llm.Message{ID: id("u"), Role: llm.RoleUser, Content: content})
	}
	asst := []llm.Block{{Type: llm.BlockReasoning, Text: "think " + id("r"), Signature: map[bool]string{true: "sig", false: ""}[i%3 == 0]}}
	switch i % 5 {
	case 0:
		asst = append(asst, llm.TextBlock("answer "+id("t")))
	case 1:
		call.Arguments = ""
	case 2:
		call.Arguments = `{"command":`
	case 3:
		asst = append(asst, llm.TextBlock(""))
	}
	asst = append(asst, call)
	if i%4 == 0 {
		asst = append(asst, llm.Block{Type: llm.BlockToolCall, ID: id("second_"), Name: "read", Arguments: `{"path":"a"}`})
	}
	msgs = append(msgs, llm.Message{ID: id("a"), Role: llm.RoleAssistant, Content: asst})
	result := llm.Block{Type: llm.BlockToolResult, ToolCallID: call.ID, Name: "bash", IsError: i%6 == 0,
		Content: []llm.Block{llm.TextBlock("out\n"), llm.TextBlock(fmt.Sprintf("[exit code: %d]", i%2))}}
	if i%9 == 0 {
		result.Content = append(result.Content, llm.Block{Type: llm.BlockImage, MediaType: "image/jpeg", Data: "/9j/4AAQ"})
	}
	results := []llm.Block{result}
	if i%4 == 0 {
		results = append(results, llm.Block{Type: llm.BlockToolResult, ToolCallID: id("second_"), Name: "read", Content: []llm.Block{llm.TextBlock("file")}})
	}
	msgs = append(msgs, llm.Message{ID: id("result-"), Role: llm.RoleUser, Content: results, Source: llm.Source{Kind: "tool"}})
	switch i % 11 {
	case 3:
		msgs = append(msgs, llm.Message{ID: id("note"), Role: llm.RoleSystem, Content: []llm.Block{llm.TextBlock("runtime note")}})
	case 5:
		msgs = append(msgs, llm.Message{ID: id("empty"), Role: llm.RoleAssistant, Content: []llm.Block{}})
	}
	return msgs
}

// TestEncodeCacheSameBytes builds the requests of a long session step by
// step, with the history copied each time as the log hands it out,
// compacted twice and its last message rewritten once, and checks that
// the cached encoding sends exactly the bytes of encoding each request
// from scratch.
func TestEncodeCacheSameBytes(t *testing.T) {
	plain := New(Config{Provider: "openai"})
	deep := New(Config{Provider: "deepseek", DeepSeek: true})
	temp := 0.5
	cache := new(llm.EncodeCache)
	var history []llm.Message
	for i := range 300 {
		history = append(history, scriptedStep(i)...)
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
		c := plain
		if i%50 >= 25 {
			c = deep
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
			req.Effort = llm.EffortOff
		}
		want, err := json.Marshal(c.buildRequest(req))
		if err != nil {
			t.Fatal(err)
		}
		got, err := c.encodeRequest(req)
		if err != nil {
			t.Fatal(err)
		}
		if string(got.Bytes()) != string(want) {
			t.Fatalf("step %d: cached encoding differs:\ngot  %s\nwant %s", i, got.Bytes(), want)
		}
		uncached := req
		uncached.EncodeCache = nil
		if got, err := c.encodeRequest(uncached); err != nil || string(got.Bytes()) != string(want) {
			t.Fatalf("step %d: uncached encoding differs (%v):\ngot  %s\nwant %s", i, err, got.Bytes(), want)
		}
	}
}

// TestEncodeEmpty covers a request without system prompt or messages,
// whose messages member is null.
func TestEncodeEmpty(t *testing.T) {
	c := New(Config{})
	req := llm.Request{Model: "m", EncodeCache: new(llm.EncodeCache)}
	want, _ := json.Marshal(c.buildRequest(req))
	got, err := c.encodeRequest(req)
	if err != nil || string(got.Bytes()) != string(want) {
		t.Fatalf("got %s (%v), want %s", got.Bytes(), err, want)
	}
}
