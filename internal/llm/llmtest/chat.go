package llmtest

import (
	"fmt"
	"time"
)

// chatEvents renders resp as a Chat Completions stream, chunk for chunk
// in the order DeepSeek sends them: a role-only delta, reasoning, text,
// tool-call deltas, the finish chunk, usage, then [DONE].
func (s *Server) chatEvents(resp Response, model string) []event {
	id := fmt.Sprintf("chatcmpl-%d", s.nextID())
	created := time.Now().Unix()
	var evs []event
	chunk := func(choices []any, usage any) {
		o := obj{"id", id, "object", "chat.completion.chunk", "created", created, "model", model, "choices", choices}
		if usage != nil {
			o = append(o, "usage", usage)
		}
		evs = append(evs, event{data: mustJSON(o)})
	}
	delta := func(d obj) {
		chunk([]any{obj{"index", 0, "delta", d, "logprobs", nil, "finish_reason", nil}}, nil)
	}

	delta(obj{"role", "assistant", "content", ""})
	if !resp.Empty {
		for _, p := range chunks(resp.Reasoning, resp.ChunkRunes) {
			// DeepSeek sends an explicit null content while reasoning;
			// clients must tolerate it.
			delta(obj{"content", nil, "reasoning_content", p})
		}
		for _, p := range chunks(resp.Text, resp.ChunkRunes) {
			delta(obj{"content", p})
		}
		for _, tc := range s.chatToolDeltas(resp) {
			delta(obj{"tool_calls", []any{tc}})
		}
	}

	usage := chatUsage(resp.Usage)
	var reason any = resp.chatFinish()
	if resp.NoFinishReason {
		reason = nil
	}
	finish := []any{obj{"index", 0, "delta", obj{}, "logprobs", nil, "finish_reason", reason}}
	if resp.UsageInFinishChunk {
		chunk(finish, usage)
	} else {
		chunk(finish, nil)
		if usage != nil {
			chunk([]any{}, usage)
		}
	}
	if !resp.NoDone {
		evs = append(evs, event{data: "[DONE]"})
	}
	return evs
}

// chatToolDeltas returns one tool_calls entry per delta. Only a call's
// first delta carries its id, type and name, as real servers do, so that
// clients are forced to merge deltas by index.
func (s *Server) chatToolDeltas(resp Response) []obj {
	if resp.Empty {
		return nil
	}
	perCall := make([][]obj, len(resp.ToolCalls))
	for i, tc := range resp.ToolCalls {
		id := tc.ID
		if id == "" {
			id = fmt.Sprintf("call_%d", s.nextID())
		}
		perCall[i] = append(perCall[i], obj{"index", i, "id", id, "type", "function",
			"function", obj{"name", tc.Name, "arguments", ""}})
		for _, p := range chunks(tc.Arguments, resp.ChunkRunes) {
			perCall[i] = append(perCall[i], obj{"index", i, "function", obj{"arguments", p}})
		}
	}
	var out []obj
	if !resp.InterleaveToolCalls {
		for _, ds := range perCall {
			out = append(out, ds...)
		}
		return out
	}
	for step := 0; ; step++ {
		more := false
		for _, ds := range perCall {
			if step < len(ds) {
				out = append(out, ds[step])
				more = true
			}
		}
		if !more {
			return out
		}
	}
}

// chatUsage is the DeepSeek usage object (which also carries the OpenAI
// detail fields), or nil when none is scripted.
func chatUsage(u *Usage) any {
	if u == nil {
		return nil
	}
	prompt := u.Input + u.CacheRead
	return obj{
		"prompt_tokens", prompt,
		"completion_tokens", u.Output,
		"total_tokens", prompt + u.Output,
		"prompt_cache_hit_tokens", u.CacheRead,
		"prompt_cache_miss_tokens", u.Input,
		"prompt_tokens_details", obj{"cached_tokens", u.CacheRead},
		"completion_tokens_details", obj{"reasoning_tokens", u.Reasoning},
	}
}

// chatCompletion renders resp as a non-streaming chat.completion.
func (s *Server) chatCompletion(resp Response, model string) string {
	id := fmt.Sprintf("chatcmpl-%d", s.nextID())
	var content any
	if !resp.Empty && resp.Text != "" {
		content = resp.Text
	} else if resp.Empty || len(resp.ToolCalls) == 0 {
		content = ""
	}
	msg := obj{"role", "assistant", "content", content}
	if !resp.Empty && resp.Reasoning != "" {
		msg = append(msg, "reasoning_content", resp.Reasoning)
	}
	if !resp.Empty && len(resp.ToolCalls) > 0 {
		var calls []any
		for _, tc := range resp.ToolCalls {
			cid := tc.ID
			if cid == "" {
				cid = fmt.Sprintf("call_%d", s.nextID())
			}
			calls = append(calls, obj{"id", cid, "type", "function",
				"function", obj{"name", tc.Name, "arguments", tc.Arguments}})
		}
		msg = append(msg, "tool_calls", calls)
	}
	o := obj{"id", id, "object", "chat.completion", "created", time.Now().Unix(), "model", model,
		"choices", []any{obj{"index", 0, "message", msg, "logprobs", nil, "finish_reason", resp.chatFinish()}}}
	if u := chatUsage(resp.Usage); u != nil {
		o = append(o, "usage", u)
	}
	return mustJSON(o)
}
