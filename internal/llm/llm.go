// Package llm is the provider-neutral model vocabulary of dsh: messages,
// content blocks, stream chunks, finish reasons, token usage and failures.
//
// Adapters (internal/llm/openai, internal/llm/anthropic) translate a
// [Request] into one provider wire call and translate the provider's stream
// back into [Chunk] values. Everything above the adapters (the agent loop,
// the session log, the CLI) speaks only this vocabulary.
package llm

import (
	"context"
	"encoding/json"
	"iter"
	"sync"
	"unsafe"
)

// Role is the author of a [Message].
type Role string

// Message roles.
const (
	RoleSystem    Role = "system"
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
)

// BlockType discriminates a content [Block].
type BlockType string

// Content block types.
const (
	BlockText       BlockType = "text"
	BlockReasoning  BlockType = "reasoning"
	BlockImage      BlockType = "image"
	BlockToolCall   BlockType = "tool-call"
	BlockToolResult BlockType = "tool-result"
)

// Block is one content block. It is a flat struct rather than an interface
// so that it round-trips through JSON (the session log) without a registry
// of concrete types; only the fields of its Type are meaningful.
type Block struct {
	Type BlockType `json:"type"`

	// Text holds the text of text and reasoning blocks.
	Text string `json:"text,omitempty"`
	// Signature is the provider's opaque reasoning signature (Anthropic
	// thinking), replayed verbatim to the same provider.
	Signature string `json:"signature,omitempty"`

	// MediaType and Data (base64) describe an image block.
	MediaType string `json:"mediaType,omitempty"`
	Data      string `json:"data,omitempty"`

	// ID, Name and Arguments describe a tool-call block. Arguments is the
	// raw JSON text the model produced, never re-encoded.
	ID        string `json:"id,omitempty"`
	Name      string `json:"name,omitempty"`
	Arguments string `json:"arguments,omitempty"`

	// ToolCallID, Content and IsError describe a tool-result block.
	ToolCallID string  `json:"toolCallId,omitempty"`
	Content    []Block `json:"content,omitempty"`
	IsError    bool    `json:"isError,omitempty"`
}

// TextBlock returns a text block.
func TextBlock(s string) Block { return Block{Type: BlockText, Text: s} }

// Source says where a message came from.
type Source struct {
	// Kind is "user" (a human prompt), "model" (an assistant reply),
	// "tool" (a tool result), "plugin" (harness-injected context) or
	// "goal" (a goal round the goal driver started).
	Kind     string `json:"kind"`
	Provider string `json:"provider,omitempty"`
	Model    string `json:"model,omitempty"`
	Plugin   string `json:"plugin,omitempty"`
	Form     string `json:"form,omitempty"`
	// Sections names the parts of a composed message (runtime context).
	Sections []NamedText `json:"sections,omitempty"`
	// GoalID, Revision and Round identify a goal round (kind "goal"):
	// the goal, its revision when the round started, the round number.
	GoalID   string `json:"goalId,omitempty"`
	Revision int    `json:"revision,omitempty"`
	Round    int    `json:"round,omitempty"`
}

// NamedText is a named piece of text.
type NamedText struct {
	Name string `json:"name"`
	Text string `json:"text"`
}

// Message is one entry of model history.
type Message struct {
	ID      string  `json:"id"`
	Role    Role    `json:"role"`
	Content []Block `json:"content"`
	Source  Source  `json:"source"`
}

// Text concatenates the message's text blocks.
func (m Message) Text() string {
	var s string
	for _, b := range m.Content {
		if b.Type == BlockText {
			s += b.Text
		}
	}
	return s
}

// ToolCalls returns the message's tool-call blocks in order.
func (m Message) ToolCalls() []Block {
	var out []Block
	for _, b := range m.Content {
		if b.Type == BlockToolCall {
			out = append(out, b)
		}
	}
	return out
}

// Usage is token usage for one model call. The counters are disjoint:
// InputTokens counts only uncached input, so the total prompt size is
// InputTokens + CacheReadTokens + CacheWriteTokens. OutputTokens includes
// ReasoningTokens.
type Usage struct {
	InputTokens      int64 `json:"inputTokens"`
	CacheReadTokens  int64 `json:"cacheReadTokens"`
	CacheWriteTokens int64 `json:"cacheWriteTokens"`
	OutputTokens     int64 `json:"outputTokens"`
	ReasoningTokens  int64 `json:"reasoningTokens,omitempty"`
}

// Add accumulates o into u.
func (u *Usage) Add(o Usage) {
	u.InputTokens += o.InputTokens
	u.CacheReadTokens += o.CacheReadTokens
	u.CacheWriteTokens += o.CacheWriteTokens
	u.OutputTokens += o.OutputTokens
	u.ReasoningTokens += o.ReasoningTokens
}

// IsZero reports whether no tokens were counted.
func (u Usage) IsZero() bool { return u == Usage{} }

// ChunkType discriminates a stream [Chunk].
type ChunkType string

// Stream chunk types. The contract for a successful stream: blocks are
// opened with block-start, filled with deltas and closed with block-end
// (carrying the assembled block); usage, if any, comes before finish;
// nothing follows finish.
const (
	ChunkBlockStart     ChunkType = "block-start"
	ChunkBlockEnd       ChunkType = "block-end"
	ChunkTextDelta      ChunkType = "text-delta"
	ChunkReasoningDelta ChunkType = "reasoning-delta"
	ChunkToolCallDelta  ChunkType = "tool-call-delta"
	ChunkUsage          ChunkType = "usage"
	ChunkFinish         ChunkType = "finish"
)

// Chunk is one streamed unit from an adapter. Only the fields of its Type
// are meaningful.
type Chunk struct {
	Type  ChunkType `json:"type"`
	Index int       `json:"index"`

	// BlockType is set on block-start.
	BlockType BlockType `json:"blockType,omitempty"`
	// Text is set on text-delta and reasoning-delta.
	Text string `json:"text,omitempty"`
	// Signature carries a reasoning signature delta (Anthropic).
	Signature string `json:"signature,omitempty"`
	// ID, Name and ArgumentsDelta are set on tool-call-delta (ID and Name
	// at least on the first delta of a call).
	ID             string `json:"id,omitempty"`
	Name           string `json:"name,omitempty"`
	ArgumentsDelta string `json:"argumentsDelta,omitempty"`
	// Block is the assembled block on block-end.
	Block *Block `json:"block,omitempty"`
	// Usage is set on usage.
	Usage *Usage `json:"usage,omitempty"`
	// Finish is set on finish.
	Finish *Finish `json:"finish,omitempty"`
}

// FinishReason says why a model call ended.
type FinishReason string

// Finish reasons.
const (
	FinishStop      FinishReason = "stop"
	FinishToolCalls FinishReason = "tool-calls"
	FinishMaxTokens FinishReason = "max-tokens"
	FinishAborted   FinishReason = "aborted"
	FinishError     FinishReason = "error"
)

// Finish ends a stream. Failure is set for aborted and error.
type Finish struct {
	Reason  FinishReason `json:"reason"`
	Failure *Failure     `json:"failure,omitempty"`
}

// Effort is a reasoning effort level. The empty value means "adapter
// default".
type Effort string

// Reasoning efforts.
const (
	EffortOff  Effort = "off"
	EffortLow  Effort = "low"
	EffortHigh Effort = "high"
	EffortMax  Effort = "max"
)

// ParseEffort validates an effort name ("" is allowed and means default).
func ParseEffort(s string) (Effort, error) {
	switch e := Effort(s); e {
	case "", EffortOff, EffortLow, EffortHigh, EffortMax:
		return e, nil
	}
	return "", &Failure{Code: CodeInvalidRequest, Message: "unknown reasoning effort " + s + " (want off, low, high or max)"}
}

// ToolSchema is the model-facing description of a tool: nothing else about
// a tool ever reaches a model request.
type ToolSchema struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
}

// Request is one model call.
type Request struct {
	// Model is the provider's model id (without the provider prefix).
	Model     string       `json:"model"`
	System    string       `json:"system,omitempty"`
	Messages  []Message    `json:"messages"`
	Tools     []ToolSchema `json:"tools,omitempty"`
	Effort    Effort       `json:"effort,omitempty"`
	MaxTokens int          `json:"maxTokens,omitempty"`
	// Temperature is optional; nil leaves the provider default.
	Temperature *float64 `json:"temperature,omitempty"`
	// SessionID is sent to providers that accept attribution headers.
	SessionID string `json:"-"`
	// Purpose marks auxiliary calls ("compaction", "review"); "" is the
	// conversation itself. Providers may attribute it in a header.
	Purpose string `json:"-"`
	// EncodeCache, when set, lets the adapter reuse the wire encoding of
	// the messages this conversation already sent, so that a step costs
	// the same at any history length. The caller promises that a message
	// it sends again is unchanged: the cache recognises a message by its
	// ID, role and the identity of its Content (see [IdentityOf]), not by
	// comparing content. The session log's history keeps that promise.
	EncodeCache *EncodeCache `json:"-"`
}

// EncodeCache holds an adapter's encoding state for one conversation
// between its requests. The zero value is empty and ready to use; it is
// safe for concurrent use.
type EncodeCache struct {
	mu    sync.Mutex
	state any
}

// Use calls f with the state kept in the cache (nil at first, or another
// adapter's) under the cache's lock and keeps what f returns.
func (c *EncodeCache) Use(f func(state any) any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.state = f(c.state)
}

// Identity is what an [EncodeCache] recognises a message by: two
// messages with the same identity are taken to encode the same.
type Identity struct {
	id      string
	role    Role
	content *Block
	n       int
}

// IdentityOf returns the identity of m: its ID, role and the address and
// length of its Content, so that a message is recognised only where the
// very blocks are sent again (a copy of the history slice, as
// session.Log.Messages returns, keeps them).
func IdentityOf(m Message) Identity {
	return Identity{id: m.ID, role: m.Role, content: unsafe.SliceData(m.Content), n: len(m.Content)}
}

// Adapter streams one model call. Stream yields chunks in order and ends
// either with a finish chunk (nil error) or with exactly one non-nil error,
// which is always a *Failure. A cancelled ctx ends the stream with a
// Failure of code ABORTED. One call is one provider attempt: adapters never
// retry by themselves.
type Adapter interface {
	Stream(ctx context.Context, req Request) iter.Seq2[Chunk, error]
}

// ModelInfo describes a model route's capacity and abilities.
type ModelInfo struct {
	ID               string   `json:"id" yaml:"id"`
	ContextWindow    int      `json:"contextWindow,omitempty" yaml:"context_window"`
	DefaultMaxTokens int      `json:"defaultMaxTokens,omitempty" yaml:"max_tokens"`
	Efforts          []Effort `json:"efforts,omitempty" yaml:"efforts"`
	DefaultEffort    Effort   `json:"defaultEffort,omitempty" yaml:"default_effort"`
	Images           bool     `json:"images,omitempty" yaml:"images"`
}
