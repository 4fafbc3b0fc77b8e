package llmtest

import (
	"context"
	"io"
	"reflect"
	"strings"
	"testing"
)

type chatCall struct{ ID, Name, Args string }

// chatResult is a chat stream folded the way a client adapter would.
type chatResult struct {
	reasoning, text string
	calls           []chatCall
	indexOrder      []int // tool-call index of each tool delta
	finish          string
	usage           map[string]any
	usageInFinish   bool
	done            bool
	chunks          int
}

// foldChat checks the chunk envelope and assembles the stream.
func foldChat(t *testing.T, evs []sseEvent, model string) chatResult {
	t.Helper()
	var r chatResult
	id := ""
	for i, ev := range evs {
		if r.done {
			t.Fatalf("event after [DONE]: %q", ev.Data)
		}
		if ev.Data == "[DONE]" {
			r.done = true
			continue
		}
		r.chunks++
		c := decode(t, ev.Data)
		if str(c, "object") != "chat.completion.chunk" || str(c, "model") != model || num(c, "created") == 0 {
			t.Fatalf("bad envelope: %s", ev.Data)
		}
		if id == "" {
			id = str(c, "id")
		}
		if str(c, "id") != id || !strings.HasPrefix(id, "chatcmpl-") {
			t.Fatalf("chunk id %q, want stable chatcmpl- id %q", str(c, "id"), id)
		}
		choices, ok := c["choices"].([]any)
		if !ok {
			t.Fatalf("choices missing or null: %s", ev.Data)
		}
		if u, ok := c["usage"].(map[string]any); ok {
			r.usage = u
			r.usageInFinish = len(choices) > 0
		}
		if len(choices) == 0 {
			continue
		}
		ch := choices[0].(map[string]any)
		delta := ch["delta"].(map[string]any)
		if i == 0 && delta["role"] != "assistant" {
			t.Fatalf("first delta has no assistant role: %s", ev.Data)
		}
		if i > 0 && delta["role"] != nil {
			t.Fatalf("role repeated: %s", ev.Data)
		}
		if f, ok := ch["finish_reason"].(string); ok {
			r.finish = f
		} else if r.finish != "" {
			t.Fatalf("delta after finish: %s", ev.Data)
		}
		r.reasoning += str(delta, "reasoning_content")
		r.text += str(delta, "content")
		tcs, _ := delta["tool_calls"].([]any)
		for _, x := range tcs {
			tc := x.(map[string]any)
			idx := num(tc, "index")
			r.indexOrder = append(r.indexOrder, idx)
			for len(r.calls) <= idx {
				r.calls = append(r.calls, chatCall{})
			}
			call := &r.calls[idx]
			if tcID := str(tc, "id"); tcID != "" {
				if call.ID != "" || str(tc, "type") != "function" {
					t.Fatalf("id repeated or type missing: %s", ev.Data)
				}
				call.ID = tcID
			} else if call.ID == "" {
				t.Fatalf("first delta of call %d lacks id: %s", idx, ev.Data)
			}
			if name := str(tc, "function", "name"); name != "" {
				if call.Name != "" {
					t.Fatalf("name repeated: %s", ev.Data)
				}
				call.Name = name
			}
			call.Args += str(tc, "function", "arguments")
		}
	}
	return r
}

func streamChat(t *testing.T, s *Server, resp Response) ([]sseEvent, *sseReader, error) {
	t.Helper()
	s.Enqueue(resp)
	hr := post(t, context.Background(), s, "/v1/chat/completions", requestBody(FormatChat, true))
	if hr.StatusCode != 200 || hr.Header.Get("Content-Type") != "text/event-stream" || hr.Header.Get("X-Request-Id") == "" {
		t.Fatalf("status %d, headers %v", hr.StatusCode, hr.Header)
	}
	sr := newSSE(hr.Body)
	evs, err := sr.readAll()
	return evs, sr, err
}

func TestChatStream(t *testing.T) {
	usage := &Usage{Input: 10, Output: 20, CacheRead: 5, CacheWrite: 3, Reasoning: 7}
	calls := []ToolCall{
		{Name: "bash", Arguments: `{"command":"ls -la /tmp"}`},
		{ID: "c2", Name: "read", Arguments: `{"path":"a.go"}`},
	}
	tests := []struct {
		name  string
		resp  Response
		check func(t *testing.T, r chatResult, sr *sseReader)
	}{
		{"full", Response{Reasoning: "thinking hard", Text: "héllo wörld, done", ToolCalls: calls, Usage: usage, ChunkRunes: 3},
			func(t *testing.T, r chatResult, _ *sseReader) {
				if r.reasoning != "thinking hard" || r.text != "héllo wörld, done" || r.finish != "tool_calls" {
					t.Fatalf("got %+v", r)
				}
				if len(r.calls) != 2 || !strings.HasPrefix(r.calls[0].ID, "call_") || r.calls[0].Name != "bash" ||
					r.calls[0].Args != calls[0].Arguments || r.calls[1] != (chatCall{"c2", "read", calls[1].Arguments}) {
					t.Fatalf("calls %+v", r.calls)
				}
				// 1 role + 5 reasoning + 6 text + (1+8)+(1+6) tool + finish + usage.
				if r.chunks != 1+5+6+9+7+1+1 {
					t.Fatalf("%d chunks", r.chunks)
				}
				if !reflect.DeepEqual(r.indexOrder[:3], []int{0, 0, 0}) {
					t.Fatalf("calls not sequential: %v", r.indexOrder)
				}
				want := map[string]int{"prompt_tokens": 15, "completion_tokens": 20, "total_tokens": 35,
					"prompt_cache_hit_tokens": 5, "prompt_cache_miss_tokens": 10}
				for k, v := range want {
					if num(r.usage, k) != v {
						t.Fatalf("usage %s = %d, want %d: %v", k, num(r.usage, k), v, r.usage)
					}
				}
				if num(r.usage, "prompt_tokens_details", "cached_tokens") != 5 ||
					num(r.usage, "completion_tokens_details", "reasoning_tokens") != 7 || r.usageInFinish || !r.done {
					t.Fatalf("usage %v inFinish=%v done=%v", r.usage, r.usageInFinish, r.done)
				}
			}},
		{"usage in finish chunk", Response{Text: "ok", Usage: usage, UsageInFinishChunk: true},
			func(t *testing.T, r chatResult, _ *sseReader) {
				if !r.usageInFinish || num(r.usage, "total_tokens") != 35 || r.chunks != 3 {
					t.Fatalf("got %+v", r)
				}
			}},
		{"no usage", Response{Text: "ok"}, func(t *testing.T, r chatResult, _ *sseReader) {
			if r.usage != nil || r.finish != "stop" || r.text != "ok" {
				t.Fatalf("got %+v", r)
			}
		}},
		{"interleaved tool calls", Response{ToolCalls: calls, InterleaveToolCalls: true, ChunkRunes: 10},
			func(t *testing.T, r chatResult, _ *sseReader) {
				if !reflect.DeepEqual(r.indexOrder, []int{0, 1, 0, 1, 0, 1, 0}) {
					t.Fatalf("index order %v", r.indexOrder)
				}
				if r.calls[0].Args != calls[0].Arguments || r.calls[1].Args != calls[1].Arguments {
					t.Fatalf("calls %+v", r.calls)
				}
			}},
		{"max-tokens maps to length", Response{Text: "cut", FinishReason: "max-tokens"},
			func(t *testing.T, r chatResult, _ *sseReader) {
				if r.finish != "length" {
					t.Fatalf("finish %q", r.finish)
				}
			}},
		{"empty", Response{Empty: true, Text: "ignored", ToolCalls: calls},
			func(t *testing.T, r chatResult, _ *sseReader) {
				if r.text != "" || len(r.calls) != 0 || r.finish != "stop" || r.chunks != 2 || !r.done {
					t.Fatalf("got %+v", r)
				}
			}},
		{"no done", Response{Text: "ok", NoDone: true}, func(t *testing.T, r chatResult, _ *sseReader) {
			if r.done || r.finish != "stop" {
				t.Fatalf("got %+v", r)
			}
		}},
		{"no finish reason", Response{Text: "ok", NoFinishReason: true}, func(t *testing.T, r chatResult, _ *sseReader) {
			if !r.done || r.finish != "" || r.text != "ok" {
				t.Fatalf("got %+v", r)
			}
		}},
		{"comments", Response{Text: "ok", Comments: 6}, func(t *testing.T, r chatResult, sr *sseReader) {
			if sr.comments != 6 || r.text != "ok" {
				t.Fatalf("%d comments, %+v", sr.comments, r)
			}
		}},
	}
	s := New()
	defer s.Close()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			evs, sr, err := streamChat(t, s, tt.resp)
			if err != nil {
				t.Fatalf("stream error %v", err)
			}
			tt.check(t, foldChat(t, evs, "deepseek-test"), sr)
		})
	}
}

func TestChatNonStreaming(t *testing.T) {
	s := New()
	defer s.Close()
	s.Enqueue(
		Response{Reasoning: "hmm", Text: "hello", Usage: &Usage{Input: 3, Output: 4, CacheRead: 2}},
		Response{ToolCalls: []ToolCall{{Name: "bash", Arguments: `{"command":"true"}`}}},
	)
	body := requestBody(FormatChat, false)
	delete(body, "stream") // absent means non-streaming

	hr := post(t, context.Background(), s, "/chat/completions", body)
	b, _ := io.ReadAll(hr.Body)
	m := decode(t, string(b))
	msg := m["choices"].([]any)[0].(map[string]any)
	if hr.Header.Get("Content-Type") != "application/json" || str(m, "object") != "chat.completion" ||
		str(m, "model") != "deepseek-test" || msg["finish_reason"] != "stop" ||
		str(msg, "message", "content") != "hello" || str(msg, "message", "reasoning_content") != "hmm" ||
		num(m, "usage", "prompt_tokens") != 5 || num(m, "usage", "prompt_cache_hit_tokens") != 2 {
		t.Fatalf("got %s", b)
	}

	hr = post(t, context.Background(), s, "/chat/completions", body)
	b, _ = io.ReadAll(hr.Body)
	m = decode(t, string(b))
	msg = m["choices"].([]any)[0].(map[string]any)
	message := msg["message"].(map[string]any)
	tc := message["tool_calls"].([]any)[0].(map[string]any)
	if msg["finish_reason"] != "tool_calls" || message["content"] != nil || m["usage"] != nil ||
		!strings.HasPrefix(str(tc, "id"), "call_") || str(tc, "function", "name") != "bash" ||
		str(tc, "function", "arguments") != `{"command":"true"}` {
		t.Fatalf("got %s", b)
	}
}
