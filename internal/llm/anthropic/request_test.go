package anthropic

import (
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"testing"

	"github.com/dsh-dev/dsh/internal/llm"
)

func history() []llm.Message {
	return []llm.Message{
		{Role: llm.RoleUser, Content: []llm.Block{llm.TextBlock("look"), {Type: llm.BlockImage, MediaType: "image/png", Data: "iVBO"}}},
		{Role: llm.RoleAssistant, Content: []llm.Block{
			{Type: llm.BlockReasoning, Text: "plan", Signature: "sig-1"},
			{Type: llm.BlockReasoning, Signature: "REDACTED"},
			{Type: llm.BlockReasoning, Text: "unsigned, from another provider"},
			llm.TextBlock("Reading."),
			llm.TextBlock(""),
			{Type: llm.BlockToolCall, ID: "toolu_1", Name: "read", Arguments: `{"path":"a.go"}`},
			{Type: llm.BlockToolCall, ID: "toolu_2", Name: "now"},
			{Type: llm.BlockToolCall, ID: "toolu_3", Name: "cut", Arguments: `{"trunc`},
		}},
		// A plugin note and a system message merge into the user turn of
		// the tool results, and the results move first as the API requires.
		{Role: llm.RoleUser, Content: []llm.Block{llm.TextBlock("note")}},
		{Role: llm.RoleUser, Content: []llm.Block{
			{Type: llm.BlockToolResult, ToolCallID: "toolu_1", Content: []llm.Block{llm.TextBlock("package a")}},
			{Type: llm.BlockToolResult, ToolCallID: "toolu_2", IsError: true, Content: []llm.Block{llm.TextBlock("no clock")}},
			{Type: llm.BlockToolResult, ToolCallID: "toolu_3", Content: []llm.Block{llm.TextBlock("bad args")}},
		}},
		{Role: llm.RoleSystem, Content: []llm.Block{llm.TextBlock("sys note")}},
		{Role: llm.RoleAssistant, Content: []llm.Block{llm.TextBlock("Done.")}},
		{Role: llm.RoleAssistant, Content: []llm.Block{llm.TextBlock("More.")}},
	}
}

const wantMessages = `[
	{"role":"user","content":[
		{"type":"text","text":"look"},
		{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBO"}}]},
	{"role":"assistant","content":[
		{"type":"thinking","thinking":"plan","signature":"sig-1"},
		{"type":"redacted_thinking","data":"REDACTED"},
		{"type":"text","text":"Reading."},
		{"type":"tool_use","id":"toolu_1","name":"read","input":{"path":"a.go"}},
		{"type":"tool_use","id":"toolu_2","name":"now","input":{}},
		{"type":"tool_use","id":"toolu_3","name":"cut","input":{}}]},
	{"role":"user","content":[
		{"type":"tool_result","tool_use_id":"toolu_1","content":[{"type":"text","text":"package a"}],"is_error":false},
		{"type":"tool_result","tool_use_id":"toolu_2","content":[{"type":"text","text":"no clock"}],"is_error":true},
		{"type":"tool_result","tool_use_id":"toolu_3","content":[{"type":"text","text":"bad args"}],"is_error":false},
		{"type":"text","text":"note"},
		{"type":"text","text":"sys note"}]},
	{"role":"assistant","content":[{"type":"text","text":"Done."},{"type":"text","text":"More.","cache_control":{"type":"ephemeral"}}]}]`

func TestRequestBody(t *testing.T) {
	srv, cap := server(t, sseBody(textEvents("ok", "end_turn")...))
	temp := 0.3
	req := llm.Request{
		Model: "claude-sonnet-4-5", System: "be brief", Messages: history(), Temperature: &temp,
		Tools: []llm.ToolSchema{{Name: "read", Description: "read a file", Parameters: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}}}`)}, {Name: "now"}},
	}
	res := drain(t, t.Context(), client(t, srv, Config{APIKey: "sk-ant", UserAgent: "dsh/1.0", Headers: map[string]string{"anthropic-beta": "x"}}), req)
	if res.Failure != nil {
		t.Fatal(res.Failure)
	}
	h, path, body := cap.Get()
	if path != "/v1/messages" {
		t.Errorf("path = %s", path)
	}
	for k, want := range map[string]string{
		"X-Api-Key": "sk-ant", "Anthropic-Version": "2023-06-01", "Content-Type": "application/json",
		"User-Agent": "dsh/1.0", "Anthropic-Beta": "x", "Authorization": "",
	} {
		if got := h.Get(k); got != want {
			t.Errorf("header %s = %q; want %q", k, got, want)
		}
	}
	var want any
	if err := json.Unmarshal([]byte(wantMessages), &want); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(body["messages"], want) {
		got, _ := json.MarshalIndent(body["messages"], "", " ")
		t.Errorf("messages:\n%s", got)
	}
	for k, v := range map[string]any{"model": "claude-sonnet-4-5", "stream": true, "max_tokens": 32000.0, "temperature": 0.3} {
		if body[k] != v {
			t.Errorf("%s = %v; want %v", k, body[k], v)
		}
	}
	// The system prompt is a cacheable text block.
	wantSystem := []any{map[string]any{"type": "text", "text": "be brief", "cache_control": map[string]any{"type": "ephemeral"}}}
	if !reflect.DeepEqual(body["system"], wantSystem) {
		t.Errorf("system = %v; want %v", body["system"], wantSystem)
	}
	if _, ok := body["thinking"]; ok {
		t.Errorf("thinking = %v; want absent without effort", body["thinking"])
	}
	if got := jsonPath(body, "tools", 0, "input_schema", "properties", "path", "type"); got != "string" {
		t.Errorf("tools[0] = %v", jsonPath(body, "tools", 0))
	}
	if got := jsonPath(body, "tools", 1, "input_schema", "type"); got != "object" {
		t.Errorf("tools[1] = %v; want an empty object schema", jsonPath(body, "tools", 1))
	}
	if jsonPath(body, "tools", 0, "cache_control") != nil || jsonPath(body, "tools", 1, "cache_control", "type") != "ephemeral" {
		t.Errorf("tools = %v; want cache_control on the last tool only", body["tools"])
	}
}

func TestRequestThinking(t *testing.T) {
	temp := 0.3
	tests := []struct {
		effort     llm.Effort
		maxTokens  int
		wantBudget int // 0: no thinking
		wantMax    int
	}{
		{"", 0, 0, 32000},
		{llm.EffortOff, 1000, 0, 1000},
		{llm.EffortLow, 0, 2048, 32000},
		{llm.EffortHigh, 0, 16000, 32000},
		{llm.EffortMax, 0, 32000, 48000},   // defaulted limit grows
		{llm.EffortHigh, 8000, 7999, 8000}, // chosen limit shrinks the budget
		{llm.EffortLow, 500, 1024, 1025},   // but not below the API minimum
		{llm.EffortMax, 64000, 32000, 64000},
	}
	for _, tt := range tests {
		body := buildRequest(llm.Request{Model: "m", Effort: tt.effort, MaxTokens: tt.maxTokens, Temperature: &temp})
		budget := 0
		if body.Thinking != nil {
			if body.Thinking.Type != "enabled" {
				t.Errorf("effort %q: thinking type %q", tt.effort, body.Thinking.Type)
			}
			budget = body.Thinking.BudgetTokens
		}
		if budget != tt.wantBudget || body.MaxTokens != tt.wantMax {
			t.Errorf("effort %q max %d: budget %d, max_tokens %d; want %d, %d", tt.effort, tt.maxTokens, budget, body.MaxTokens, tt.wantBudget, tt.wantMax)
		}
		if budget > 0 && (body.MaxTokens <= budget || body.Temperature != nil) {
			t.Errorf("effort %q: max_tokens %d must exceed budget %d and temperature must be unset (%v)", tt.effort, body.MaxTokens, budget, body.Temperature)
		}
	}
}

// TestThinkingRoundTrip: a streamed thinking block with its signature is
// replayed verbatim on the next request.
func TestThinkingRoundTrip(t *testing.T) {
	srv, _ := server(t, sseBody(
		messageStart,
		blockStart(0, `{"type":"thinking","thinking":"","signature":""}`),
		blockDelta(0, `{"type":"thinking_delta","thinking":"deep thought"}`),
		blockDelta(0, `{"type":"signature_delta","signature":"c2lnbmF0dXJl"}`),
		blockStop(0),
		blockStart(1, `{"type":"text","text":""}`),
		blockDelta(1, `{"type":"text_delta","text":"42"}`),
		blockStop(1),
		messageDelta("end_turn", 9),
		messageStop,
	))
	res := drain(t, t.Context(), client(t, srv, Config{}), llm.Request{Model: "m", Effort: llm.EffortHigh})
	if res.Failure != nil {
		t.Fatal(res.Failure)
	}
	next := buildRequest(llm.Request{Model: "m", Messages: []llm.Message{
		{Role: llm.RoleUser, Content: []llm.Block{llm.TextBlock("q")}},
		{Role: llm.RoleAssistant, Content: res.Asm.Blocks()},
		{Role: llm.RoleUser, Content: []llm.Block{llm.TextBlock("and?")}},
	}})
	got, _ := json.Marshal(next.Messages[1].Content)
	want := `[{"type":"thinking","thinking":"deep thought","signature":"c2lnbmF0dXJl"},{"type":"text","text":"42"}]`
	if string(got) != want {
		t.Errorf("replayed assistant content:\n got %s\nwant %s", got, want)
	}
}

// TestCacheBreakpoints checks where cache_control lands in the encoded
// body: on the system block, the last tool and the last block of the
// final message that can carry it, and nowhere else.
func TestCacheBreakpoints(t *testing.T) {
	user := func(bs ...llm.Block) llm.Message { return llm.Message{Role: llm.RoleUser, Content: bs} }
	assistant := func(bs ...llm.Block) llm.Message { return llm.Message{Role: llm.RoleAssistant, Content: bs} }
	thinking := llm.Block{Type: llm.BlockReasoning, Text: "hm", Signature: "sig"}
	redacted := llm.Block{Type: llm.BlockReasoning, Signature: "ENC"}
	call := llm.Block{Type: llm.BlockToolCall, ID: "toolu_1", Name: "read", Arguments: `{}`}
	result := llm.Block{Type: llm.BlockToolResult, ToolCallID: "toolu_1", Content: []llm.Block{llm.TextBlock("ok")}}
	image := llm.Block{Type: llm.BlockImage, MediaType: "image/png", Data: "iVBO"}
	tools := []llm.ToolSchema{{Name: "read"}, {Name: "grep"}, {Name: "bash"}}
	tests := []struct {
		name string
		req  llm.Request
		want []string // paths of the blocks that carry cache_control
	}{
		{"empty request", llm.Request{}, nil},
		{"all three", llm.Request{System: "sys", Tools: tools, Messages: []llm.Message{user(llm.TextBlock("hi"))}},
			[]string{"messages.0.content.0", "system.0", "tools.2"}},
		{"no system, no tools", llm.Request{Messages: []llm.Message{user(llm.TextBlock("a"), image)}},
			[]string{"messages.0.content.1"}},
		{"one tool", llm.Request{Tools: tools[:1]}, []string{"tools.0"}},
		{"only the final message", llm.Request{Messages: []llm.Message{user(llm.TextBlock("a")), assistant(llm.TextBlock("b")), user(llm.TextBlock("c"))}},
			[]string{"messages.2.content.0"}},
		// The note merges into the results' user turn behind them.
		{"tool results then a note", llm.Request{Messages: []llm.Message{user(llm.TextBlock("a")), assistant(call), user(result), {Role: llm.RoleSystem, Content: []llm.Block{llm.TextBlock("note")}}}},
			[]string{"messages.2.content.1"}},
		{"tool result last", llm.Request{Messages: []llm.Message{user(llm.TextBlock("a")), assistant(call), user(result)}},
			[]string{"messages.2.content.0"}},
		{"tool use last", llm.Request{Messages: []llm.Message{user(llm.TextBlock("a")), assistant(thinking, call)}},
			[]string{"messages.1.content.1"}},
		{"thinking skipped", llm.Request{Messages: []llm.Message{user(llm.TextBlock("a")), assistant(llm.TextBlock("b"), thinking, redacted)}},
			[]string{"messages.1.content.0"}},
		{"nothing cacheable in the final message", llm.Request{Messages: []llm.Message{user(llm.TextBlock("a")), assistant(thinking, redacted)}},
			nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			raw, err := json.Marshal(buildRequest(tt.req))
			if err != nil {
				t.Fatal(err)
			}
			var body any
			if err := json.Unmarshal(raw, &body); err != nil {
				t.Fatal(err)
			}
			got := cachePaths(body, "")
			sort.Strings(got)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("cache_control at %v; want %v\n%s", got, tt.want, raw)
			}
			if len(got) > 4 {
				t.Errorf("%d breakpoints; the API allows 4", len(got))
			}
			if s, ok := body.(map[string]any)["system"]; ok != (tt.req.System != "") {
				t.Errorf("system = %v for %q", s, tt.req.System)
			}
		})
	}
}

// cachePaths lists the dotted paths of the JSON objects under v that
// carry cache_control, checking that each says {"type":"ephemeral"}.
func cachePaths(v any, path string) []string {
	var out []string
	join := func(k string) string {
		if path == "" {
			return k
		}
		return path + "." + k
	}
	switch x := v.(type) {
	case map[string]any:
		for k, c := range x {
			if k == "cache_control" {
				if !reflect.DeepEqual(c, map[string]any{"type": "ephemeral"}) {
					return append(out, path+" (bad "+fmt.Sprint(c)+")")
				}
				out = append(out, path)
				continue
			}
			out = append(out, cachePaths(c, join(k))...)
		}
	case []any:
		for i, c := range x {
			out = append(out, cachePaths(c, join(strconv.Itoa(i)))...)
		}
	}
	return out
}
