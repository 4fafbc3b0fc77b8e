package llmtest

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// This file renders the OpenAI Responses API (POST /v1/responses), the wire
// format the Codex CLI speaks with wire_api = "responses".
//
// A streamed answer is, in order:
//
//	response.created, response.in_progress
//	per output item (reasoning, then the message, then each tool call):
//	  response.output_item.added
//	  reasoning: response.reasoning_summary_part.added,
//	             response.reasoning_summary_text.delta..., .done,
//	             response.reasoning_summary_part.done
//	  message:   response.content_part.added, response.output_text.delta...,
//	             response.output_text.done, response.content_part.done
//	  function_call: response.function_call_arguments.delta..., .done
//	  custom_tool_call: response.custom_tool_call_input.delta..., .done
//	  response.output_item.done (the whole item)
//	response.completed, or response.incomplete for a max-tokens or
//	content-filter finish (none with NoDone)
//
// Every event carries its "type" both as the SSE event name and in the
// data, and a "sequence_number" counting from 0, as the real API sends.

// responsesFinish is the terminal event type and, for an incomplete
// answer, the incomplete_details.reason.
func (r Response) responsesFinish() (event, reason string) {
	switch r.FinishReason {
	case "max-tokens", "max_tokens", "length", "max_output_tokens":
		return "response.incomplete", "max_output_tokens"
	case "content_filter", "content-filter":
		return "response.incomplete", "content_filter"
	}
	return "response.completed", ""
}

// responsesUsage is the Responses usage object, or nil when none is
// scripted. input_tokens includes the cached part, as the API counts it.
func responsesUsage(u *Usage) any {
	if u == nil {
		return nil
	}
	in := u.Input + u.CacheRead
	return obj{
		"input_tokens", in,
		"input_tokens_details", obj{"cached_tokens", u.CacheRead},
		"output_tokens", u.Output,
		"output_tokens_details", obj{"reasoning_tokens", u.Reasoning},
		"total_tokens", in + u.Output,
	}
}

// responsesItems is one answer's response id and output items, with ids
// assigned, ready to render as a stream or as a single object.
type responsesItems struct {
	respID  string
	created int64
	model   string
	items   []responsesItem
}

// responsesItem is one output item; its text is what the deltas carry.
type responsesItem struct {
	kind   string // "reasoning", "message", "function_call", "custom_tool_call"
	id     string
	text   string // reasoning summary, message text, arguments or custom input
	callID string
	name   string
	phase  string
}

// planResponses assigns ids to resp's output items. A tool call becomes a
// custom_tool_call when the request offers a tool of that name with type
// "custom" (Codex's apply_patch with known models), else a function_call.
func (s *Server) planResponses(resp Response, req Request, model string) responsesItems {
	p := responsesItems{
		respID:  fmt.Sprintf("resp_%d", s.nextID()),
		created: time.Now().Unix(),
		model:   model,
	}
	if resp.Empty {
		return p
	}
	if resp.Reasoning != "" {
		p.items = append(p.items, responsesItem{kind: "reasoning", id: fmt.Sprintf("rs_%d", s.nextID()), text: resp.Reasoning})
	}
	if resp.Text != "" {
		p.items = append(p.items, responsesItem{kind: "message", id: fmt.Sprintf("msg_%d", s.nextID()), text: resp.Text, phase: resp.Phase})
	}
	custom := req.customTools()
	for _, tc := range resp.ToolCalls {
		callID := tc.ID
		if callID == "" {
			callID = fmt.Sprintf("call_%d", s.nextID())
		}
		kind, prefix := "function_call", "fc"
		if custom[tc.Name] {
			kind, prefix = "custom_tool_call", "ctc"
		}
		p.items = append(p.items, responsesItem{kind: kind, id: fmt.Sprintf("%s_%d", prefix, s.nextID()),
			text: tc.Arguments, callID: callID, name: tc.Name})
	}
	return p
}

// json returns the item as it appears in output_item.done and in the
// response's output; done false gives the empty in-progress shape of
// output_item.added.
func (it responsesItem) json(s *Server, done bool) obj {
	status := "completed"
	if !done {
		status = "in_progress"
	}
	text := it.text
	if !done {
		text = ""
	}
	switch it.kind {
	case "reasoning":
		if !done {
			return obj{"type", "reasoning", "id", it.id, "summary", []any{}}
		}
		// The signature stands in for the opaque encrypted_content that
		// Codex asks for (include: reasoning.encrypted_content) and sends
		// back in later inputs.
		return obj{"type", "reasoning", "id", it.id, "summary", []any{obj{"type", "summary_text", "text", text}},
			"encrypted_content", s.signature()}
	case "message":
		content := []any{}
		if done {
			content = append(content, obj{"type", "output_text", "text", text, "annotations", []any{}})
		}
		o := obj{"type", "message", "id", it.id, "role", "assistant", "status", status, "content", content}
		if it.phase != "" {
			o = append(o, "phase", it.phase)
		}
		return o
	case "custom_tool_call":
		return obj{"type", "custom_tool_call", "id", it.id, "call_id", it.callID, "name", it.name, "input", text, "status", status}
	}
	return obj{"type", "function_call", "id", it.id, "call_id", it.callID, "name", it.name, "arguments", text, "status", status}
}

// response is the response object; status "in_progress" has no output
// or usage yet.
func (p responsesItems) response(resp Response, status string, output []any) obj {
	o := obj{"id", p.respID, "object", "response", "created_at", p.created, "status", status,
		"model", p.model, "output", output}
	if status == "incomplete" {
		_, reason := resp.responsesFinish()
		o = append(o, "incomplete_details", obj{"reason", reason})
	}
	if status != "in_progress" {
		if u := responsesUsage(resp.Usage); u != nil {
			o = append(o, "usage", u)
		}
	}
	return o
}

// responsesEvents renders resp as a Responses API stream (see the file
// comment for the sequence).
func (s *Server) responsesEvents(resp Response, req Request, model string) []event {
	p := s.planResponses(resp, req, model)
	var evs []event
	add := func(typ string, rest ...any) {
		o := append(obj{"type", typ, "sequence_number", len(evs)}, rest...)
		evs = append(evs, event{name: typ, data: mustJSON(o)})
	}
	add("response.created", "response", p.response(resp, "in_progress", []any{}))
	add("response.in_progress", "response", p.response(resp, "in_progress", []any{}))

	output := []any{}
	for i, it := range p.items {
		add("response.output_item.added", "output_index", i, "item", it.json(s, false))
		parts := chunks(it.text, resp.ChunkRunes)
		at := func(kv ...any) []any { return slices.Concat([]any{"item_id", it.id, "output_index", i}, kv) }
		switch it.kind {
		case "reasoning":
			add("response.reasoning_summary_part.added", at("summary_index", 0, "part", obj{"type", "summary_text", "text", ""})...)
			for _, d := range parts {
				add("response.reasoning_summary_text.delta", at("summary_index", 0, "delta", d)...)
			}
			add("response.reasoning_summary_text.done", at("summary_index", 0, "text", it.text)...)
			add("response.reasoning_summary_part.done", at("summary_index", 0, "part", obj{"type", "summary_text", "text", it.text})...)
		case "message":
			add("response.content_part.added", at("content_index", 0, "part", obj{"type", "output_text", "text", "", "annotations", []any{}})...)
			for _, d := range parts {
				add("response.output_text.delta", at("content_index", 0, "delta", d, "logprobs", []any{})...)
			}
			add("response.output_text.done", at("content_index", 0, "text", it.text, "logprobs", []any{})...)
			add("response.content_part.done", at("content_index", 0, "part", obj{"type", "output_text", "text", it.text, "annotations", []any{}})...)
		case "custom_tool_call":
			for _, d := range parts {
				add("response.custom_tool_call_input.delta", at("delta", d)...)
			}
			add("response.custom_tool_call_input.done", at("input", it.text)...)
		default:
			for _, d := range parts {
				add("response.function_call_arguments.delta", at("delta", d)...)
			}
			add("response.function_call_arguments.done", at("arguments", it.text)...)
		}
		done := it.json(s, true)
		output = append(output, done)
		add("response.output_item.done", "output_index", i, "item", done)
	}
	if !resp.NoDone {
		typ, _ := resp.responsesFinish()
		status := "completed"
		if typ == "response.incomplete" {
			status = "incomplete"
		}
		add(typ, "response", p.response(resp, status, output))
	}
	return evs
}

// responsesObject renders resp as a non-streaming Responses answer.
func (s *Server) responsesObject(resp Response, req Request, model string) string {
	p := s.planResponses(resp, req, model)
	output := []any{}
	for _, it := range p.items {
		output = append(output, it.json(s, true))
	}
	status := "completed"
	if typ, _ := resp.responsesFinish(); typ == "response.incomplete" {
		status = "incomplete"
	}
	return mustJSON(p.response(resp, status, output))
}

// CodexKeyEnv names the environment variable that the config written by
// [WriteCodexConfig] tells Codex to read its API key from (env_key). Codex
// refuses to start a turn when the variable is unset, so a test must set
// it, to any value (see [CodexKey]); Codex sends it as
// "Authorization: Bearer <value>".
const CodexKeyEnv = "LLMTEST_CODEX_API_KEY"

// CodexKey is a dummy value for [CodexKeyEnv].
const CodexKey = "llmtest-dummy-key"

// CodexProvider is the model_providers id the config written by
// [WriteCodexConfig] defines and selects.
const CodexProvider = "fake"

// WriteCodexConfig writes dir/config.toml (creating dir) so that a Codex
// CLI run with CODEX_HOME=dir talks to the fake server at baseURL (as
// [Server.URL] returns it; "/v1" is appended unless present) with model,
// over the Responses API. It selects provider [CodexProvider] reading its
// key from [CodexKeyEnv], disables retries (request_max_retries and
// stream_max_retries 0, so scripted faults surface at once), update
// checks, analytics, feedback, history persistence and websockets, and
// sets approval_policy "never" and sandbox_mode "workspace-write" so that
// no turn waits for an approval.
//
// An unknown model slug makes Codex warn ("Model metadata ... not
// found") and offer no apply_patch tool; a known one such as "gpt-5.5"
// does neither.
func WriteCodexConfig(dir, baseURL, model string) error {
	u, err := url.Parse(baseURL)
	if err != nil {
		return fmt.Errorf("llmtest: codex config: base URL: %w", err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("llmtest: codex config: base URL %q is not an http(s) URL", baseURL)
	}
	if model == "" {
		return errors.New("llmtest: codex config: model is empty")
	}
	base := strings.TrimSuffix(baseURL, "/")
	if !strings.HasSuffix(base, "/v1") {
		base += "/v1"
	}
	var b strings.Builder
	line := func(key string, v any) {
		switch v := v.(type) {
		case string:
			fmt.Fprintf(&b, "%s = %s\n", key, tomlString(v))
		default:
			fmt.Fprintf(&b, "%s = %v\n", key, v)
		}
	}
	b.WriteString("# Written by llmtest.WriteCodexConfig: Codex against a fake model server.\n")
	line("model", model)
	line("model_provider", CodexProvider)
	line("approval_policy", "never")
	line("sandbox_mode", "workspace-write")
	line("check_for_update_on_startup", false)
	line("suppress_unstable_features_warning", true)
	b.WriteString("\n[model_providers." + CodexProvider + "]\n")
	line("name", "llmtest fake")
	line("base_url", base)
	line("wire_api", "responses")
	line("env_key", CodexKeyEnv)
	line("request_max_retries", 0)
	line("stream_max_retries", 0)
	line("supports_websockets", false)
	b.WriteString("\n[analytics]\n")
	line("enabled", false)
	b.WriteString("\n[feedback]\n")
	line("enabled", false)
	b.WriteString("\n[history]\n")
	line("persistence", "none")

	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("llmtest: codex config: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.toml"), []byte(b.String()), 0o600); err != nil {
		return fmt.Errorf("llmtest: codex config: %w", err)
	}
	return nil
}

// tomlString quotes s as a TOML basic string.
func tomlString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, "\\u%04X", r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}
