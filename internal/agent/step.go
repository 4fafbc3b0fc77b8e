package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"

	"github.com/dsh-dev/dsh/internal/llm"
	"github.com/dsh-dev/dsh/internal/session"
)

type stepResult struct {
	done      bool // the model stopped calling tools (or a tool concluded the turn)
	maxTokens bool
}

// runStep logs step/start, the entering messages, the model call and its
// tool calls, then step/end (always, once step/start was logged). An
// entering message taken unchanged from the inbox is logged as a
// reference to the splice that queued it, so it is stored once.
func (a *Agent) runStep(ctx context.Context, turn, step int, enter []llm.Message, took claimed, out *Outcome) (sr stepResult, err error) {
	if _, err := a.log.Append(session.TypeStepStart, session.StepRef{Turn: turn, Step: step}); err != nil {
		return sr, err
	}
	defer func() {
		if _, e := a.log.Append(session.TypeStepEnd, session.StepRef{Turn: turn, Step: step}); e != nil && err == nil {
			err = e
		}
	}()
	for _, m := range enter {
		opts := []session.AppendOption{session.Surface()}
		if ref, ok := took.ref(m); ok {
			opts = append(opts, session.FromInbox(ref))
		}
		if _, err := a.log.Append(session.TypeUserMessage, m, opts...); err != nil {
			return sr, err
		}
	}
	msg, finish, err := a.callModel(ctx, turn, step, out)
	if err != nil {
		return sr, err
	}
	if finish == llm.FinishMaxTokens {
		sr.maxTokens = true
		return sr, nil
	}
	calls := msg.ToolCalls()
	if len(calls) == 0 {
		sr.done = true
		return sr, nil
	}
	concluded, err := a.runTools(ctx, turn, step, calls)
	if err != nil {
		return sr, err
	}
	sr.done = concluded
	return sr, nil
}

// callModel makes one model call, retrying transient failures inside the
// open step, and logs every chunk and the resulting assistant/message.
func (a *Agent) callModel(ctx context.Context, turn, step int, out *Outcome) (llm.Message, llm.FinishReason, error) {
	cfg := a.callConfig()
	for _, h := range a.cfg.Hooks.Request {
		h(ctx, &cfg)
	}
	tools := a.cfg.Tools.Schemas(a.cfg.Scope)
	if err := a.logRequestHeader(cfg, tools); err != nil {
		return llm.Message{}, "", err
	}
	for attempt := 0; ; attempt++ {
		// Everything the request is built from must be durable first.
		if err := a.log.Flush(ctx); err != nil {
			if ctx.Err() != nil {
				// The turn was cancelled while the log was being written:
				// that ends the turn (aborted), not the run; what is
				// pending is flushed when Run returns.
				return llm.Message{}, "", &stepErr{context.Cause(ctx)}
			}
			return llm.Message{}, "", err
		}
		req := llm.Request{
			Model:       cfg.Model,
			System:      a.cfg.System,
			Messages:    a.log.History(),
			Tools:       tools,
			Effort:      cfg.Effort,
			MaxTokens:   cfg.MaxTokens,
			Temperature: cfg.Temperature,
			SessionID:   a.log.ID(),
			EncodeCache: &a.encoded,
		}
		msg, finish, fail, err := a.stream(ctx, turn, step, cfg, req, out)
		if err != nil {
			return msg, finish, err
		}
		if fail == nil {
			return msg, finish, nil
		}
		if ctx.Err() != nil {
			return msg, finish, &stepErr{context.Cause(ctx)}
		}
		if a.hookRetry(ctx, turn, step, fail) {
			attempt--
			continue
		}
		delay, ok := a.cfg.Route.Retry.Delay(attempt+1, fail)
		if !ok {
			return msg, finish, &stepErr{fail}
		}
		retryID := newID()
		if _, err := a.log.Append(session.TypeLLMRetry, session.LLMRetry{
			RetryID: retryID, Turn: turn, Step: step, Provider: cfg.Provider, Mode: "normal",
			Retry: attempt + 1, MaxRetries: a.cfg.Route.Retry.MaxRetries, DelayMs: delay.Milliseconds(), Failure: fail,
		}); err != nil {
			return msg, finish, err
		}
		if err := a.cfg.Sleep(ctx, delay); err != nil {
			return msg, finish, &stepErr{err}
		}
		if _, err := a.log.Append(session.TypeLLMRetryStart, session.LLMRetryStarted{RetryID: retryID, Turn: turn, Step: step, Retry: attempt + 1}); err != nil {
			return msg, finish, err
		}
	}
}

// stream runs one attempt. fail is the model failure of an unsuccessful
// attempt; err is a failure to log (or a cancellation after the visible
// prefix was kept).
func (a *Agent) stream(ctx context.Context, turn, step int, cfg session.CallConfig, req llm.Request, out *Outcome) (msg llm.Message, finish llm.FinishReason, fail *llm.Failure, err error) {
	var asm llm.Assembler
	var seqs []int64
	for ch, serr := range a.cfg.Route.Adapter.Stream(ctx, req) {
		if serr != nil {
			fail = llm.AsFailure(serr)
			break
		}
		e, err := a.log.Append(session.TypeAssistantChunk, session.AssistantChunk{Turn: turn, Step: step, Chunk: ch})
		if err != nil {
			return msg, "", nil, err
		}
		seqs = append(seqs, e.Seq)
		asm.Add(ch)
	}
	source := llm.Source{Kind: "model", Provider: cfg.Provider, Model: cfg.Model}
	if ctx.Err() != nil {
		// Keep what the user saw so the next request contains it.
		if blocks := asm.InterruptedBlocks(); len(blocks) > 0 {
			msg = llm.Message{ID: newID(), Role: llm.RoleAssistant, Content: blocks, Source: source}
			if _, err := a.log.Append(session.TypeAssistantMsg, session.AssistantMessage{
				Turn: turn, Step: step, Message: msg, Interrupted: true,
			}, session.Surface(seqs...)); err != nil {
				return msg, "", nil, err
			}
			out.Text = msg.Text()
		}
		return msg, llm.FinishAborted, nil, &stepErr{context.Cause(ctx)}
	}
	if fail == nil {
		f := asm.Finish()
		switch {
		case f == nil:
			fail = &llm.Failure{Code: llm.CodeStreamClosed, Message: "stream ended without a finish"}
		case f.Reason == llm.FinishError || f.Reason == llm.FinishAborted:
			fail = f.Failure
			if fail == nil {
				fail = &llm.Failure{Code: llm.CodeUnknown, Message: "model call finished with " + string(f.Reason)}
			}
		}
	}
	if fail != nil {
		return msg, "", fail, nil
	}
	finish = asm.Finish().Reason
	msg = llm.Message{ID: newID(), Role: llm.RoleAssistant, Content: asm.Blocks(), Source: source}
	if msg.Content == nil {
		msg.Content = []llm.Block{}
	}
	am := session.AssistantMessage{Turn: turn, Step: step, Message: msg}
	if u, ok := asm.Usage(); ok {
		am.Usage = &u
		out.Usage.Add(u)
	}
	if _, err := a.log.Append(session.TypeAssistantMsg, am, session.Surface(seqs...)); err != nil {
		return msg, "", nil, err
	}
	if t := msg.Text(); t != "" || len(msg.ToolCalls()) == 0 {
		out.Text = t
	}
	return msg, finish, nil, nil
}

// callConfig is a call's configuration before the request hooks.
func (a *Agent) callConfig() session.CallConfig {
	return session.CallConfig{
		Provider:  a.cfg.Route.Provider,
		Model:     a.cfg.Route.Model.ID,
		Effort:    a.cfg.Route.Effort,
		MaxTokens: a.cfg.Route.MaxTokens,
	}
}

// preparedHeader is a request header encoded ahead of its call.
type preparedHeader struct {
	inputs session.RequestHeaderData
	raw    []byte
}

// PrepareHeader encodes now the request header the first model call
// will log, if nothing changes it before then: dsh calls it while a new
// session is still being stored, so that the ~40 KB encoding is not on
// the way to the first request. The call uses it only for inputs equal
// to these (the same check that spares later steps the encoding); a
// request hook or a tool registered in between costs nothing but this
// encoding. It must be called before the agent runs.
func (a *Agent) PrepareHeader() {
	h := session.RequestHeaderData{Config: a.callConfig(), System: a.cfg.System, Tools: a.cfg.Tools.Schemas(a.cfg.Scope)}
	raw, err := json.Marshal(h)
	if err != nil {
		return // the call will report it
	}
	h.Tools = slices.Clone(h.Tools)
	a.prepared = &preparedHeader{inputs: h, raw: raw}
}

// logRequestHeader appends request/header on the first request of this
// agent instance and whenever the header changes, and request/context
// when the route changes.
func (a *Agent) logRequestHeader(cfg session.CallConfig, tools []llm.ToolSchema) error {
	h := session.RequestHeaderData{Config: cfg, System: a.cfg.System, Tools: tools}
	if a.headerSent && a.lastInputs != nil && sameHeader(*a.lastInputs, h) {
		// The same inputs encode to the same bytes: nothing to log,
		// and the ~33 KB header is not encoded again at every step.
		return a.logRequestContext(cfg)
	}
	var raw []byte
	if p := a.prepared; p != nil && sameHeader(p.inputs, h) {
		raw = p.raw
	} else {
		var err error
		if raw, err = json.Marshal(h); err != nil {
			return err
		}
	}
	a.prepared = nil
	// Keep copies: the caller's slice and temperature may be reused.
	h.Tools = slices.Clone(tools)
	if t := h.Config.Temperature; t != nil {
		v := *t
		h.Config.Temperature = &v
	}
	a.lastInputs = &h
	if !a.headerSent || !bytes.Equal(raw, a.lastHeader) {
		reason := "change"
		switch {
		case !a.headerSent && a.resumed:
			reason = "resume"
		case !a.headerSent && a.lastHeader == nil:
			reason = "initial"
		}
		if _, err := a.log.Append(session.TypeRequestHeader, requestHeaderPayload(raw, reason)); err != nil {
			return err
		}
		a.headerSent, a.lastHeader = true, raw
	}
	return a.logRequestContext(cfg)
}

// logRequestContext logs the request's context (route and window) when
// it changed.
func (a *Agent) logRequestContext(cfg session.CallConfig) error {
	rc := session.RequestContext{Provider: cfg.Provider, Model: cfg.Model, ContextWindow: a.cfg.Route.Model.ContextWindow}
	if rc != a.lastCtx {
		if _, err := a.log.Append(session.TypeRequestContext, rc); err != nil {
			return err
		}
		a.lastCtx = rc
	}
	return nil
}

// sameHeader reports whether two request headers hold the same values, so
// that they encode to the same JSON.
func sameHeader(a, b session.RequestHeaderData) bool {
	ca, cb := a.Config, b.Config
	if ca.Provider != cb.Provider || ca.Model != cb.Model || ca.Effort != cb.Effort || ca.MaxTokens != cb.MaxTokens ||
		(ca.Temperature == nil) != (cb.Temperature == nil) || (ca.Temperature != nil && *ca.Temperature != *cb.Temperature) {
		return false
	}
	return a.System == b.System && llm.SameTools(a.Tools, b.Tools)
}

// requestHeaderPayload is the JSON encoding of session.RequestHeader{Header:
// h, Reason: reason} given h's encoding raw, which the change check above
// has just made: the ~33 KB header (system prompt and tool schemas) is not
// encoded a second time before the first request.
func requestHeaderPayload(raw []byte, reason string) json.RawMessage {
	const head, mid = `{"header":`, `,"reason":`
	r, _ := json.Marshal(reason) // a string always encodes
	out := make([]byte, 0, len(head)+len(raw)+len(mid)+len(r)+1)
	out = append(append(append(append(append(out, head...), raw...), mid...), r...), '}')
	return out
}

// hookRetry asks the request-error hooks whether to retry at once.
func (a *Agent) hookRetry(ctx context.Context, turn, step int, fail *llm.Failure) bool {
	for _, h := range a.cfg.Hooks.RequestError {
		if h(ctx, RequestError{Turn: turn, Step: step, Failure: fail}) {
			return true
		}
	}
	return false
}
