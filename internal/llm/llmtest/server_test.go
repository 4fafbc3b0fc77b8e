package llmtest

import (
	"context"
	"errors"
	"io"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"testing"
)

func TestRoutes(t *testing.T) {
	s := New()
	defer s.Close()
	s.SetFallback(func(Request) Response { return Response{Text: "ok"} })
	tests := []struct {
		method, path string
		status       int
		format       string
	}{
		{"POST", "/chat/completions", 200, FormatChat},
		{"POST", "/v1/chat/completions", 200, FormatChat},
		{"POST", "/v1/messages", 200, FormatAnthropic},
		{"POST", "/messages", 200, FormatAnthropic},
		{"POST", "/v1/completions", 404, ""},
		{"GET", "/v1/messages", 405, FormatAnthropic},
	}
	for _, tt := range tests {
		t.Run(tt.method+tt.path, func(t *testing.T) {
			req, _ := http.NewRequest(tt.method, s.URL()+tt.path, strings.NewReader(`{"model":"m"}`))
			hr, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(hr.Body)
			hr.Body.Close()
			if hr.StatusCode != tt.status {
				t.Fatalf("status %d: %s", hr.StatusCode, b)
			}
			reqs := s.Requests()
			if last := reqs[len(reqs)-1]; last.Format != tt.format || last.Path != tt.path || last.Method != tt.method {
				t.Fatalf("recorded %+v", last)
			}
			if tt.status != 200 {
				decode(t, string(b)) // errors are JSON too
			}
		})
	}
}

func TestRecording(t *testing.T) {
	s := New()
	defer s.Close()
	s.Enqueue(Response{Text: "a"}, Response{Text: "b"})
	post(t, context.Background(), s, "/chat/completions", requestBody(FormatChat, true))
	body := requestBody(FormatAnthropic, false)
	body["messages"] = []any{
		map[string]any{"role": "user", "content": "hi"},
		map[string]any{"role": "assistant", "content": []any{map[string]any{"type": "tool_use", "id": "t1", "name": "bash", "input": map[string]any{}}}},
		map[string]any{"role": "user", "content": []any{map[string]any{"type": "tool_result", "tool_use_id": "t1", "content": "ok"}}},
	}
	post(t, context.Background(), s, "/v1/messages", body)

	if s.RequestCount() != 2 || s.Pending() != 0 {
		t.Fatalf("count %d pending %d", s.RequestCount(), s.Pending())
	}
	reqs := s.Requests()
	chat, anth := reqs[0], reqs[1]
	if chat.Format != FormatChat || !chat.Stream || chat.Model() != "deepseek-test" ||
		chat.Header.Get("Authorization") != "Bearer test-key" || len(chat.Messages()) != 2 ||
		chat.Messages()[1]["content"] != "hi" || !reflect.DeepEqual(chat.ToolNames(), []string{"bash"}) ||
		chat.ToolResultCount() != 0 || !strings.Contains(string(chat.Body), `"include_usage":true`) {
		t.Fatalf("chat request %+v", chat)
	}
	if anth.Format != FormatAnthropic || anth.Stream || anth.Model() != "claude-test" ||
		len(anth.Messages()) != 3 || !reflect.DeepEqual(anth.ToolNames(), []string{"bash"}) ||
		anth.ToolResultCount() != 1 || anth.JSON["system"] != "be brief" {
		t.Fatalf("anthropic request %+v", anth)
	}
}

func TestRecordsNonJSONBody(t *testing.T) {
	s := New()
	defer s.Close()
	hr, err := http.Post(s.URL()+"/chat/completions", "text/plain", strings.NewReader("not json"))
	if err != nil {
		t.Fatal(err)
	}
	hr.Body.Close()
	r := s.Requests()[0]
	if string(r.Body) != "not json" || r.JSON != nil || r.Model() != "" || r.Messages() != nil {
		t.Fatalf("recorded %+v", r)
	}
}

func TestWaitRequests(t *testing.T) {
	s := New()
	defer s.Close()
	s.SetFallback(func(Request) Response { return Response{Text: "ok"} })
	const n = 5
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			hr, err := http.Post(s.URL()+"/chat/completions", "application/json", strings.NewReader(`{}`))
			if err == nil {
				hr.Body.Close()
			}
		})
	}
	if err := s.WaitRequests(context.Background(), n); err != nil {
		t.Fatal(err)
	}
	if got := s.RequestCount(); got < n {
		t.Fatalf("WaitRequests returned at %d requests", got)
	}
	wg.Wait()

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.WaitRequests(ctx, n+1); !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want context.Canceled", err)
	}
}

func TestQueueThenFallback(t *testing.T) {
	s := New()
	defer s.Close()
	s.Enqueue(Response{Text: "scripted"})
	var (
		mu   sync.Mutex
		seen []string
	)
	s.SetFallback(func(r Request) Response {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, r.Model())
		return Response{Text: "fallback"}
	})
	texts := []string{}
	for _, format := range []string{FormatAnthropic, FormatChat} {
		hr := post(t, context.Background(), s, pathOf(format), requestBody(format, false))
		b, _ := io.ReadAll(hr.Body)
		texts = append(texts, string(b))
	}
	if !strings.Contains(texts[0], `"text":"scripted"`) || !strings.Contains(texts[1], `"content":"fallback"`) {
		t.Fatalf("answers %v", texts)
	}
	mu.Lock()
	defer mu.Unlock()
	if !reflect.DeepEqual(seen, []string{"deepseek-test"}) || s.Pending() != 0 {
		t.Fatalf("fallback saw %v", seen)
	}
}

func TestScriptExhausted(t *testing.T) {
	s := New()
	defer s.Close()
	for _, format := range formats {
		hr := post(t, context.Background(), s, pathOf(format), requestBody(format, true))
		b, _ := io.ReadAll(hr.Body)
		m := decode(t, string(b))
		msg := str(m, "error", "message")
		if hr.StatusCode != 500 || !strings.Contains(msg, "script exhausted") {
			t.Fatalf("%s: status %d body %s", format, hr.StatusCode, b)
		}
		if format == FormatAnthropic && str(m, "type") != "error" {
			t.Fatalf("anthropic error shape %s", b)
		}
	}
}

func TestLoopFallback(t *testing.T) {
	f := LoopFallback("bash", `{"command":"true"}`, 2)
	conv := func(results int) Request {
		msgs := []any{map[string]any{"role": "user", "content": "go"}}
		for range results {
			msgs = append(msgs, map[string]any{"role": "assistant", "content": nil},
				map[string]any{"role": "tool", "tool_call_id": "x", "content": "ok"})
		}
		return Request{Format: FormatChat, JSON: map[string]any{"messages": msgs}, Body: make([]byte, 400)}
	}
	for results, wantTool := range []bool{true, true, false} {
		r := f(conv(results))
		if got := len(r.ToolCalls) == 1; got != wantTool {
			t.Fatalf("after %d results: %+v", results, r)
		}
		if wantTool && (r.ToolCalls[0].Name != "bash" || r.ToolCalls[0].Arguments != `{"command":"true"}`) {
			t.Fatalf("call %+v", r.ToolCalls[0])
		}
		if r.Usage == nil || r.Usage.Input != 100 {
			t.Fatalf("usage %+v", r.Usage)
		}
	}
}
