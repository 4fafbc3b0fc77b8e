package anthropic

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/dsh-dev/dsh/internal/llm"
	"github.com/dsh-dev/dsh/internal/llm/llmhttp"
	"github.com/dsh-dev/dsh/internal/llm/sse"
)

// streamEvent is any Messages stream event; only the fields of its Type
// are set.
type streamEvent struct {
	Type    string `json:"type"`
	Message *struct {
		Usage wireUsage `json:"usage"`
	} `json:"message"`
	Index        int `json:"index"`
	ContentBlock *struct {
		Type  string          `json:"type"`
		Text  string          `json:"text"`
		ID    string          `json:"id"`
		Name  string          `json:"name"`
		Input json.RawMessage `json:"input"`
		Data  string          `json:"data"`
	} `json:"content_block"`
	Delta *struct {
		Type        string `json:"type"`
		Text        string `json:"text"`
		Thinking    string `json:"thinking"`
		Signature   string `json:"signature"`
		PartialJSON string `json:"partial_json"`
		StopReason  string `json:"stop_reason"`
	} `json:"delta"`
	Usage *wireUsage      `json:"usage"`
	Error json.RawMessage `json:"error"`
}

// wireUsage fields are pointers because message_delta repeats only some
// of them, and a missing one must not zero what message_start said.
type wireUsage struct {
	InputTokens              *int64 `json:"input_tokens"`
	OutputTokens             *int64 `json:"output_tokens"`
	CacheCreationInputTokens *int64 `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     *int64 `json:"cache_read_input_tokens"`
}

// merge copies the counters present in w. Anthropic's input_tokens is
// already the uncached input, so the counters map one to one.
func (w *wireUsage) merge(u *llm.Usage) {
	set := func(dst *int64, src *int64) {
		if src != nil {
			*dst = *src
		}
	}
	set(&u.InputTokens, w.InputTokens)
	set(&u.OutputTokens, w.OutputTokens)
	set(&u.CacheWriteTokens, w.CacheCreationInputTokens)
	set(&u.CacheReadTokens, w.CacheReadInputTokens)
}

// block is one content block being streamed.
type block struct {
	index int // chunk index
	wire  int // the provider's content block index
	typ   llm.BlockType
	text  strings.Builder
	sig   strings.Builder
	id    string
	name  string
	args  strings.Builder
	input json.RawMessage // tool_use input given whole at block start
}

// Final assembles the block when it ends.
func (b *block) Final() llm.Block {
	switch b.typ {
	case llm.BlockToolCall:
		args := b.args.String()
		if args == "" {
			args = string(b.input)
		}
		if strings.TrimSpace(args) == "" {
			args = "{}" // a call without arguments; keep it parseable
		}
		return llm.Block{Type: llm.BlockToolCall, ID: b.id, Name: b.name, Arguments: args}
	case llm.BlockReasoning:
		return llm.Block{Type: llm.BlockReasoning, Text: b.text.String(), Signature: b.sig.String()}
	default:
		return llm.Block{Type: b.typ, Text: b.text.String()}
	}
}

// decoder folds Messages stream events into chunks.
type decoder struct {
	llmhttp.Emitter
	fl llmhttp.Failer

	blocks map[int]*block // open blocks by wire index

	sawText      bool
	sawReasoning bool // thinking text or a (redacted) signature
	calls        int
	stopReason   string
	usage        llm.Usage
	sawUsage     bool
}

var _ llmhttp.Decoder = (*decoder)(nil)

// Event handles one SSE event. done reports message_stop.
func (d *decoder) Event(ev sse.Event) (done bool, f *llm.Failure) {
	if strings.TrimSpace(ev.Data) == "" {
		return false, nil
	}
	var e streamEvent
	if err := json.Unmarshal([]byte(ev.Data), &e); err != nil {
		return false, d.fl.Fail(llm.CodeMalformedResponse, fmt.Sprintf("invalid %s event %q: %v", ev.Event, llmhttp.Truncate(ev.Data, 200), err))
	}
	if e.Type == "" {
		e.Type = ev.Event
	}
	switch e.Type {
	case "message_start":
		if e.Message != nil {
			e.Message.Usage.merge(&d.usage)
			d.sawUsage = true
		}
	case "content_block_start":
		if e.ContentBlock != nil {
			d.start(e)
		}
	case "content_block_delta":
		if e.Delta != nil {
			d.delta(e)
		}
	case "content_block_stop":
		if b := d.blocks[e.Index]; b != nil {
			d.endBlock(b)
		}
	case "message_delta":
		if e.Delta != nil && e.Delta.StopReason != "" {
			d.stopReason = e.Delta.StopReason
		}
		if e.Usage != nil {
			e.Usage.merge(&d.usage)
			d.sawUsage = true
		}
	case "message_stop":
		return true, nil
	case "error":
		ae := llmhttp.DecodeAPIError(e.Error)
		msg := ae.Message
		if msg == "" {
			msg = ae.Type
		}
		return false, d.fl.Fail(streamErrorCode(ae), "stream error: "+llmhttp.Truncate(msg, llmhttp.MaxErrorMessage))
	}
	// ping and event types added after this was written are activity only.
	return false, nil
}

func (d *decoder) start(e streamEvent) {
	cb := e.ContentBlock
	var typ llm.BlockType
	switch cb.Type {
	case "text":
		typ = llm.BlockText
	case "thinking", "redacted_thinking":
		typ = llm.BlockReasoning
	case "tool_use":
		typ = llm.BlockToolCall
	default:
		// Server tool blocks and the like are not part of the neutral
		// vocabulary; their deltas are dropped with them.
		return
	}
	b := &block{wire: e.Index, typ: typ}
	d.blocks[e.Index] = b
	b.index = d.StartBlock(typ, b)
	switch cb.Type {
	case "text":
		d.text(b, cb.Text)
	case "redacted_thinking":
		// Encrypted thinking must be replayed verbatim; it travels as a
		// signature with no text (see request.go).
		b.sig.WriteString(cb.Data)
		d.sawReasoning = d.sawReasoning || cb.Data != ""
		d.Emit(llm.Chunk{Type: llm.ChunkReasoningDelta, Index: b.index, Signature: cb.Data})
	case "tool_use":
		d.calls++
		b.id, b.name = cb.ID, cb.Name
		if in := strings.TrimSpace(string(cb.Input)); in != "" && in != "{}" && in != "null" {
			b.input = cb.Input
		}
		d.Emit(llm.Chunk{Type: llm.ChunkToolCallDelta, Index: b.index, ID: b.id, Name: b.name})
	}
}

func (d *decoder) text(b *block, s string) {
	if s == "" {
		return
	}
	d.sawText = true
	b.text.WriteString(s)
	d.Emit(llm.Chunk{Type: llm.ChunkTextDelta, Index: b.index, Text: s})
}

func (d *decoder) delta(e streamEvent) {
	b := d.blocks[e.Index]
	if b == nil {
		return
	}
	dl := e.Delta
	switch {
	case dl.Type == "text_delta" && b.typ == llm.BlockText:
		d.text(b, dl.Text)
	case dl.Type == "thinking_delta" && b.typ == llm.BlockReasoning && dl.Thinking != "":
		b.text.WriteString(dl.Thinking)
		d.sawReasoning = true
		d.Emit(llm.Chunk{Type: llm.ChunkReasoningDelta, Index: b.index, Text: dl.Thinking})
	case dl.Type == "signature_delta" && b.typ == llm.BlockReasoning && dl.Signature != "":
		b.sig.WriteString(dl.Signature)
		d.sawReasoning = true
		d.Emit(llm.Chunk{Type: llm.ChunkReasoningDelta, Index: b.index, Signature: dl.Signature})
	case dl.Type == "input_json_delta" && b.typ == llm.BlockToolCall && dl.PartialJSON != "":
		b.args.WriteString(dl.PartialJSON)
		d.Emit(llm.Chunk{Type: llm.ChunkToolCallDelta, Index: b.index, ArgumentsDelta: dl.PartialJSON})
	}
}

// endBlock closes one block.
func (d *decoder) endBlock(b *block) {
	if d.blocks[b.wire] == b {
		delete(d.blocks, b.wire)
	}
	d.EndBlock(b.index)
}

// Complete reports whether message_delta carried the stop reason: a
// connection lost after it costs nothing but the message_stop marker.
func (d *decoder) Complete() bool { return d.stopReason != "" }

// End finishes a stream at message_stop (stopped) or at a clean end of
// input, which is accepted only after message_delta gave a stop reason.
// message_stop without a stop reason, after every content block was
// closed, is a normal end_turn, as [DONE] without a finish_reason is for
// Chat Completions: some compatible gateways drop the stop reason. A
// block still open at message_stop means the content is incomplete.
func (d *decoder) End(stopped bool) *llm.Failure {
	if d.stopReason == "" {
		switch {
		case !stopped:
			return d.fl.Fail(llm.CodeStreamClosed, "stream ended before message_stop")
		case len(d.blocks) > 0:
			return d.fl.Fail(llm.CodeMalformedResponse, "message_stop with a content block still open and no stop reason")
		}
		d.stopReason = "end_turn"
	}
	fin := &llm.Finish{}
	switch d.stopReason {
	case "end_turn", "stop_sequence", "tool_use":
		fin.Reason = llm.FinishStop
		if d.calls > 0 {
			fin.Reason = llm.FinishToolCalls
		}
		// Thinking alone is a complete answer; only nothing at all is empty.
		if !d.sawText && !d.sawReasoning && d.calls == 0 {
			d.EmitUsage(d.reportedUsage())
			return d.fl.Fail(llm.CodeEmptyResponse, "model returned no text, thinking or tool calls (stop_reason "+d.stopReason+")")
		}
	case "max_tokens", "model_context_window_exceeded":
		// Both cut the answer short; callers treat them alike.
		fin.Reason = llm.FinishMaxTokens
	case "refusal":
		fin.Reason = llm.FinishError
		fin.Failure = d.fl.Fail(llm.CodeInvalidRequest, "model refused to answer (stop_reason refusal)")
	default:
		fin.Reason = llm.FinishError
		fin.Failure = d.fl.Fail(llm.CodeServer, "model stopped with stop_reason "+d.stopReason)
	}
	d.Finish(fin, d.reportedUsage())
	return nil
}

// reportedUsage returns a copy of the usage, or nil when the stream
// reported none.
func (d *decoder) reportedUsage() *llm.Usage {
	if !d.sawUsage {
		return nil
	}
	u := d.usage
	return &u
}
