package openai

import (
	"crypto/rand"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/dsh-dev/dsh/internal/llm"
	"github.com/dsh-dev/dsh/internal/llm/llmhttp"
	"github.com/dsh-dev/dsh/internal/llm/sse"
)

// chatChunk is one streamed Chat Completions event.
type chatChunk struct {
	Choices []struct {
		Index        int     `json:"index"`
		Delta        delta   `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *wireUsage      `json:"usage"`
	Error json.RawMessage `json:"error"`
}

type delta struct {
	Content          string `json:"content"`
	ReasoningContent string `json:"reasoning_content"`
	// Reasoning is the field some OpenAI-compatible servers (vLLM,
	// Ollama, OpenRouter) use instead of DeepSeek's reasoning_content.
	Reasoning string          `json:"reasoning"`
	ToolCalls []toolCallDelta `json:"tool_calls"`
}

type toolCallDelta struct {
	// Index is the call's position; a few servers omit it, see callKey.
	Index    *int   `json:"index"`
	ID       string `json:"id"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

type wireUsage struct {
	PromptTokens         int64  `json:"prompt_tokens"`
	CompletionTokens     int64  `json:"completion_tokens"`
	PromptCacheHitTokens *int64 `json:"prompt_cache_hit_tokens"`
	PromptTokensDetails  *struct {
		CachedTokens int64 `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
	CompletionTokensDetails *struct {
		ReasoningTokens int64 `json:"reasoning_tokens"`
	} `json:"completion_tokens_details"`
}

// usage converts to disjoint counters: the wire's prompt_tokens includes
// cached tokens, llm.Usage.InputTokens must not.
func (u *wireUsage) usage() llm.Usage {
	var cached int64
	switch {
	case u.PromptCacheHitTokens != nil:
		cached = *u.PromptCacheHitTokens
	case u.PromptTokensDetails != nil:
		cached = u.PromptTokensDetails.CachedTokens
	}
	out := llm.Usage{
		InputTokens:     max(u.PromptTokens-cached, 0),
		CacheReadTokens: cached,
		OutputTokens:    u.CompletionTokens,
	}
	if u.CompletionTokensDetails != nil {
		out.ReasoningTokens = u.CompletionTokensDetails.ReasoningTokens
	}
	return out
}

// block is one content block being streamed.
type block struct {
	index    int
	typ      llm.BlockType
	text     strings.Builder
	id, name string
	args     strings.Builder
	sentID   bool // the id and name went out on a delta
}

// Final assembles the block when it ends.
func (b *block) Final() llm.Block {
	switch b.typ {
	case llm.BlockToolCall:
		args := b.args.String()
		if args == "" {
			args = "{}" // a call without arguments; keep it parseable
		}
		if b.id == "" {
			// A tool result must name its call, and some local servers
			// send no ids.
			b.id = "call_" + rand.Text()[:16]
		}
		return llm.Block{Type: llm.BlockToolCall, ID: b.id, Name: b.name, Arguments: args}
	default:
		return llm.Block{Type: b.typ, Text: b.text.String()}
	}
}

// decoder folds Chat Completions events into chunks.
type decoder struct {
	llmhttp.Emitter
	fl llmhttp.Failer

	cur   *block         // the open text or reasoning block
	calls map[int]*block // tool calls by wire index
	last  int            // wire key of the latest call

	sawText      bool
	sawReasoning bool
	finishReason string
	usage        *llm.Usage
}

var _ llmhttp.Decoder = (*decoder)(nil)

// Event handles one SSE event. done reports the [DONE] sentinel.
func (d *decoder) Event(ev sse.Event) (done bool, f *llm.Failure) {
	data := strings.TrimSpace(ev.Data)
	switch data {
	case "":
		return false, nil
	case "[DONE]":
		return true, nil
	}
	var ch chatChunk
	if err := json.Unmarshal([]byte(data), &ch); err != nil {
		return false, d.fl.Fail(llm.CodeMalformedResponse, fmt.Sprintf("invalid stream event %q: %v", llmhttp.Truncate(data, 200), err))
	}
	if len(ch.Error) > 0 && string(ch.Error) != "null" {
		e := llmhttp.DecodeAPIError(ch.Error)
		msg := e.Message
		if msg == "" {
			msg = llmhttp.Truncate(string(ch.Error), llmhttp.MaxErrorMessage)
		}
		return false, d.fl.Fail(streamErrorCode(e), "stream error: "+llmhttp.Truncate(msg, llmhttp.MaxErrorMessage))
	}
	if ch.Usage != nil {
		u := ch.Usage.usage()
		d.usage = &u
	}
	for _, c := range ch.Choices {
		if c.Index != 0 {
			continue // only one choice is requested
		}
		d.delta(c.Delta)
		if c.FinishReason != nil && *c.FinishReason != "" {
			d.finishReason = *c.FinishReason
		}
	}
	return false, nil
}

func (d *decoder) delta(dl delta) {
	reasoning := dl.ReasoningContent
	if reasoning == "" {
		reasoning = dl.Reasoning
	}
	// Empty strings open nothing: DeepSeek starts with reasoning_content ""
	// even when it will not reason.
	if reasoning != "" {
		d.sawReasoning = true
		b := d.textBlock(llm.BlockReasoning)
		b.text.WriteString(reasoning)
		d.Emit(llm.Chunk{Type: llm.ChunkReasoningDelta, Index: b.index, Text: reasoning})
	}
	if dl.Content != "" {
		d.sawText = true
		b := d.textBlock(llm.BlockText)
		b.text.WriteString(dl.Content)
		d.Emit(llm.Chunk{Type: llm.ChunkTextDelta, Index: b.index, Text: dl.Content})
	}
	for _, tc := range dl.ToolCalls {
		d.toolCall(tc)
	}
}

// textBlock returns the open block of type t, ending a block of the other
// kind first so that each run of text or reasoning is its own block.
func (d *decoder) textBlock(t llm.BlockType) *block {
	if d.cur != nil && d.cur.typ == t {
		return d.cur
	}
	d.endCur()
	d.cur = d.start(t)
	return d.cur
}

func (d *decoder) endCur() {
	if d.cur != nil {
		d.EndBlock(d.cur.index)
		d.cur = nil
	}
}

func (d *decoder) start(t llm.BlockType) *block {
	b := &block{typ: t}
	b.index = d.StartBlock(t, b)
	return b
}

// toolCall folds one tool-call delta. Calls are assembled by their wire
// index because parallel calls may interleave; the id and name usually
// arrive only on a call's first delta.
func (d *decoder) toolCall(tc toolCallDelta) {
	d.endCur()
	key := d.callKey(tc)
	b := d.calls[key]
	if b == nil {
		b = d.start(llm.BlockToolCall)
		d.calls[key] = b
	}
	d.last = key
	if b.id == "" {
		b.id = tc.ID
	}
	if b.name == "" {
		b.name = tc.Function.Name
	}
	b.args.WriteString(tc.Function.Arguments)
	c := llm.Chunk{Type: llm.ChunkToolCallDelta, Index: b.index, ArgumentsDelta: tc.Function.Arguments}
	if !b.sentID && (b.id != "" || b.name != "") {
		c.ID, c.Name = b.id, b.name
		b.sentID = b.id != "" && b.name != ""
	}
	d.Emit(c)
}

// callKey returns the wire index of a call. Servers that omit the index
// send each call whole, so a new id starts a new call and a delta without
// one continues the latest call.
func (d *decoder) callKey(tc toolCallDelta) int {
	if tc.Index != nil {
		return *tc.Index
	}
	if tc.ID != "" {
		for k, b := range d.calls {
			if b.id == tc.ID {
				return k
			}
		}
		return -1 - len(d.calls) // negative keys cannot clash with real indexes
	}
	if len(d.calls) == 0 {
		return -1
	}
	return d.last
}

// Complete reports whether the finish reason arrived: a connection lost
// after it costs at most the trailing usage chunk.
func (d *decoder) Complete() bool { return d.finishReason != "" }

// End finishes a stream that reached [DONE] (marker) or a clean end of
// input. [DONE] without any finish_reason is a normal stop: several
// OpenAI-compatible gateways and local servers never send one. Without
// [DONE] the answer may have been cut short, so that stays a failure.
func (d *decoder) End(marker bool) *llm.Failure {
	if d.finishReason == "" {
		if !marker {
			return d.fl.Fail(llm.CodeStreamClosed, "stream ended without a finish reason")
		}
		d.finishReason = "stop"
	}
	fin := &llm.Finish{}
	switch d.finishReason {
	case "stop", "tool_calls", "function_call":
		fin.Reason = llm.FinishStop
		// Some servers report "stop" even when the turn made calls.
		if len(d.calls) > 0 {
			fin.Reason = llm.FinishToolCalls
		}
		// Reasoning alone is a complete answer (the model thought and
		// had nothing to add); only a reply with nothing at all is empty.
		if !d.sawText && !d.sawReasoning && len(d.calls) == 0 {
			d.EmitUsage(d.usage)
			return d.fl.Fail(llm.CodeEmptyResponse, "model returned no text, reasoning or tool calls (finish_reason "+d.finishReason+")")
		}
	case "length":
		fin.Reason = llm.FinishMaxTokens
	default:
		code := llm.CodeServer
		if d.finishReason == "content_filter" {
			code = llm.CodeInvalidRequest
		}
		fin.Reason = llm.FinishError
		fin.Failure = d.fl.Fail(code, "model stopped with finish_reason "+d.finishReason)
	}
	d.endCur()
	d.Finish(fin, d.usage)
	return nil
}
