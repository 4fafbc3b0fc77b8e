package llmtest

import (
	"encoding/json"
	"fmt"
)

// anthropicEvents renders resp as an Anthropic Messages stream:
// message_start, ping, one start/deltas/stop run per content block
// (thinking, text, tool_use), message_delta and message_stop.
func (s *Server) anthropicEvents(resp Response, model string) []event {
	var evs []event
	add := func(typ string, rest ...any) {
		evs = append(evs, event{name: typ, data: mustJSON(append(obj{"type", typ}, rest...))})
	}
	u := resp.Usage
	if u == nil {
		u = &Usage{}
	}
	add("message_start", "message", obj{
		"id", fmt.Sprintf("msg_%d", s.nextID()), "type", "message", "role", "assistant", "model", model,
		"content", []any{}, "stop_reason", nil, "stop_sequence", nil,
		// The real API reports a provisional output count here and the
		// cumulative one in message_delta; summing them is a client bug
		// this makes visible.
		"usage", obj{"input_tokens", u.Input, "cache_creation_input_tokens", u.CacheWrite,
			"cache_read_input_tokens", u.CacheRead, "output_tokens", min(u.Output, 1)},
	})
	add("ping")

	index := 0
	block := func(start obj, deltas []obj) {
		add("content_block_start", "index", index, "content_block", start)
		for _, d := range deltas {
			add("content_block_delta", "index", index, "delta", d)
		}
		add("content_block_stop", "index", index)
		index++
	}
	if !resp.Empty {
		if resp.Reasoning != "" {
			var ds []obj
			for _, p := range chunks(resp.Reasoning, resp.ChunkRunes) {
				ds = append(ds, obj{"type", "thinking_delta", "thinking", p})
			}
			ds = append(ds, obj{"type", "signature_delta", "signature", s.signature()})
			block(obj{"type", "thinking", "thinking", "", "signature", ""}, ds)
		}
		if resp.Text != "" {
			var ds []obj
			for _, p := range chunks(resp.Text, resp.ChunkRunes) {
				ds = append(ds, obj{"type", "text_delta", "text", p})
			}
			block(obj{"type", "text", "text", ""}, ds)
		}
		for _, tc := range resp.ToolCalls {
			var ds []obj
			for _, p := range chunks(tc.Arguments, resp.ChunkRunes) {
				ds = append(ds, obj{"type", "input_json_delta", "partial_json", p})
			}
			block(obj{"type", "tool_use", "id", s.toolUseID(tc), "name", tc.Name, "input", obj{}}, ds)
		}
	}

	var stop any = resp.anthropicStop()
	if resp.NoFinishReason {
		stop = nil
	}
	add("message_delta", "delta", obj{"stop_reason", stop, "stop_sequence", nil},
		"usage", obj{"output_tokens", u.Output})
	if !resp.NoDone {
		add("message_stop")
	}
	return evs
}

func (s *Server) signature() string { return fmt.Sprintf("sig-%d", s.nextID()) }

func (s *Server) toolUseID(tc ToolCall) string {
	if tc.ID != "" {
		return tc.ID
	}
	return fmt.Sprintf("toolu_%d", s.nextID())
}

// anthropicMessage renders resp as a non-streaming Messages answer.
func (s *Server) anthropicMessage(resp Response, model string) string {
	u := resp.Usage
	if u == nil {
		u = &Usage{}
	}
	id := fmt.Sprintf("msg_%d", s.nextID())
	content := []any{}
	if !resp.Empty {
		if resp.Reasoning != "" {
			content = append(content, obj{"type", "thinking", "thinking", resp.Reasoning, "signature", s.signature()})
		}
		if resp.Text != "" {
			content = append(content, obj{"type", "text", "text", resp.Text})
		}
		for _, tc := range resp.ToolCalls {
			content = append(content, obj{"type", "tool_use", "id", s.toolUseID(tc), "name", tc.Name, "input", toolInput(tc.Arguments)})
		}
	}
	return mustJSON(obj{
		"id", id, "type", "message", "role", "assistant", "model", model, "content", content,
		"stop_reason", resp.anthropicStop(), "stop_sequence", nil,
		"usage", obj{"input_tokens", u.Input, "cache_creation_input_tokens", u.CacheWrite,
			"cache_read_input_tokens", u.CacheRead, "output_tokens", u.Output},
	})
}

// toolInput is the tool_use input value: the arguments as JSON when they
// are valid, {} when empty, and otherwise the text as a JSON string, since
// a non-streaming body must stay a valid document.
func toolInput(args string) any {
	switch {
	case args == "":
		return obj{}
	case json.Valid([]byte(args)):
		return json.RawMessage(args)
	}
	return args
}
