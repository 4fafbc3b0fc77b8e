// Package agent runs the turn/step loop of one agent over its session log.
//
// A turn is zero or more steps; a step is one model request plus the tool
// calls it asked for. Input waits in an inbox: Queue adds a prompt for a
// later turn, Steer adds input for the next step (and is how a running
// turn is redirected), Inject adds model-facing context for the next step
// without waking an idle agent. Everything the loop does is appended to
// the session log, and the model's history is derived from that log only.
package agent

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/dsh-dev/dsh/internal/llm"
	"github.com/dsh-dev/dsh/internal/session"
	"github.com/dsh-dev/dsh/internal/tool"
)

// Route binds the model the agent talks to.
type Route struct {
	// Provider is the provider id ("deepseek", "openai", …).
	Provider string
	Model    llm.ModelInfo
	Adapter  llm.Adapter
	Retry    llm.RetryPolicy
	// Effort and MaxTokens are sent on every request when set.
	Effort    llm.Effort
	MaxTokens int
}

// Hooks are the loop's live extension points. Each list runs in order.
type Hooks struct {
	// PreStep may reject a step (the turn ends blocked) or add messages
	// to those entering it. Return the messages to enter.
	PreStep []func(ctx context.Context, in PreStep) (enter []llm.Message, reject bool, err error)
	// Request may change the call configuration of a step.
	Request []func(ctx context.Context, cfg *session.CallConfig)
	// RequestError runs when a model call failed, before the retry
	// policy; a listener returning true retries the call at once (it must
	// bound its own retries, e.g. one retry after compacting on
	// CONTEXT_WINDOW_EXCEEDED).
	RequestError []func(ctx context.Context, in RequestError) (retry bool)
	// TurnStopping runs when a turn is about to close; a listener that
	// objects calls Agent.Steer to force another step.
	TurnStopping []func(ctx context.Context, turn int)
}

// PreStep is the input of a pre-step hook.
type PreStep struct {
	Turn, Step int
	Messages   []llm.Message
}

// RequestError is the input of a request-error hook.
type RequestError struct {
	Turn, Step int
	Failure    *llm.Failure
}

// Config wires an agent. Log, Route, Tools and Pipeline are required.
type Config struct {
	Log      *session.Log
	Route    Route
	Tools    *tool.Registry
	Pipeline *tool.Pipeline
	// Scope is the agent's tool scope ("" = global tools only).
	Scope string
	// System is the system prompt.
	System string
	// MaxParallel bounds overlapping concurrency-safe tool calls (default 10).
	MaxParallel int
	Hooks       Hooks
	// Sleep waits before a retry; tests replace it. Default: a timer that
	// honours ctx.
	Sleep func(ctx context.Context, d time.Duration) error
}

// Outcome summarises the last finished turn.
type Outcome struct {
	Turn   int
	Reason session.TurnEndReason
	// Text is the final assistant text of the turn.
	Text  string
	Usage llm.Usage
}

// Errors returned by the agent.
var (
	ErrBusy = errors.New("agent is already running")
)

// Agent is one agent bound to one session log. Its methods are safe for
// concurrent use; at most one Run is active at a time.
type Agent struct {
	cfg   Config
	log   *session.Log
	inbox inbox

	mu         sync.Mutex
	running    bool                    // guarded by mu
	cancelTurn context.CancelCauseFunc // guarded by mu
	turn       int                     // guarded by mu; last turn number used
	headerSent bool                    // a request/header was logged by this instance
	lastHeader []byte
	// lastInputs is what lastHeader was encoded from by this instance,
	// so an unchanged header is recognised without encoding it again.
	lastInputs *session.RequestHeaderData
	// prepared is the header PrepareHeader encoded ahead of the first
	// call; that call uses it when its inputs are the same.
	prepared *preparedHeader
	// encoded keeps the adapter's encoding of the history between this
	// instance's requests, so a step does not re-encode what the model
	// already read.
	encoded llm.EncodeCache
	lastCtx session.RequestContext
	resumed bool

	// wake is signalled by waking input (Queue, Steer) for Serve.
	wake chan struct{}

	seedOnce    sync.Once
	needSeedEnd bool
	seedErr     error
}

// CancelCause is the cause attached to a cancelled turn.
type CancelCause struct{ Kind string }

func (c *CancelCause) Error() string { return "turn cancelled by " + c.Kind }

// New returns an agent over cfg.Log. When the log already holds events
// (a resumed session), turn numbering continues, queued input is
// restored and the next request logs request/header {reason: resume}.
func New(cfg Config) (*Agent, error) {
	if cfg.Log == nil || cfg.Route.Adapter == nil || cfg.Tools == nil || cfg.Pipeline == nil {
		return nil, errors.New("agent: Log, Route.Adapter, Tools and Pipeline are required")
	}
	if cfg.MaxParallel <= 0 {
		cfg.MaxParallel = 10
	}
	if cfg.Sleep == nil {
		cfg.Sleep = sleep
	}
	a := &Agent{cfg: cfg, log: cfg.Log, wake: make(chan struct{}, 1)}
	a.inbox.log = cfg.Log
	view := cfg.Log.View()
	if view.Len() > 0 {
		a.resumed = true
		a.inbox.restore(view)
		for e := range view.All() {
			switch e.Type {
			case session.TypeTurnStart:
				var p session.TurnStart
				if e.Decode(&p) == nil && p.Turn > a.turn {
					a.turn = p.Turn
				}
			case session.TypeRequestHeader:
				var p session.RequestHeader
				if e.Decode(&p) == nil {
					a.lastHeader, _ = json.Marshal(p.Header)
				}
			case session.TypeRequestContext:
				_ = e.Decode(&a.lastCtx)
			}
		}
		// A resumed log needs session/end-seed as its first live write,
		// unless the seed ends with one or one was written since (by the
		// code that opened the log).
		first := cfg.Log.FirstLiveSeq()
		a.needSeedEnd = first > 0 && first <= view.Len() && view.At(first-1).Type != session.TypeEndSeed
		for e := range view.From(first) {
			if e.Type == session.TypeEndSeed {
				a.needSeedEnd = false
			}
		}
	}
	return a, nil
}

// goLive appends session/end-seed as the first live write of a resumed
// session. It is deferred to the first write so observers attached after
// New see it.
func (a *Agent) goLive() error {
	a.seedOnce.Do(func() {
		if a.needSeedEnd {
			_, a.seedErr = a.log.Append(session.TypeEndSeed, struct{}{})
		}
	})
	return a.seedErr
}

// Log returns the agent's session log.
func (a *Agent) Log() *session.Log { return a.log }

// NewUserMessage builds a human prompt message.
func NewUserMessage(text string) llm.Message {
	return llm.Message{ID: newID(), Role: llm.RoleUser, Content: []llm.Block{llm.TextBlock(text)}, Source: llm.Source{Kind: "user"}}
}

// Queue adds msg as the prompt of a later turn.
func (a *Agent) Queue(msg llm.Message) error { return a.push(session.TargetNextTurn, msg, true) }

// Steer adds msg to the next step of the running turn (an idle agent
// starts a turn with it on the next Run).
func (a *Agent) Steer(msg llm.Message) error { return a.push(session.TargetNextStep, msg, true) }

// Inject adds model-facing context to the next step without waking an
// idle agent.
func (a *Agent) Inject(msg llm.Message) error { return a.push(session.TargetNextStep, msg, false) }

func (a *Agent) push(target string, msg llm.Message, wake bool) error {
	if err := a.goLive(); err != nil {
		return err
	}
	if err := a.inbox.push(target, msg); err != nil {
		return err
	}
	if wake {
		select {
		case a.wake <- struct{}{}:
		default: // a wake is already pending
		}
	}
	return nil
}

// Serve drives the agent as a long-lived service: whenever waking input
// arrives (Queue or Steer) it runs turns until the inbox is empty, then
// waits again. Injected context waits for the next wake. onIdle, when
// non-nil, receives each run's outcome. Serve returns when ctx ends or a
// run fails to write the log.
func (a *Agent) Serve(ctx context.Context, onIdle func(Outcome)) error {
	for {
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-a.wake:
		}
		if nt, ns := a.inbox.pending(); nt == 0 && ns == 0 {
			continue
		}
		out, err := a.Run(ctx)
		if err != nil {
			return err
		}
		if onIdle != nil {
			onIdle(out)
		}
	}
}

// Wake makes Serve look at the inbox again without adding input: a run
// that stopped on an aborted or failed turn leaves later input queued,
// and a driver that wants it run (the session host) wakes the agent.
func (a *Agent) Wake() {
	select {
	case a.wake <- struct{}{}:
	default: // a wake is already pending
	}
}

// Busy reports whether a turn is running.
func (a *Agent) Busy() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.running
}

// Pending reports the queued next-turn and next-step counts.
func (a *Agent) Pending() (nextTurn, nextStep int) { return a.inbox.pending() }

// Cancel aborts the running turn with the given cause ("user", "parent",
// "hook", "disposed"). Unless keepInbox, queued input is discarded. A
// cancel of an idle agent only clears the inbox.
func (a *Agent) Cancel(cause string, keepInbox bool) error {
	a.mu.Lock()
	cancel := a.cancelTurn
	a.mu.Unlock()
	if cancel != nil {
		cancel(&CancelCause{Kind: cause})
	}
	if !keepInbox {
		if err := a.goLive(); err != nil {
			return err
		}
		return a.inbox.clear()
	}
	return nil
}

// Run drives turns until the inbox is empty and returns the outcome of
// the last turn. ctx cancellation aborts the running turn (cause "user")
// and keeps queued input. A turn that ends in error is reported in the
// Outcome, not as an error; err is reserved for failures to log.
func (a *Agent) Run(ctx context.Context) (Outcome, error) {
	a.mu.Lock()
	if a.running {
		a.mu.Unlock()
		return Outcome{}, ErrBusy
	}
	a.running = true
	a.mu.Unlock()
	defer func() {
		a.mu.Lock()
		a.running = false
		a.mu.Unlock()
	}()
	if err := a.goLive(); err != nil {
		return Outcome{}, err
	}
	var last Outcome
	ran := false
	for {
		nt, ns := a.inbox.pending()
		if nt == 0 && ns == 0 {
			break
		}
		out, err := a.runTurn(ctx)
		if err != nil {
			return out, err
		}
		last, ran = out, true
		if out.Reason.Kind != session.EndCompleted && out.Reason.Kind != session.EndMaxTokens {
			break
		}
	}
	if !ran {
		return Outcome{Turn: a.turn, Reason: session.TurnEndReason{Kind: session.EndCompleted}}, nil
	}
	// Make the closed turn durable before reporting it.
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	return last, a.log.Flush(fctx)
}

func (a *Agent) runTurn(parent context.Context) (out Outcome, err error) {
	ctx, cancel := context.WithCancelCause(parent)
	a.mu.Lock()
	a.turn++
	turn := a.turn
	a.cancelTurn = cancel
	a.mu.Unlock()
	defer func() {
		a.mu.Lock()
		a.cancelTurn = nil
		a.mu.Unlock()
		cancel(nil)
	}()
	out.Turn = turn
	if _, err := a.log.Append(session.TypeTurnStart, session.TurnStart{Turn: turn}); err != nil {
		return out, err
	}
	var reason *session.TurnEndReason
	boundary := true
	for step := 1; ; step++ {
		took, refused, err := a.inbox.claim(boundary, a.checkSize)
		if err != nil {
			return out, err
		}
		if refused != nil {
			// Before the hooks, so that nothing (not even a compaction's
			// summary call) is requested for input that cannot fit.
			reason = &session.TurnEndReason{Kind: session.EndError, Failure: refused}
			break
		}
		enter, reject, err := a.preStep(ctx, turn, step, took.messages())
		if err != nil {
			reason = a.failReason(ctx, err)
			break
		}
		if reject {
			reason = &session.TurnEndReason{Kind: session.EndBlocked}
			break
		}
		if step == 1 && len(enter) == 0 {
			reason = &session.TurnEndReason{Kind: session.EndCompleted}
			break
		}
		sr, err := a.runStep(ctx, turn, step, enter, took, &out)
		if err != nil && !isLLMOrCancel(err) {
			return out, err
		}
		switch {
		case err != nil:
			reason = a.failReason(ctx, err)
		case sr.maxTokens:
			reason = &session.TurnEndReason{Kind: session.EndMaxTokens}
		case sr.done && (reason == nil || reason.Kind != session.EndMaxTokens):
			reason = &session.TurnEndReason{Kind: session.EndCompleted}
		}
		if err != nil {
			break
		}
		if reason != nil {
			if _, ns := a.inbox.pending(); ns == 0 {
				for _, h := range a.cfg.Hooks.TurnStopping {
					h(ctx, turn)
				}
			}
			if _, ns := a.inbox.pending(); ns == 0 {
				break
			}
		}
		boundary = false
	}
	if ctx.Err() != nil && (reason == nil || reason.Kind == session.EndCompleted) {
		reason = a.failReason(ctx, context.Cause(ctx))
	}
	out.Reason = *reason
	if _, err := a.log.Append(session.TypeTurnEnd, session.TurnEnd{Turn: turn, Reason: *reason}); err != nil {
		return out, err
	}
	return out, nil
}

// checkSize refuses entering messages that cannot fit the model's context
// window even with the whole history compacted away (compaction keeps
// them verbatim).
func (a *Agent) checkSize(enter []llm.Message) *llm.Failure {
	return llm.CheckPromptSize(a.cfg.Route.Model.ContextWindow, enter)
}

func (a *Agent) preStep(ctx context.Context, turn, step int, msgs []llm.Message) ([]llm.Message, bool, error) {
	for _, h := range a.cfg.Hooks.PreStep {
		enter, reject, err := h(ctx, PreStep{Turn: turn, Step: step, Messages: msgs})
		if err != nil || reject {
			return nil, reject, err
		}
		msgs = enter
	}
	return msgs, false, nil
}

// failReason turns a step error into a turn/end reason: cancellation is
// aborted with its cause, anything else an error with its failure.
func (a *Agent) failReason(ctx context.Context, err error) *session.TurnEndReason {
	if ctx.Err() != nil {
		cause := "user"
		var cc *CancelCause
		if errors.As(context.Cause(ctx), &cc) {
			cause = cc.Kind
		}
		return &session.TurnEndReason{Kind: session.EndAborted, Cause: cause}
	}
	return errorReason(err)
}

func errorReason(err error) *session.TurnEndReason {
	return &session.TurnEndReason{Kind: session.EndError, Failure: llm.AsFailure(err)}
}

// stepErr marks errors that end the turn (model failures, cancellation)
// as opposed to failures to write the log, which end Run.
type stepErr struct{ err error }

func (e *stepErr) Error() string { return e.err.Error() }
func (e *stepErr) Unwrap() error { return e.err }

func isLLMOrCancel(err error) bool {
	var se *stepErr
	return errors.As(err, &se)
}

func newID() string {
	id, err := uuid.NewV7()
	if err != nil {
		return uuid.NewString()
	}
	return id.String()
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}
