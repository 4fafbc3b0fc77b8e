package llmtest

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// respItem is a Responses output item folded from the stream.
type respItem struct {
	Type, ID, CallID, Name, Phase string
	Text                          string // summary, output text, arguments or custom input
	Done                          map[string]any
}

// respResult is a Responses stream folded the way Codex reads it.
type respResult struct {
	types     []string
	created   map[string]any
	items     []respItem
	terminal  string         // response.completed / response.incomplete
	final     map[string]any // the terminal event's response
	usage     map[string]any
	hasUsage  bool
	doneCount int
}

// foldResponses checks the framing (event name equals the data's type,
// sequence numbers count from 0, deltas refer to the open item) and
// assembles the items.
func foldResponses(t *testing.T, evs []sseEvent) respResult {
	t.Helper()
	var r respResult
	open := -1
	for i, ev := range evs {
		m := decode(t, ev.Data)
		if str(m, "type") != ev.Name {
			t.Fatalf("event %q carries type %q", ev.Name, str(m, "type"))
		}
		if num(m, "sequence_number") != i {
			t.Fatalf("event %d has sequence_number %d", i, num(m, "sequence_number"))
		}
		if r.terminal != "" {
			t.Fatalf("event after %s: %s", r.terminal, ev.Data)
		}
		r.types = append(r.types, ev.Name)
		idx := num(m, "output_index")
		itemEvent := func() *respItem {
			if idx != open || str(m, "item_id") != r.items[idx].ID {
				t.Fatalf("event for item %d (%s) while %d open: %s", idx, str(m, "item_id"), open, ev.Data)
			}
			return &r.items[idx]
		}
		switch ev.Name {
		case "response.created":
			r.created = m["response"].(map[string]any)
		case "response.in_progress":
		case "response.output_item.added":
			if open != -1 || idx != len(r.items) {
				t.Fatalf("item %d added while %d open: %s", idx, open, ev.Data)
			}
			open = idx
			it := m["item"].(map[string]any)
			r.items = append(r.items, respItem{Type: str(it, "type"), ID: str(it, "id"), CallID: str(it, "call_id"), Name: str(it, "name")})
		case "response.reasoning_summary_text.delta", "response.output_text.delta",
			"response.function_call_arguments.delta", "response.custom_tool_call_input.delta":
			itemEvent().Text += str(m, "delta")
		case "response.reasoning_summary_part.added", "response.reasoning_summary_text.done",
			"response.reasoning_summary_part.done", "response.content_part.added", "response.output_text.done",
			"response.content_part.done", "response.function_call_arguments.done", "response.custom_tool_call_input.done":
			itemEvent()
		case "response.output_item.done": // carries the item, not item_id
			if idx != open {
				t.Fatalf("item %d done while %d open: %s", idx, open, ev.Data)
			}
			it := &r.items[idx]
			done := m["item"].(map[string]any)
			if str(done, "id") != it.ID || str(done, "type") != it.Type {
				t.Fatalf("done item differs from added: %s", ev.Data)
			}
			it.Done, it.Phase = done, str(done, "phase")
			open = -1
			r.doneCount++
		case "response.completed", "response.incomplete":
			r.terminal = ev.Name
			r.final = m["response"].(map[string]any)
			r.usage, r.hasUsage = r.final["usage"].(map[string]any)
		default:
			t.Fatalf("unexpected event %s", ev.Name)
		}
	}
	if open != -1 {
		t.Fatalf("item %d never done", open)
	}
	return r
}

// responsesBody is a request shaped like Codex's (trimmed).
func responsesBody(stream bool) map[string]any {
	return map[string]any{
		"model": "gpt-test", "stream": stream, "store": false,
		"instructions": "be brief",
		"reasoning":    map[string]any{"effort": "high", "summary": "auto"},
		"text": map[string]any{"verbosity": "low", "format": map[string]any{
			"type": "json_schema", "strict": true, "name": "codex_output_schema",
			"schema": map[string]any{"type": "object"}}},
		"input": []any{
			map[string]any{"type": "message", "role": "developer", "content": []any{map[string]any{"type": "input_text", "text": "rules"}}},
			map[string]any{"type": "message", "role": "user", "content": []any{
				map[string]any{"type": "input_text", "text": "<image name=[Image #1]>"},
				map[string]any{"type": "input_image", "image_url": "data:image/png;base64,AAAA"},
				map[string]any{"type": "input_text", "text": "say hi"}}},
		},
		"tools": []any{
			map[string]any{"type": "function", "name": "exec_command", "parameters": map[string]any{"type": "object"}},
			map[string]any{"type": "custom", "name": "apply_patch", "format": map[string]any{"type": "grammar"}},
			map[string]any{"type": "web_search"},
		},
	}
}

func streamResponses(t *testing.T, s *Server, resp Response) ([]sseEvent, *sseReader, error) {
	t.Helper()
	s.Enqueue(resp)
	hr := post(t, context.Background(), s, "/v1/responses", responsesBody(true))
	if hr.StatusCode != 200 || hr.Header.Get("Content-Type") != "text/event-stream" || hr.Header.Get("X-Request-Id") == "" {
		t.Fatalf("status %d, headers %v", hr.StatusCode, hr.Header)
	}
	sr := newSSE(hr.Body)
	evs, err := sr.readAll()
	return evs, sr, err
}

func TestResponsesStream(t *testing.T) {
	usage := &Usage{Input: 10, Output: 20, CacheRead: 5, CacheWrite: 3, Reasoning: 7}
	calls := []ToolCall{
		{Name: "exec_command", Arguments: `{"cmd":"ls -la /tmp"}`},
		{ID: "call_p", Name: "apply_patch", Arguments: "*** Begin Patch\n*** End Patch\n"},
	}
	tests := []struct {
		name  string
		resp  Response
		check func(t *testing.T, r respResult, sr *sseReader)
	}{
		{"full", Response{Reasoning: "thinking hard", Text: "héllo wörld", Phase: "final_answer", ToolCalls: calls, Usage: usage, ChunkRunes: 4},
			func(t *testing.T, r respResult, _ *sseReader) {
				if len(r.items) != 4 {
					t.Fatalf("items %+v", r.items)
				}
				rs, msg, fc, ctc := r.items[0], r.items[1], r.items[2], r.items[3]
				if rs.Type != "reasoning" || rs.Text != "thinking hard" || !strings.HasPrefix(rs.ID, "rs_") ||
					rs.Done["summary"].([]any)[0].(map[string]any)["text"] != "thinking hard" || str(rs.Done, "encrypted_content") == "" {
					t.Fatalf("reasoning %+v", rs)
				}
				content := msg.Done["content"].([]any)[0].(map[string]any)
				if msg.Type != "message" || msg.Text != "héllo wörld" || msg.Phase != "final_answer" || !strings.HasPrefix(msg.ID, "msg_") ||
					str(msg.Done, "role") != "assistant" || str(msg.Done, "status") != "completed" ||
					content["type"] != "output_text" || content["text"] != "héllo wörld" {
					t.Fatalf("message %+v", msg)
				}
				if fc.Type != "function_call" || fc.Name != "exec_command" || !strings.HasPrefix(fc.CallID, "call_") ||
					fc.Text != calls[0].Arguments || str(fc.Done, "arguments") != calls[0].Arguments || !strings.HasPrefix(fc.ID, "fc_") {
					t.Fatalf("function call %+v", fc)
				}
				// apply_patch is offered as a custom tool, so its call is a
				// custom_tool_call with the text as input.
				if ctc.Type != "custom_tool_call" || ctc.CallID != "call_p" || ctc.Name != "apply_patch" ||
					ctc.Text != calls[1].Arguments || str(ctc.Done, "input") != calls[1].Arguments {
					t.Fatalf("custom call %+v", ctc)
				}
				if r.types[0] != "response.created" || r.types[1] != "response.in_progress" || r.terminal != "response.completed" {
					t.Fatalf("types %v", r.types)
				}
				if str(r.created, "status") != "in_progress" || str(r.created, "model") != "gpt-test" ||
					str(r.final, "id") != str(r.created, "id") || !strings.HasPrefix(str(r.final, "id"), "resp_") ||
					str(r.final, "status") != "completed" || len(r.final["output"].([]any)) != 4 {
					t.Fatalf("created %v final %v", r.created, r.final)
				}
				want := map[string]int{"input_tokens": 15, "output_tokens": 20, "total_tokens": 35}
				for k, v := range want {
					if num(r.usage, k) != v {
						t.Fatalf("usage %s = %d, want %d: %v", k, num(r.usage, k), v, r.usage)
					}
				}
				if num(r.usage, "input_tokens_details", "cached_tokens") != 5 || num(r.usage, "output_tokens_details", "reasoning_tokens") != 7 {
					t.Fatalf("usage details %v", r.usage)
				}
			}},
		{"text only, no phase, no usage", Response{Text: "ok"}, func(t *testing.T, r respResult, _ *sseReader) {
			if len(r.items) != 1 || r.items[0].Text != "ok" || r.items[0].Phase != "" || r.hasUsage {
				t.Fatalf("got %+v", r)
			}
			if _, ok := r.items[0].Done["phase"]; ok {
				t.Fatalf("phase sent: %v", r.items[0].Done)
			}
			// created, in_progress, added, part added, delta, text done,
			// part done, item done, completed.
			if len(r.types) != 9 {
				t.Fatalf("types %v", r.types)
			}
		}},
		{"max-tokens is incomplete", Response{Text: "cut", FinishReason: "max-tokens", Usage: usage},
			func(t *testing.T, r respResult, _ *sseReader) {
				if r.terminal != "response.incomplete" || str(r.final, "status") != "incomplete" ||
					str(r.final, "incomplete_details", "reason") != "max_output_tokens" || num(r.usage, "output_tokens") != 20 {
					t.Fatalf("got %+v", r)
				}
			}},
		{"empty", Response{Empty: true, Text: "ignored", ToolCalls: calls},
			func(t *testing.T, r respResult, _ *sseReader) {
				if len(r.items) != 0 || r.terminal != "response.completed" || len(r.types) != 3 {
					t.Fatalf("got %+v", r)
				}
			}},
		{"no done", Response{Text: "ok", NoDone: true}, func(t *testing.T, r respResult, _ *sseReader) {
			if r.terminal != "" || r.doneCount != 1 {
				t.Fatalf("got %+v", r)
			}
		}},
		{"comments", Response{Text: "ok", Comments: 3}, func(t *testing.T, r respResult, sr *sseReader) {
			if sr.comments != 3 || r.items[0].Text != "ok" {
				t.Fatalf("%d comments, %+v", sr.comments, r)
			}
		}},
	}
	s := New()
	defer s.Close()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			evs, sr, err := streamResponses(t, s, tt.resp)
			if err != nil {
				t.Fatalf("stream error %v", err)
			}
			tt.check(t, foldResponses(t, evs), sr)
		})
	}
}

func TestResponsesNonStreaming(t *testing.T) {
	s := New()
	defer s.Close()
	s.Enqueue(
		Response{Reasoning: "hmm", Text: "hello", Phase: "final_answer", Usage: &Usage{Input: 3, Output: 4, CacheRead: 2}},
		Response{ToolCalls: []ToolCall{{Name: "exec_command", Arguments: `{"cmd":"true"}`}}, FinishReason: "max-tokens"},
	)
	body := responsesBody(false)
	delete(body, "stream") // absent means non-streaming

	hr := post(t, context.Background(), s, "/responses", body)
	b, _ := io.ReadAll(hr.Body)
	m := decode(t, string(b))
	out, _ := m["output"].([]any)
	if hr.Header.Get("Content-Type") != "application/json" || str(m, "object") != "response" ||
		str(m, "model") != "gpt-test" || str(m, "status") != "completed" || len(out) != 2 ||
		num(m, "usage", "input_tokens") != 5 || num(m, "usage", "input_tokens_details", "cached_tokens") != 2 {
		t.Fatalf("got %s", b)
	}
	msg := out[1].(map[string]any)
	if str(out[0].(map[string]any), "type") != "reasoning" || str(msg, "type") != "message" || str(msg, "phase") != "final_answer" ||
		msg["content"].([]any)[0].(map[string]any)["text"] != "hello" {
		t.Fatalf("output %s", b)
	}

	hr = post(t, context.Background(), s, "/responses", body)
	b, _ = io.ReadAll(hr.Body)
	m = decode(t, string(b))
	out, _ = m["output"].([]any)
	if str(m, "status") != "incomplete" || str(m, "incomplete_details", "reason") != "max_output_tokens" || m["usage"] != nil || len(out) != 1 {
		t.Fatalf("got %s", b)
	}
	fc := out[0].(map[string]any)
	if str(fc, "type") != "function_call" || str(fc, "name") != "exec_command" || str(fc, "arguments") != `{"cmd":"true"}` ||
		!strings.HasPrefix(str(fc, "call_id"), "call_") {
		t.Fatalf("call %s", b)
	}
}

func TestResponsesFaults(t *testing.T) {
	s := New()
	defer s.Close()

	s.Enqueue(Response{Status: 429, RetryAfter: "3"})
	hr := post(t, context.Background(), s, "/v1/responses", responsesBody(true))
	b, _ := io.ReadAll(hr.Body)
	m := decode(t, string(b))
	if hr.StatusCode != 429 || hr.Header.Get("Retry-After") != "3" || str(m, "error", "type") != "rate_limit_error" ||
		str(m, "error", "code") != "rate_limit_exceeded" {
		t.Fatalf("status %d body %s", hr.StatusCode, b)
	}

	s.Enqueue(Response{Text: strings.Repeat("x", 80), DisconnectAfter: 3})
	hr = post(t, context.Background(), s, "/v1/responses", responsesBody(true))
	evs, err := newSSE(hr.Body).readAll()
	if len(evs) != 3 || err == nil || errors.Is(err, io.EOF) {
		t.Fatalf("disconnect: %d events, err %v", len(evs), err)
	}

	s.Enqueue(Response{Text: "hello", MalformedAfter: 4})
	hr = post(t, context.Background(), s, "/v1/responses", responsesBody(true))
	evs, err = newSSE(hr.Body).readAll()
	// The bad event keeps the name the real one would have had.
	if err != nil || len(evs) != 5 || evs[4].Data != "{not json" || evs[4].Name != "response.output_text.delta" {
		t.Fatalf("malformed: %+v, %v", evs, err)
	}

	s.Enqueue(Response{Text: "hello", StallAfter: 2})
	ctx, cancel := context.WithCancel(context.Background())
	hr = post(t, ctx, s, "/v1/responses", responsesBody(true))
	sr := newSSE(hr.Body)
	for range 2 {
		if _, err := sr.next(); err != nil {
			t.Fatal(err)
		}
	}
	cancel()
	if _, err := io.ReadAll(hr.Body); err == nil {
		t.Fatal("stalled read ended without error")
	}

	s.Enqueue(Response{Raw: "event: response.failed\ndata: {\"type\":\"response.failed\"}\n\n"})
	hr = post(t, context.Background(), s, "/v1/responses", responsesBody(true))
	if evs, err := newSSE(hr.Body).readAll(); err != nil || len(evs) != 1 || evs[0].Name != "response.failed" {
		t.Fatalf("raw: %+v, %v", evs, err)
	}

	s.Enqueue(Response{Text: "hello", DisconnectAfter: 1})
	hr = post(t, context.Background(), s, "/v1/responses", responsesBody(false))
	if _, err := io.ReadAll(hr.Body); err == nil {
		t.Fatal("non-streaming disconnect read without error")
	}
}

func TestResponsesRequest(t *testing.T) {
	s := New()
	defer s.Close()
	s.SetFallback(LoopFallback("exec_command", `{"cmd":"true"}`, 1))
	for _, path := range []string{"/v1/responses", "/responses"} {
		post(t, context.Background(), s, path, responsesBody(true))
	}
	body := responsesBody(false)
	body["input"] = append(body["input"].([]any),
		map[string]any{"type": "function_call", "call_id": "c1", "name": "exec_command", "arguments": "{}"},
		map[string]any{"type": "function_call_output", "call_id": "c1", "output": "ok"})
	hr := post(t, context.Background(), s, "/responses", body)
	b, _ := io.ReadAll(hr.Body)
	if !strings.Contains(string(b), "done after 1 steps") {
		t.Fatalf("loop fallback after a tool result: %s", b)
	}

	reqs := s.Requests()
	if len(reqs) != 3 {
		t.Fatalf("%d requests", len(reqs))
	}
	r := reqs[0]
	if r.Format != FormatResponses || reqs[1].Format != FormatResponses || !r.Stream || r.Model() != "gpt-test" ||
		r.ReasoningEffort() != "high" || r.Instructions() != "be brief" || len(r.Input()) != 2 ||
		r.ToolResultCount() != 0 || reqs[2].ToolResultCount() != 1 {
		t.Fatalf("request %+v", r)
	}
	if tf := r.TextFormat(); tf["type"] != "json_schema" || tf["name"] != "codex_output_schema" || tf["schema"] == nil {
		t.Fatalf("text format %v", tf)
	}
	if got := r.ToolNames(); !reflect.DeepEqual(got, []string{"exec_command", "apply_patch"}) {
		t.Fatalf("tool names %v", got)
	}
	if got := r.InputTexts("user"); !reflect.DeepEqual(got, []string{"<image name=[Image #1]>", "say hi"}) {
		t.Fatalf("user texts %v", got)
	}
	if got := r.InputTexts(""); len(got) != 3 || got[0] != "rules" {
		t.Fatalf("all texts %v", got)
	}

	none := Request{JSON: map[string]any{"input": "plain string"}}
	if none.Input() != nil || none.InputTexts("") != nil || none.ReasoningEffort() != "" || none.TextFormat() != nil || none.Instructions() != "" {
		t.Fatalf("accessors on a bare request: %+v", none)
	}
}

func TestWriteCodexConfig(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "codex")
	if err := WriteCodexConfig(dir, "http://127.0.0.1:4321", `m"odel\`); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "config.toml"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := string(b)
	for _, want := range []string{
		`model = "m\"odel\\"`,
		`model_provider = "fake"`,
		`approval_policy = "never"`,
		`sandbox_mode = "workspace-write"`,
		"check_for_update_on_startup = false",
		"[model_providers.fake]",
		`base_url = "http://127.0.0.1:4321/v1"`,
		`wire_api = "responses"`,
		`env_key = "` + CodexKeyEnv + `"`,
		"request_max_retries = 0",
		"stream_max_retries = 0",
		"[analytics]\nenabled = false",
		`persistence = "none"`,
	} {
		if !strings.Contains(cfg, want+"\n") {
			t.Errorf("config lacks %q:\n%s", want, cfg)
		}
	}
	// A URL that already names /v1 is kept.
	if err := WriteCodexConfig(dir, "http://127.0.0.1:4321/v1/", "m"); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "config.toml")); !strings.Contains(string(b), `base_url = "http://127.0.0.1:4321/v1"`+"\n") {
		t.Errorf("config:\n%s", b)
	}
	for _, tc := range []struct{ url, model string }{
		{"127.0.0.1:4321", "m"},
		{"ftp://host", "m"},
		{"http://%zz", "m"},
		{"http://127.0.0.1:1", ""},
	} {
		if err := WriteCodexConfig(dir, tc.url, tc.model); err == nil {
			t.Errorf("WriteCodexConfig(%q, %q) accepted", tc.url, tc.model)
		}
	}
	if got := tomlString("a\tb\x01\u00e9"); got != `"a\u0009b\u0001é"` {
		t.Errorf("tomlString = %s", got)
	}
}

// TestResponsesScriptPhase checks that a script can give the phase.
func TestResponsesScriptPhase(t *testing.T) {
	rs, err := ParseScript(strings.NewReader(`[{"text":"x","phase":"commentary","delayPerChunk":"1ms"}]`))
	if err != nil || len(rs) != 1 || rs[0].Phase != "commentary" || rs[0].DelayPerChunk != time.Millisecond {
		t.Fatalf("%+v, %v", rs, err)
	}
	b, _ := json.Marshal(rs[0])
	if !strings.Contains(string(b), `"phase":"commentary"`) {
		t.Fatalf("marshalled %s", b)
	}
}
