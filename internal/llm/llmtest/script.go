package llmtest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"
	"unicode/utf8"
)

// AtStart, used as DisconnectAfter, MalformedAfter or StallAfter, triggers
// the fault before the first event. It exists because the zero value of
// those fields must mean "no fault" so that a plain Response is healthy.
const AtStart = -1

// Response is one scripted model answer. The zero value is a well-formed,
// empty successful answer; each field adds content, shapes the stream or
// injects a fault. One Response is rendered in whichever wire format the
// request that consumes it used.
type Response struct {
	// Reasoning is the model's thinking text (chat: delta.reasoning_content;
	// Anthropic: a thinking block followed by a fake signature).
	Reasoning string `json:"reasoning,omitempty"`
	// Text is the visible answer text.
	Text string `json:"text,omitempty"`
	// Phase is the Responses API message phase ("commentary",
	// "final_answer"), which Codex copies to its agentMessage items; empty
	// sends none. Other formats ignore it.
	Phase string `json:"phase,omitempty"`
	// ToolCalls are the calls the model makes, in order, after the text.
	ToolCalls []ToolCall `json:"toolCalls,omitempty"`
	// Usage is reported when set; nil sends no chat usage at all and zero
	// counters in Anthropic's mandatory usage fields.
	Usage *Usage `json:"usage,omitempty"`
	// FinishReason overrides the finish reason. Empty means "tool_calls"
	// when there are tool calls, else "stop". Neutral names ("max-tokens",
	// "tool-calls") and either provider's names are accepted and mapped to
	// the wire format; anything else is sent verbatim.
	FinishReason string `json:"finishReason,omitempty"`
	// NoFinishReason sends no finish reason at all, as some
	// OpenAI-compatible gateways and local servers do: chat's finish chunk
	// carries "finish_reason": null and Anthropic's message_delta a null
	// stop_reason. The terminator ([DONE], message_stop) is still sent
	// unless NoDone. The Responses format ignores it.
	NoFinishReason bool `json:"noFinishReason,omitempty"`

	// ChunkRunes is how many runes of text, reasoning or tool arguments go
	// into one delta; 0 means 8.
	ChunkRunes int `json:"chunkRunes,omitempty"`
	// InterleaveToolCalls sends the chat tool-call deltas round-robin across
	// calls (distinguished only by index) instead of one call after another.
	InterleaveToolCalls bool `json:"interleaveToolCalls,omitempty"`
	// UsageInFinishChunk puts chat usage on the finish chunk instead of a
	// separate trailing chunk with "choices": [] (the OpenAI/DeepSeek shape
	// with stream_options.include_usage).
	UsageInFinishChunk bool `json:"usageInFinishChunk,omitempty"`
	// Comments is how many ": keep-alive" SSE comment lines to interleave:
	// one before each of the first Comments events, any excess up front.
	Comments int `json:"comments,omitempty"`
	// DelayPerChunk is waited before each event (once before a
	// non-streaming body). In JSON it is a Go duration string ("10ms") or
	// integer nanoseconds.
	DelayPerChunk time.Duration `json:"delayPerChunk,omitempty"`

	// Status, when 300 or more, makes this an HTTP error answer.
	Status int `json:"status,omitempty"`
	// ErrorBody replaces the provider-shaped default error body. Setting it
	// also makes the answer an error (status 500 unless Status says
	// otherwise, so a 200 with an error body is possible).
	ErrorBody string `json:"errorBody,omitempty"`
	// RetryAfter is sent as the Retry-After header.
	RetryAfter string `json:"retryAfter,omitempty"`
	// Headers are extra response headers; they are applied last, so they
	// can override Content-Type too.
	Headers map[string]string `json:"headers,omitempty"`

	// DisconnectAfter sends that many events and then closes the TCP
	// connection without ending the chunked body, so the client sees a
	// transport error rather than a clean EOF. Counts include every event
	// (message_start, ping, [DONE], ...) but not comments; 0 disables;
	// AtStart closes right after the headers; a count past the end of the
	// stream faults after its last event. Non-streaming answers close
	// after the headers whatever the count.
	DisconnectAfter int `json:"disconnectAfter,omitempty"`
	// MalformedAfter sends that many events, then a "data: {not json"
	// event, then ends the body normally. A non-streaming body becomes
	// "{not json".
	MalformedAfter int `json:"malformedAfter,omitempty"`
	// StallAfter sends that many events and then nothing, holding the
	// connection until the client goes away (the handler simply returns) or
	// the server closes (the connection is cut). Non-streaming answers stall
	// after the headers.
	StallAfter int `json:"stallAfter,omitempty"`
	// Empty drops Reasoning, Text and ToolCalls: a well-formed stream with
	// no content at all and a stop finish (unless FinishReason is set).
	Empty bool `json:"empty,omitempty"`
	// NoDone omits the terminator: chat's "data: [DONE]" or Anthropic's
	// message_stop event.
	NoDone bool `json:"noDone,omitempty"`
	// Raw, when set, is written verbatim as the success body (SSE stream or
	// JSON document) instead of anything rendered; only Headers,
	// RetryAfter and a Status below 300 (default 200) still apply.
	Raw string `json:"raw,omitempty"`
}

// ToolCall is one scripted tool call.
type ToolCall struct {
	// ID is the call id; empty generates "call_<n>" (chat) or
	// "toolu_<n>" (Anthropic) from a per-server counter.
	ID string `json:"id,omitempty"`
	// Name is the tool name.
	Name string `json:"name"`
	// Arguments is the raw JSON text of the arguments, sent as is (it may
	// be deliberately invalid). In a script it may be a JSON string or,
	// for convenience, any JSON value, which is used compacted.
	Arguments string `json:"arguments,omitempty"`
}

// Usage is scripted token usage, with the same disjoint meaning as
// llm.Usage: Input is uncached input only, Output includes Reasoning.
type Usage struct {
	// Input counts uncached prompt tokens.
	Input int `json:"input,omitempty"`
	// Output counts completion tokens, reasoning included.
	Output int `json:"output,omitempty"`
	// CacheRead counts prompt tokens served from the provider cache.
	CacheRead int `json:"cacheRead,omitempty"`
	// CacheWrite counts prompt tokens written to the cache (Anthropic only;
	// the chat format has no field for it).
	CacheWrite int `json:"cacheWrite,omitempty"`
	// Reasoning counts the reasoning part of Output (chat only).
	Reasoning int `json:"reasoning,omitempty"`
}

// UnmarshalJSON decodes a script entry strictly (unknown fields are
// errors, so a typo in a script cannot silently produce a healthy answer)
// and accepts DelayPerChunk as a duration string.
func (r *Response) UnmarshalJSON(b []byte) error {
	type plain Response // drops the methods, avoiding recursion
	var aux struct {
		*plain
		DelayPerChunk json.RawMessage `json:"delayPerChunk,omitempty"`
	}
	aux.plain = (*plain)(r)
	if err := strictDecode(b, &aux); err != nil {
		return err
	}
	if len(aux.DelayPerChunk) == 0 || string(aux.DelayPerChunk) == "null" {
		return nil
	}
	var s string
	if json.Unmarshal(aux.DelayPerChunk, &s) == nil {
		d, err := time.ParseDuration(s)
		if err != nil {
			return fmt.Errorf("delayPerChunk: %w", err)
		}
		r.DelayPerChunk = d
		return nil
	}
	var ns int64
	if err := json.Unmarshal(aux.DelayPerChunk, &ns); err != nil {
		return fmt.Errorf("delayPerChunk: want a duration string or integer nanoseconds, got %s", aux.DelayPerChunk)
	}
	r.DelayPerChunk = time.Duration(ns)
	return nil
}

// UnmarshalJSON decodes a tool call strictly and accepts arguments given
// as a JSON value rather than a string, because hand-written scripts read
// far better that way.
func (c *ToolCall) UnmarshalJSON(b []byte) error {
	var aux struct {
		ID        string          `json:"id"`
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	}
	if err := strictDecode(b, &aux); err != nil {
		return err
	}
	*c = ToolCall{ID: aux.ID, Name: aux.Name}
	raw := bytes.TrimSpace(aux.Arguments)
	switch {
	case len(raw) == 0 || string(raw) == "null":
	case raw[0] == '"':
		return json.Unmarshal(raw, &c.Arguments)
	default:
		var buf bytes.Buffer
		if err := json.Compact(&buf, raw); err != nil {
			return err
		}
		c.Arguments = buf.String()
	}
	return nil
}

func strictDecode(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

// ParseScript reads a JSON array of Responses (the format of
// dsh-fakellm -script). Unknown fields are rejected and errors name the
// offending entry.
func ParseScript(r io.Reader) ([]Response, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("llmtest: read script: %w", err)
	}
	data = bytes.TrimSpace(data)
	if len(data) == 0 || data[0] != '[' {
		return nil, errors.New("llmtest: script must be a JSON array of responses")
	}
	var raws []json.RawMessage
	if err := json.Unmarshal(data, &raws); err != nil {
		return nil, fmt.Errorf("llmtest: script: %w", err)
	}
	out := make([]Response, len(raws))
	for i, raw := range raws {
		if err := json.Unmarshal(raw, &out[i]); err != nil {
			return nil, fmt.Errorf("llmtest: script response %d: %w", i, err)
		}
		if err := out[i].validate(); err != nil {
			return nil, fmt.Errorf("llmtest: script response %d: %w", i, err)
		}
	}
	return out, nil
}

// validate rejects values that could only be mistakes.
func (r Response) validate() error {
	switch {
	case r.Status != 0 && (r.Status < 100 || r.Status > 599):
		return fmt.Errorf("status %d is not an HTTP status", r.Status)
	case r.ChunkRunes < 0:
		return errors.New("chunkRunes must not be negative")
	case r.Comments < 0:
		return errors.New("comments must not be negative")
	case r.DelayPerChunk < 0:
		return errors.New("delayPerChunk must not be negative")
	case r.NoFinishReason && r.FinishReason != "":
		return errors.New("noFinishReason and finishReason exclude each other")
	}
	for _, n := range []int{r.DisconnectAfter, r.MalformedAfter, r.StallAfter} {
		if n < AtStart {
			return fmt.Errorf("fault count %d is below AtStart (-1)", n)
		}
	}
	for i, c := range r.ToolCalls {
		if c.Name == "" {
			return fmt.Errorf("tool call %d has no name", i)
		}
	}
	return nil
}

// isError reports whether the response is an HTTP error answer.
func (r Response) isError() bool { return r.Status >= 300 || r.ErrorBody != "" }

// chatFinish is the chat-format finish reason.
func (r Response) chatFinish() string {
	switch f := r.FinishReason; f {
	case "":
		if len(r.ToolCalls) > 0 && !r.Empty {
			return "tool_calls"
		}
		return "stop"
	case "max-tokens", "max_tokens":
		return "length"
	case "tool-calls", "tool_use":
		return "tool_calls"
	case "end_turn":
		return "stop"
	default:
		return f
	}
}

// anthropicStop is the Anthropic stop_reason.
func (r Response) anthropicStop() string {
	switch f := r.chatFinish(); f {
	case "stop":
		return "end_turn"
	case "tool_calls":
		return "tool_use"
	case "length":
		return "max_tokens"
	default:
		return f
	}
}

type faultKind int

const (
	faultNone faultKind = iota
	faultDisconnect
	faultMalformed
	faultStall
)

// fault returns the one fault the response injects and after how many
// events. Only one applies so that the outcome is unambiguous; the order
// of precedence is disconnect, malformed, stall.
func (r Response) fault() (faultKind, int) {
	for _, f := range []struct {
		k faultKind
		n int
	}{{faultDisconnect, r.DisconnectAfter}, {faultMalformed, r.MalformedAfter}, {faultStall, r.StallAfter}} {
		switch {
		case f.n == AtStart:
			return f.k, 0
		case f.n > 0:
			return f.k, f.n
		}
	}
	return faultNone, 0
}

// chunks splits s into pieces of n runes (n <= 0 means 8); "" gives none.
func chunks(s string, n int) []string {
	if n <= 0 {
		n = 8
	}
	var out []string
	for s != "" {
		i, count := 0, 0
		for i < len(s) && count < n {
			_, size := utf8.DecodeRuneInString(s[i:])
			i += size
			count++
		}
		out = append(out, s[:i])
		s = s[i:]
	}
	return out
}
