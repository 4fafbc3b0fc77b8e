package llmtest

import (
	"fmt"
	"net/http"
	"time"
)

// Wire formats a [Request] can have.
const (
	// FormatChat is OpenAI-compatible Chat Completions (DeepSeek).
	FormatChat = "chat"
	// FormatAnthropic is Anthropic Messages.
	FormatAnthropic = "anthropic"
	// FormatResponses is the OpenAI Responses API (what Codex speaks).
	FormatResponses = "responses"
)

// Request is one recorded HTTP request. The maps and slices are shared
// with the server's record: treat them as read-only.
type Request struct {
	// Method is the HTTP method.
	Method string
	// Path is the URL path, e.g. "/v1/messages".
	Path string
	// Header holds the request headers (a copy).
	Header http.Header
	// Body is the raw request body.
	Body []byte
	// Format is FormatChat, FormatAnthropic or FormatResponses by
	// endpoint, "" for an unknown path.
	Format string
	// Stream is the body's "stream" flag.
	Stream bool
	// JSON is the decoded body, nil when the body is not a JSON object.
	JSON map[string]any
	// Arrived is when the server's handler started on the request (its
	// headers had been read), for start-up benchmarks.
	Arrived time.Time
}

// Model returns the body's "model".
func (r Request) Model() string {
	s, _ := r.JSON["model"].(string)
	return s
}

// Messages returns the body's "messages" entries that are objects.
func (r Request) Messages() []map[string]any {
	return objects(r.JSON["messages"])
}

// ToolNames returns the names of the tools offered, in order, reading
// either the chat shape ({"type":"function","function":{"name":...}}) or
// the Anthropic and Responses one ({"name":...}). Responses built-in tools
// without a name (e.g. {"type":"web_search"}) are left out.
func (r Request) ToolNames() []string {
	var out []string
	for _, t := range objects(r.JSON["tools"]) {
		if fn, ok := t["function"].(map[string]any); ok {
			t = fn
		}
		if name, ok := t["name"].(string); ok {
			out = append(out, name)
		}
	}
	return out
}

// ToolResultCount returns how many tool results the conversation carries
// (chat "tool" messages, Anthropic "tool_result" blocks or Responses
// "function_call_output" / "custom_tool_call_output" input items). It lets a
// fallback script know how far a conversation has got without keeping any
// state, so one server can serve many conversations at once.
func (r Request) ToolResultCount() int {
	n := 0
	for _, it := range r.Input() {
		if it["type"] == "function_call_output" || it["type"] == "custom_tool_call_output" {
			n++
		}
	}
	for _, m := range r.Messages() {
		if m["role"] == "tool" {
			n++
			continue
		}
		for _, b := range objects(m["content"]) {
			if b["type"] == "tool_result" {
				n++
			}
		}
	}
	return n
}

// Input returns the Responses "input" items that are objects, in order:
// messages ({"type":"message","role":"user","content":[{"type":
// "input_text","text":...},{"type":"input_image","image_url":...}]}),
// function_call, function_call_output, reasoning and so on. A plain string
// input gives nil; read it from JSON["input"].
func (r Request) Input() []map[string]any {
	return objects(r.JSON["input"])
}

// InputTexts returns the texts of the Responses input messages of role
// ("user", "developer", "assistant"; "" for all), one entry per
// input_text or output_text content part, in order.
func (r Request) InputTexts(role string) []string {
	var out []string
	for _, it := range r.Input() {
		if t, _ := it["type"].(string); t != "" && t != "message" {
			continue
		}
		if role != "" && it["role"] != role {
			continue
		}
		if s, ok := it["content"].(string); ok {
			out = append(out, s)
			continue
		}
		for _, c := range objects(it["content"]) {
			if c["type"] == "input_text" || c["type"] == "output_text" {
				if s, ok := c["text"].(string); ok {
					out = append(out, s)
				}
			}
		}
	}
	return out
}

// Instructions returns the Responses "instructions" (the system prompt).
func (r Request) Instructions() string {
	s, _ := r.JSON["instructions"].(string)
	return s
}

// ReasoningEffort returns the Responses "reasoning.effort", "" when absent.
func (r Request) ReasoningEffort() string {
	m, _ := r.JSON["reasoning"].(map[string]any)
	s, _ := m["effort"].(string)
	return s
}

// TextFormat returns the Responses "text.format" object, nil when absent.
// A structured-output request has {"type":"json_schema","name":...,
// "strict":true,"schema":{...}}.
func (r Request) TextFormat() map[string]any {
	m, _ := r.JSON["text"].(map[string]any)
	f, _ := m["format"].(map[string]any)
	return f
}

// customTools is the set of names of Responses tools with type "custom"
// (free-form input rather than JSON arguments).
func (r Request) customTools() map[string]bool {
	out := map[string]bool{}
	for _, t := range objects(r.JSON["tools"]) {
		if name, ok := t["name"].(string); ok && t["type"] == "custom" {
			out[name] = true
		}
	}
	return out
}

func objects(v any) []map[string]any {
	list, _ := v.([]any)
	var out []map[string]any
	for _, e := range list {
		if m, ok := e.(map[string]any); ok {
			out = append(out, m)
		}
	}
	return out
}

// LoopFallback returns a fallback for [Server.SetFallback] that answers a
// call of tool with args until the conversation holds steps tool results,
// then a final text. It reads progress from the request (see
// ToolResultCount), so concurrent conversations each get their own loop.
// Usage is a rough estimate (a token per 4 body bytes) so that benchmarks
// see plausible, growing numbers.
func LoopFallback(tool, args string, steps int) func(Request) Response {
	return func(r Request) Response {
		u := &Usage{Input: len(r.Body) / 4, Output: 16}
		done := r.ToolResultCount()
		if done < steps {
			return Response{
				Text:      fmt.Sprintf("step %d of %d", done+1, steps),
				ToolCalls: []ToolCall{{Name: tool, Arguments: args}},
				Usage:     u,
			}
		}
		return Response{Text: fmt.Sprintf("done after %d steps", steps), Usage: u}
	}
}
