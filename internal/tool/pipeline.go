package tool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/dsh-dev/dsh/internal/llm"
)

// Error codes produced by the pipeline itself (the shared ones live in
// tool.go).
const (
	// CodePanic marks a call during which a hook or the body panicked.
	CodePanic = "TOOL_PANIC"
	// CodePersistenceFailed marks a call whose body was not run because
	// the session log could not be made durable first.
	CodePersistenceFailed = "PERSISTENCE_FAILED"
)

// DefaultTimeout is the time limit of a call to a tool whose
// Definition.Timeout is zero, unless Pipeline.SetDefaultTimeout changed
// it. Every call runs under a limit, so no tool can hang a turn for ever;
// two minutes is far beyond any file or search operation, and tools that
// legitimately run longer (bash, delegations, waits) declare their own.
const DefaultTimeout = 2 * time.Minute

// defaultAbandonGrace is how long the pipeline keeps waiting for a body
// after its context ended (timeout or caller cancel). Well-behaved bodies
// return quickly with whatever partial result they have (the bash tool
// needs its kill grace, 2 s by default, to reap the process group); a body
// that ignores its context is abandoned after this so that one stuck tool
// cannot wedge the agent loop.
const defaultAbandonGrace = 5 * time.Second

// Bounds on text the pipeline copies into model-facing messages, so that a
// huge argument string or panic value cannot flood the context window.
const (
	argExcerptLen  = 200
	panicValueLen  = 200
	panicStackLen  = 4096
	maxListedTools = 50
)

// errTimeout is the cancellation cause of the time-limit context,
// used to tell a per-tool timeout from a caller cancel.
var errTimeout = errors.New("tool timeout")

// chain is one immutable snapshot of the pipeline's middleware. Use*
// replace the snapshot (copy on write) so that Run reads it with a single
// atomic load and a call never sees a half-updated set.
type chain struct {
	pre       []PreExecute
	guards    []Guard
	exec      []ExecuteWrapper
	post      []PostExecute
	observers []Observer
	approver  Approver
	// defaultTimeout replaces DefaultTimeout when positive; timeouts
	// override Definition.Timeout per tool name.
	defaultTimeout time.Duration
	timeouts       map[string]time.Duration
}

// Pipeline runs tool calls through policy, dispatch and post-processing.
// It is safe for concurrent use, including registering middleware while
// calls run (a running call keeps the middleware it started with).
type Pipeline struct {
	reg *Registry
	mu  sync.Mutex // serialises writers of cur
	cur atomic.Pointer[chain]
	// abandonGrace is defaultAbandonGrace; tests shorten it.
	abandonGrace time.Duration
}

// NewPipeline returns a pipeline dispatching to the tools in reg, with no
// middleware and no approval service.
func NewPipeline(reg *Registry) *Pipeline {
	p := &Pipeline{reg: reg, abandonGrace: defaultAbandonGrace}
	p.cur.Store(&chain{})
	return p
}

func (p *Pipeline) update(f func(*chain)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	next := *p.cur.Load()
	f(&next)
	p.cur.Store(&next)
}

// UsePreExecute appends tools/pre-execute middleware; the first registered
// runs first.
func (p *Pipeline) UsePreExecute(m PreExecute) {
	p.update(func(c *chain) { c.pre = append(slices.Clip(c.pre), m) })
}

// UseGuard appends a deny-only guard, checked after pre-execute.
func (p *Pipeline) UseGuard(g Guard) {
	p.update(func(c *chain) { c.guards = append(slices.Clip(c.guards), g) })
}

// UseExecute appends a tools/execute wrapper; the first registered is the
// outermost. The built-in time limit (see callBody) sits inside all of
// them, so wrappers observe timeouts as results.
func (p *Pipeline) UseExecute(w ExecuteWrapper) {
	p.update(func(c *chain) { c.exec = append(slices.Clip(c.exec), w) })
}

// SetDefaultTimeout sets the limit of calls to tools whose
// Definition.Timeout is zero; d <= 0 restores DefaultTimeout.
func (p *Pipeline) SetDefaultTimeout(d time.Duration) {
	p.update(func(c *chain) { c.defaultTimeout = max(d, 0) })
}

// SetToolTimeout overrides the limit of the named tool (its
// Definition.Timeout), for configuration; d <= 0 removes the override.
func (p *Pipeline) SetToolTimeout(name string, d time.Duration) {
	p.update(func(c *chain) {
		m := make(map[string]time.Duration, len(c.timeouts)+1)
		for k, v := range c.timeouts {
			m[k] = v
		}
		if d > 0 {
			m[name] = d
		} else {
			delete(m, name)
		}
		c.timeouts = m
	})
}

// Timeout returns the limit a call to def runs under: an override set
// with SetToolTimeout, else def.Timeout, else the default.
func (p *Pipeline) Timeout(def *Definition) time.Duration {
	return p.cur.Load().limit(def)
}

func (c *chain) limit(def *Definition) time.Duration {
	if d, ok := c.timeouts[def.Name]; ok {
		return d
	}
	if def.Timeout > 0 {
		return def.Timeout
	}
	if c.defaultTimeout > 0 {
		return c.defaultTimeout
	}
	return DefaultTimeout
}

// UsePostExecute appends tools/post-execute middleware, run in
// registration order until one blocks.
func (p *Pipeline) UsePostExecute(m PostExecute) {
	p.update(func(c *chain) { c.post = append(slices.Clip(c.post), m) })
}

// Observe appends a tools/result observer. Observers see every final
// result; a panicking observer is ignored.
func (p *Pipeline) Observe(o Observer) {
	p.update(func(c *chain) { c.observers = append(slices.Clip(c.observers), o) })
}

// SetApprover installs the approval service for ask decisions; nil means
// none, so every ask is denied.
func (p *Pipeline) SetApprover(a Approver) {
	p.update(func(c *chain) { c.approver = a })
}

// Run executes one call and always returns a result: tool failures,
// policy verdicts and panics all become isError results, never Go errors.
// c.Arguments is filled from c.RawArguments unless already set.
func (p *Pipeline) Run(ctx context.Context, c *Call) (res Result) {
	// Last resort only (nil call, nil registry): every stage below has its
	// own recover with better attribution.
	defer func() {
		if v := recover(); v != nil {
			name := ""
			if c != nil {
				name = c.Name
			}
			res = Failure(panicError(name, "pipeline", v))
		}
	}()
	if c == nil {
		return Failure(Errorf(CodeFailed, "nil tool call"))
	}
	ch := p.cur.Load()
	if def, ok := p.reg.Lookup(c.Scope, c.Name); ok {
		res = p.run(ctx, ch, def, c)
		res = finalize(def, c, res)
	} else {
		res = p.unknown(c)
	}
	for _, o := range ch.observers {
		observe(o, c, res)
	}
	return res
}

// run is everything between lookup and finalize.
func (p *Pipeline) run(ctx context.Context, ch *chain, def *Definition, c *Call) (res Result) {
	stage := "pre-execute"
	defer func() {
		if v := recover(); v != nil {
			res = Failure(panicError(c.Name, stage, v))
		}
	}()
	if c.Arguments == nil {
		args, bad := parseArguments(c.Name, c.RawArguments)
		if bad != nil {
			return Failure(bad)
		}
		c.Arguments = args
	}
	if r, stop := p.admit(ctx, ch, c, &stage); stop {
		return r
	}
	// Do not start side effects for a call whose turn is already being
	// torn down.
	if ctx.Err() != nil {
		return Failure(abortedError())
	}
	if c.Flush != nil {
		stage = "flush"
		if err := c.Flush(ctx); err != nil {
			return Failure(&Error{
				Name:    "ToolError",
				Code:    CodePersistenceFailed,
				Message: fmt.Sprintf("the session log could not be saved, so tool %s was not run", c.Name),
				Reason:  err.Error(),
			})
		}
	}
	stage = "execute"
	res, fromBody := p.execute(ctx, ch, def, c)
	if fromBody && def.ProjectContent != nil {
		stage = "project-content"
		if blocks := def.ProjectContent(c, res); blocks != nil {
			res.Content = blocks
		}
	}
	stage = "post-execute"
	for _, m := range ch.post {
		d := m(ctx, c, res)
		if d.Kind == Block {
			return blocked(res, d.Feedback)
		}
		if d.Content != nil {
			res.Content = d.Content
		}
	}
	return res
}

// admit runs pre-execute, approval and guards; stop reports a verdict
// other than "run the call".
func (p *Pipeline) admit(ctx context.Context, ch *chain, c *Call, stage *string) (Result, bool) {
	d := Decision{Kind: Allow}
	if len(ch.pre) > 0 {
		d = preDecision(ctx, ch.pre, c)
	}
	switch d.Kind {
	case Allow:
	case Deny:
		return Failure(denyError(d)), true
	case Cancel:
		return Failure(abortedError()), true
	case Ask:
		*stage = "approval"
		if r, stop := approve(ctx, ch.approver, c, d); stop {
			return r, true
		}
	default:
		// Fail closed: a policy that returns garbage must not run tools.
		return Failure(Errorf(CodeDenied, "tool call denied: invalid policy decision %q", d.Kind)), true
	}
	*stage = "guard"
	for _, g := range ch.guards {
		if reason := g(c); reason != "" {
			return Failure(&Error{Name: "ToolError", Code: CodeDenied, Message: reason}), true
		}
	}
	return Result{}, false
}

// preDecision runs the pre-execute waterfall; the terminal default is
// allow.
func preDecision(ctx context.Context, mws []PreExecute, c *Call) Decision {
	var step func(i int) func(context.Context) Decision
	step = func(i int) func(context.Context) Decision {
		return func(ctx context.Context) Decision {
			if i == len(mws) {
				return Decision{Kind: Allow}
			}
			return mws[i](ctx, c, step(i+1))
		}
	}
	return step(0)(ctx)
}

func denyError(d Decision) *Error {
	e := Error{Name: "ToolError", Code: CodeDenied}
	if d.Info != nil {
		e = *d.Info
		if e.Name == "" {
			e.Name = "ToolError"
		}
		if e.Code == "" {
			e.Code = CodeDenied
		}
	}
	// Decision.Reason is the model-facing text and wins over Info.Message.
	if d.Reason != "" {
		e.Message = d.Reason
	}
	if e.Message == "" {
		e.Message = "tool call denied"
	}
	return &e
}

// approve asks the approval service; only AllowedOnce lets the call
// through (stop == false).
func approve(ctx context.Context, a Approver, c *Call, d Decision) (Result, bool) {
	deny := func(what, reason string) (Result, bool) {
		return Failure(&Error{
			Name:    "ToolError",
			Code:    CodeDenied,
			Message: fmt.Sprintf("tool call to %s was not approved: %s", c.Name, what),
			Reason:  reason,
		}), true
	}
	if a == nil {
		return deny("approval unavailable", "")
	}
	req := ApprovalRequest{
		CallID:    c.ID,
		ToolName:  c.Name,
		Arguments: c.Arguments,
		Reason:    d.Reason,
		Cwd:       c.Cwd,
	}
	var dec ApprovalDecision
	var err error
	if da, ok := a.(DecidingApprover); ok {
		dec, err = da.Decide(ctx, req)
	} else {
		dec.Outcome, err = a.Approve(ctx, req)
	}
	if err != nil {
		if ctx.Err() != nil {
			return Failure(abortedError()), true
		}
		return deny("approval unavailable", err.Error())
	}
	why := ""
	if dec.Reason != "" {
		why = ": " + dec.Reason
	}
	switch dec.Outcome {
	case AllowedOnce:
		return Result{}, false
	case Rejected:
		if dec.By == "" {
			return deny("rejected by user"+why, "")
		}
		return deny("rejected by "+dec.By+why, "")
	case Cancelled:
		return deny("approval cancelled", "")
	case Unavailable:
		return deny("approval unavailable"+why, "")
	default:
		return deny(fmt.Sprintf("unexpected approval outcome %q", dec.Outcome), "")
	}
}

// execute runs the execute wrappers around the body. fromBody reports
// whether the result is one the body itself returned, which is what
// ProjectContent applies to.
func (p *Pipeline) execute(ctx context.Context, ch *chain, def *Definition, c *Call) (res Result, fromBody bool) {
	next := func(ctx context.Context) (Result, error) {
		o := p.callBody(ctx, ch.limit(def), def, c)
		fromBody = o.returned
		return o.r, o.err
	}
	for i := len(ch.exec) - 1; i >= 0; i-- {
		w, inner := ch.exec[i], next
		next = func(ctx context.Context) (Result, error) { return w(ctx, c, inner) }
	}
	r, err := next(ctx)
	if err != nil {
		return failure(err), fromBody
	}
	return r, fromBody
}

// failure is Failure that also finds an *Error wrapped by a wrapper
// (fmt.Errorf("...: %w", err)), so the stable code survives.
func failure(err error) Result {
	var te *Error
	if errors.As(err, &te) {
		return Failure(te)
	}
	return Failure(err)
}

// bodyOut is what one body invocation produced. returned is false when the
// pipeline synthesised the outcome (panic, timeout, abandonment).
type bodyOut struct {
	r        Result
	err      error
	returned bool
}

// callBody runs the body under limit, on its own goroutine so that a
// body ignoring its context can be abandoned: when the limit passes (or
// the caller cancels) the body's context ends and the body gets
// abandonGrace to return what it has; after that the call ends with
// TOOL_TIMEOUT (or TOOL_ABORTED) all the same. An abandoned body keeps
// running until it returns by itself, and whatever it then returns is
// discarded: nothing reads its buffered channel.
func (p *Pipeline) callBody(ctx context.Context, limit time.Duration, def *Definition, c *Call) bodyOut {
	bctx, cancel := context.WithTimeoutCause(ctx, limit, errTimeout)
	defer cancel()
	done := make(chan bodyOut, 1) // buffered: an abandoned body must not block forever
	go func() { done <- safeBody(bctx, def, c) }()
	var o bodyOut
	select {
	case o = <-done:
	case <-bctx.Done():
		t := time.NewTimer(p.abandonGrace)
		select {
		case o = <-done:
			t.Stop()
		case <-t.C:
			return bodyOut{r: Failure(interruptError(def, limit, bctx))}
		}
	}
	if !o.returned {
		return o
	}
	// A body that returned a Result after its context ended chose what to
	// report (partial output, its own timeout text) and is trusted; a bare
	// Go error then is almost always ctx.Err() and is replaced by the
	// canonical timeout or abort result.
	if o.err != nil && bctx.Err() != nil && !isInterruptError(o.err) {
		return bodyOut{r: Failure(interruptError(def, limit, bctx))}
	}
	return o
}

// safeBody calls Execute, turning a panic into a TOOL_PANIC error.
func safeBody(ctx context.Context, def *Definition, c *Call) (o bodyOut) {
	defer func() {
		if v := recover(); v != nil {
			o = bodyOut{err: panicError(def.Name, "", v)}
		}
	}()
	r, err := def.Execute(ctx, c)
	return bodyOut{r: r, err: err, returned: true}
}

func interruptError(def *Definition, limit time.Duration, bctx context.Context) *Error {
	if context.Cause(bctx) == errTimeout {
		return Errorf(CodeTimeout, "tool %s timed out after %s", def.Name, limit)
	}
	return abortedError()
}

func isInterruptError(err error) bool {
	var te *Error
	return errors.As(err, &te) && (te.Code == CodeTimeout || te.Code == CodeAborted)
}

func abortedError() *Error { return Errorf(CodeAborted, "tool call cancelled") }

// blocked turns res into the error result of a post-execute block. The
// feedback replaces the content; metadata and staged context survive.
func blocked(res Result, feedback []llm.Block) Result {
	var msg strings.Builder
	for _, b := range feedback {
		if b.Type == llm.BlockText {
			msg.WriteString(b.Text)
		}
	}
	if len(feedback) == 0 {
		feedback = []llm.Block{llm.TextBlock("Error: the tool result was blocked by policy")}
	}
	if msg.Len() == 0 {
		msg.WriteString("the tool result was blocked by policy")
	}
	res.Content = feedback
	res.IsError = true
	res.Error = &Error{Name: "ToolError", Code: CodeBlocked, Message: msg.String()}
	return res
}

// finalize runs FinalizeContent exactly once; nil keeps the content.
func finalize(def *Definition, c *Call, res Result) (out Result) {
	if def.FinalizeContent == nil {
		return res
	}
	defer func() {
		if v := recover(); v != nil {
			out = Failure(panicError(c.Name, "finalize-content", v))
		}
	}()
	if blocks := def.FinalizeContent(c, res); blocks != nil {
		res.Content = blocks
	}
	return res
}

// observe calls one observer; observers cannot change the outcome, so a
// panic is contained and dropped.
func observe(o Observer, c *Call, r Result) {
	defer func() { _ = recover() }()
	o(c, r)
}

func (p *Pipeline) unknown(c *Call) Result {
	if err := p.reg.Explain(c.Name); err != nil {
		return Failure(err)
	}
	names := p.reg.Names(c.Scope)
	list := "none"
	if len(names) > 0 {
		shown := names[:min(len(names), maxListedTools)]
		list = strings.Join(shown, ", ")
		if len(names) > len(shown) {
			list += fmt.Sprintf(", … (%d more)", len(names)-len(shown))
		}
	}
	return Failure(Errorf(CodeUnknownTool, "unknown tool %s; available tools: %s", excerpt(c.Name, argExcerptLen), list))
}

// parseArguments validates the model's raw argument string: "" (or only
// whitespace) is the empty object, anything else must be one JSON object.
func parseArguments(name, raw string) (json.RawMessage, *Error) {
	trimmed := strings.TrimSpace(raw)
	if trimmed == "" {
		return json.RawMessage{'{', '}'}, nil
	}
	b := []byte(raw)
	if !json.Valid(b) {
		var v any
		why := "invalid JSON"
		if err := json.Unmarshal(b, &v); err != nil {
			why = err.Error()
		}
		return nil, Errorf(CodeInvalidArgs,
			"the arguments for tool %s were not valid JSON (%s); resend the call with the arguments as one JSON object. Received: %s",
			name, why, excerpt(raw, argExcerptLen))
	}
	if trimmed[0] != '{' {
		return nil, Errorf(CodeInvalidArgs,
			"the arguments for tool %s were not a JSON object; resend the call with the arguments as one JSON object. Received: %s",
			name, excerpt(raw, argExcerptLen))
	}
	return json.RawMessage(b), nil
}

// panicError describes a recovered panic: a short model-facing message and
// the stack as user-facing Reason (kept out of model content).
func panicError(name, stage string, v any) *Error {
	where := ""
	if stage != "" {
		where = " in " + stage
	}
	val := excerpt(fmt.Sprint(v), panicValueLen)
	stack := debug.Stack()
	if len(stack) > panicStackLen {
		stack = stack[:panicStackLen]
	}
	return &Error{
		Name:    "ToolError",
		Code:    CodePanic,
		Message: fmt.Sprintf("tool %s panicked%s: %s", name, where, val),
		Reason:  fmt.Sprintf("panic: %v\n\n%s", val, stack),
	}
}

// excerpt bounds s to about n bytes without splitting a UTF-8 sequence.
func excerpt(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return fmt.Sprintf("%s… (%d bytes in all)", s[:cut], len(s))
}
