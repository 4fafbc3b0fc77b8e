package openai

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/dsh-dev/dsh/internal/llm"
)

// history has two assistant turns with reasoning (one with tool calls)
// and one without, plus tool results, an image and a system message.
func history() []llm.Message {
	return []llm.Message{
		{Role: llm.RoleUser, Content: []llm.Block{llm.TextBlock("list files")}},
		{Role: llm.RoleAssistant, Content: []llm.Block{
			{Type: llm.BlockReasoning, Text: "need "},
			{Type: llm.BlockReasoning, Text: "ls"},
			{Type: llm.BlockToolCall, ID: "call_1", Name: "bash", Arguments: `{"cmd":"ls"}`},
			{Type: llm.BlockToolCall, ID: "call_2", Name: "noargs"},
		}},
		{Role: llm.RoleUser, Content: []llm.Block{
			{Type: llm.BlockToolResult, ToolCallID: "call_1", Content: []llm.Block{llm.TextBlock("a.go"), llm.TextBlock("b.go")}},
			{Type: llm.BlockToolResult, ToolCallID: "call_2", IsError: true, Content: []llm.Block{llm.TextBlock("failed")}},
		}},
		{Role: llm.RoleAssistant, Content: []llm.Block{
			{Type: llm.BlockReasoning, Text: "summarize"},
			llm.TextBlock("Two files."),
		}},
		{Role: llm.RoleSystem, Content: []llm.Block{llm.TextBlock("note")}},
		{Role: llm.RoleUser, Content: []llm.Block{llm.TextBlock("what is this?"), {Type: llm.BlockImage, MediaType: "image/png", Data: "iVBO"}}},
		{Role: llm.RoleAssistant, Content: []llm.Block{llm.TextBlock("A logo.")}},
		{Role: llm.RoleUser, Content: []llm.Block{llm.TextBlock("thanks")}},
	}
}

func TestRequestBody(t *testing.T) {
	temp := 0.5
	req := llm.Request{
		Model:       "deepseek-v4-flash",
		System:      "be brief",
		Messages:    history(),
		Tools:       []llm.ToolSchema{{Name: "bash", Description: "run", Parameters: json.RawMessage(`{"type":"object","properties":{"cmd":{"type":"string"}}}`)}, {Name: "noargs"}},
		MaxTokens:   1000,
		Temperature: &temp,
		SessionID:   "sess-1",
		Effort:      llm.EffortHigh,
	}
	wantMessages := func(deepseek bool) string {
		rc := func(s string) string {
			if !deepseek {
				return ""
			}
			return `,"reasoning_content":"` + s + `"`
		}
		return `[
			{"role":"system","content":"be brief"},
			{"role":"user","content":"list files"},
			{"role":"assistant","content":""` + rc("need ls") + `,"tool_calls":[
				{"id":"call_1","type":"function","function":{"name":"bash","arguments":"{\"cmd\":\"ls\"}"}},
				{"id":"call_2","type":"function","function":{"name":"noargs","arguments":"{}"}}]},
			{"role":"tool","tool_call_id":"call_1","content":"a.go\nb.go"},
			{"role":"tool","tool_call_id":"call_2","content":"failed"},
			{"role":"assistant","content":"Two files."` + rc("summarize") + `},
			{"role":"system","content":"note"},
			{"role":"user","content":[{"type":"text","text":"what is this?"},{"type":"image_url","image_url":{"url":"data:image/png;base64,iVBO"}}]},
			{"role":"assistant","content":"A logo."},
			{"role":"user","content":"thanks"}]`
	}
	for _, deepseek := range []bool{true, false} {
		t.Run(map[bool]string{true: "deepseek", false: "openai"}[deepseek], func(t *testing.T) {
			srv, cap := server(t, sseBody(textOnly...))
			res := drain(t, t.Context(), client(t, srv, Config{DeepSeek: deepseek, APIKey: "sk-secret", UserAgent: "dsh/1.0", Headers: map[string]string{"X-Extra": "1"}}), req)
			if res.Failure != nil {
				t.Fatal(res.Failure)
			}
			h, path, body := cap.Get()
			if path != "/v1/chat/completions" {
				t.Errorf("path = %s", path)
			}
			for k, want := range map[string]string{
				"Authorization": "Bearer sk-secret", "Content-Type": "application/json",
				"Accept": "text/event-stream", "User-Agent": "dsh/1.0", "X-Extra": "1",
				"X-Deepseek-Harness-Session-Id": map[bool]string{true: "sess-1"}[deepseek],
				"X-Deepseek-Harness-Compact":    "",
			} {
				if got := h.Get(k); got != want {
					t.Errorf("header %s = %q; want %q", k, got, want)
				}
			}
			var want any
			if err := json.Unmarshal([]byte(wantMessages(deepseek)), &want); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(body["messages"], want) {
				got, _ := json.MarshalIndent(body["messages"], "", " ")
				t.Errorf("messages:\n%s", got)
			}
			checks := map[string]any{
				"model": "deepseek-v4-flash", "stream": true, "max_tokens": 1000.0, "temperature": 0.5,
				"reasoning_effort": "high",
			}
			for k, v := range checks {
				if body[k] != v {
					t.Errorf("%s = %v; want %v", k, body[k], v)
				}
			}
			if jsonPath(body, "stream_options", "include_usage") != true {
				t.Errorf("stream_options = %v", body["stream_options"])
			}
			if got := jsonPath(body, "tools", 0, "function", "name"); got != "bash" {
				t.Errorf("tools[0] name = %v", got)
			}
			if got := jsonPath(body, "tools", 1, "function", "parameters", "type"); got != "object" {
				t.Errorf("tools[1] parameters = %v; want an empty object schema", jsonPath(body, "tools", 1))
			}
			if jsonPath(body, "tools", 0, "type") != "function" {
				t.Errorf("tools[0] type = %v", jsonPath(body, "tools", 0, "type"))
			}
		})
	}
}

func TestRequestEffort(t *testing.T) {
	tests := []struct {
		deepseek bool
		effort   llm.Effort
		wantRE   any // reasoning_effort, nil when absent
		wantThk  any // thinking, nil when absent
	}{
		{true, "", nil, nil},
		{true, llm.EffortOff, nil, map[string]any{"type": "disabled"}},
		{true, llm.EffortLow, "low", nil},
		{true, llm.EffortHigh, "high", nil},
		{true, llm.EffortMax, "max", nil},
		{false, "", nil, nil},
		{false, llm.EffortOff, nil, nil},
		{false, llm.EffortLow, "low", nil},
		{false, llm.EffortMax, "high", nil},
	}
	for _, tt := range tests {
		c := New(Config{DeepSeek: tt.deepseek})
		raw, _ := json.Marshal(c.buildRequest(llm.Request{Model: "m", Effort: tt.effort}))
		var body map[string]any
		_ = json.Unmarshal(raw, &body)
		if got := body["reasoning_effort"]; got != tt.wantRE {
			t.Errorf("deepseek=%v effort=%q: reasoning_effort = %v; want %v", tt.deepseek, tt.effort, got, tt.wantRE)
		}
		if got := body["thinking"]; !reflect.DeepEqual(got, tt.wantThk) {
			t.Errorf("deepseek=%v effort=%q: thinking = %v; want %v", tt.deepseek, tt.effort, got, tt.wantThk)
		}
	}
}

// TestRequestMinimal checks what is left out: no key means no
// Authorization header, and unset options are absent from the body.
func TestRequestMinimal(t *testing.T) {
	srv, cap := server(t, sseBody(textOnly...))
	res := drain(t, t.Context(), client(t, srv, Config{DeepSeek: true}), llm.Request{Model: "m", Messages: history()[:1]})
	if res.Failure != nil {
		t.Fatal(res.Failure)
	}
	h, _, body := cap.Get()
	if v, ok := h["Authorization"]; ok {
		t.Errorf("Authorization = %v; want none", v)
	}
	if v := h.Get("X-Deepseek-Harness-Session-Id"); v != "" {
		t.Errorf("session header = %q without a session", v)
	}
	for _, k := range []string{"tools", "max_tokens", "temperature", "reasoning_effort", "thinking"} {
		if v, ok := body[k]; ok {
			t.Errorf("%s = %v; want absent", k, v)
		}
	}
	if got := jsonPath(body, "messages", 0, "role"); got != "user" {
		t.Errorf("first message role = %v; want user (no system prompt)", got)
	}
}

// TestReasoningOnlyTurn: a turn with nothing but reasoning is passed back
// to DeepSeek and dropped for servers that would not use it.
func TestReasoningOnlyTurn(t *testing.T) {
	msgs := []llm.Message{{Role: llm.RoleAssistant, Content: []llm.Block{{Type: llm.BlockReasoning, Text: "r"}}}}
	if got := New(Config{}).buildRequest(llm.Request{Messages: msgs}).Messages; len(got) != 0 {
		t.Errorf("openai messages = %+v; want none", got)
	}
	got := New(Config{DeepSeek: true}).buildRequest(llm.Request{Messages: msgs}).Messages
	if len(got) != 1 || got[0].ReasoningContent == nil || *got[0].ReasoningContent != "r" || got[0].Content != "" {
		t.Errorf("deepseek messages = %+v", got)
	}
}

// TestToolResultImages: a "tool" message carries only text, so the
// images of the tool results answering one assistant message follow the
// whole run of tool messages in one user message, each group labelled
// with its call; a run at the end of the history is flushed too.
func TestToolResultImages(t *testing.T) {
	img := func(data string) llm.Block {
		return llm.Block{Type: llm.BlockImage, MediaType: "image/png", Data: data}
	}
	result := func(id string, content ...llm.Block) llm.Message {
		return llm.Message{Role: llm.RoleUser, Content: []llm.Block{{Type: llm.BlockToolResult, ToolCallID: id, Content: content}}}
	}
	calls := func(ids ...string) llm.Message {
		m := llm.Message{Role: llm.RoleAssistant}
		for _, id := range ids {
			m.Content = append(m.Content, llm.Block{Type: llm.BlockToolCall, ID: id, Name: "read_image", Arguments: `{}`})
		}
		return m
	}
	req := llm.Request{Model: "m", Messages: []llm.Message{
		{Role: llm.RoleUser, Content: []llm.Block{llm.TextBlock("look")}},
		calls("c1", "c2", "c3"),
		result("c1", llm.TextBlock("Image a.png: 2x2"), img("AAAA"), img("BBBB")),
		result("c2", llm.TextBlock("no image here")),
		// The last result shares its message with a user note, which must
		// come after the images.
		{Role: llm.RoleUser, Content: []llm.Block{
			{Type: llm.BlockToolResult, ToolCallID: "c3", Content: []llm.Block{img("CCCC")}},
			llm.TextBlock("also this"),
		}},
		{Role: llm.RoleAssistant, Content: []llm.Block{llm.TextBlock("Seen."), {Type: llm.BlockToolCall, ID: "c4", Name: "read_image", Arguments: `{}`}}},
		result("c4", llm.TextBlock("Image b.png"), img("DDDD")),
	}}
	want := `[
		{"role":"user","content":"look"},
		{"role":"assistant","content":"","tool_calls":[
			{"id":"c1","type":"function","function":{"name":"read_image","arguments":"{}"}},
			{"id":"c2","type":"function","function":{"name":"read_image","arguments":"{}"}},
			{"id":"c3","type":"function","function":{"name":"read_image","arguments":"{}"}}]},
		{"role":"tool","tool_call_id":"c1","content":"Image a.png: 2x2"},
		{"role":"tool","tool_call_id":"c2","content":"no image here"},
		{"role":"tool","tool_call_id":"c3","content":""},
		{"role":"user","content":[
			{"type":"text","text":"Images returned by the tool call c1:"},
			{"type":"image_url","image_url":{"url":"data:image/png;base64,AAAA"}},
			{"type":"image_url","image_url":{"url":"data:image/png;base64,BBBB"}},
			{"type":"text","text":"Images returned by the tool call c3:"},
			{"type":"image_url","image_url":{"url":"data:image/png;base64,CCCC"}}]},
		{"role":"user","content":"also this"},
		{"role":"assistant","content":"Seen.","tool_calls":[
			{"id":"c4","type":"function","function":{"name":"read_image","arguments":"{}"}}]},
		{"role":"tool","tool_call_id":"c4","content":"Image b.png"},
		{"role":"user","content":[
			{"type":"text","text":"Images returned by the tool call c4:"},
			{"type":"image_url","image_url":{"url":"data:image/png;base64,DDDD"}}]}]`
	srv, cap := server(t, sseBody(textOnly...))
	if res := drain(t, t.Context(), client(t, srv, Config{}), req); res.Failure != nil {
		t.Fatal(res.Failure)
	}
	_, _, body := cap.Get()
	var wantMsgs any
	if err := json.Unmarshal([]byte(want), &wantMsgs); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(body["messages"], wantMsgs) {
		got, _ := json.MarshalIndent(body["messages"], "", " ")
		t.Errorf("messages:\n%s", got)
	}
}

func TestCompactionPurposeHeader(t *testing.T) {
	for _, deepseek := range []bool{true, false} {
		srv, cap := server(t, sseBody(textOnly...))
		req := llm.Request{Model: "m", Purpose: "compaction", Messages: []llm.Message{{Role: llm.RoleUser, Content: []llm.Block{llm.TextBlock("hi")}}}}
		if res := drain(t, t.Context(), client(t, srv, Config{DeepSeek: deepseek}), req); res.Failure != nil {
			t.Fatal(res.Failure)
		}
		h, _, _ := cap.Get()
		if got, want := h.Get("X-Deepseek-Harness-Compact"), map[bool]string{true: "1"}[deepseek]; got != want {
			t.Errorf("deepseek=%v: compact header %q, want %q", deepseek, got, want)
		}
	}
}
