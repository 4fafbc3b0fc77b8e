package subagent

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/dsh-dev/dsh/internal/agent"
	"github.com/dsh-dev/dsh/internal/llm"
	"github.com/dsh-dev/dsh/internal/permission"
	"github.com/dsh-dev/dsh/internal/session"
	"github.com/dsh-dev/dsh/internal/tool"
)

// Names of the in-process providers.
const (
	ProviderSpawn = "spawn"
	ProviderFork  = "fork"
)

// SourceParent is the message source kind of a delegation prompt: the
// child's task comes from its direct parent, which the auto reviewer
// treats like a human instruction.
const SourceParent = "parent"

// Factory creates in-process children; the composition root implements
// it (see the package documentation for what it must do).
type Factory interface {
	NewChild(ctx context.Context, spec ChildSpec) (Child, error)
}

// ChildSpec is what a factory builds a child from.
type ChildSpec struct {
	// Parent is the delegating session's log.
	Parent *session.Log
	// Depth is the child's delegation depth (header DelegationDepth).
	Depth int
	// Seed is the fork seed: the leading events of the child's log, and
	// its header's SeedLength. Nil for a fresh (spawned) child; a fork of
	// a parent with no completed turn has an empty, non-nil seed.
	Seed []session.Event
	// Label is display metadata.
	Label string
	// Provider, Model and Effort select the route; "" is the parent's.
	Provider, Model, Effort string
	// Tools restricts the child's global tools.
	Tools ToolFilter
	// Persona, when set, replaces the child's persona.
	Persona string
	// ExtraTools are registered for the child whatever Tools says.
	ExtraTools []tool.Definition
	// Permission is the parent's permission state captured at start; the
	// factory applies it with ApplyPermission.
	Permission permission.State
}

// Child is a created, idle child.
type Child interface {
	ID() string
	Log() *session.Log
	Agent() *agent.Agent
	// Close releases the child; it is called once, after the run ended.
	Close() error
}

// Spawn returns the "spawn" provider: a fresh child with empty history.
func Spawn(f Factory) Provider { return &inProcess{name: ProviderSpawn, factory: f} }

// Fork returns the "fork" provider: a child seeded with the parent's
// completed turns (see ForkSeed).
func Fork(f Factory) Provider { return &inProcess{name: ProviderFork, factory: f, fork: true} }

// ForkSeed returns the prefix of a parent's events up to and including
// its last turn/end: only balanced, completed turns, never the in-flight
// one. It is empty (not nil) when no turn has ended yet.
func ForkSeed(events []session.Event) []session.Event {
	for i := len(events) - 1; i >= 0; i-- {
		if events[i].Type == session.TypeTurnEnd {
			return append([]session.Event(nil), events[:i+1]...)
		}
	}
	return []session.Event{}
}

// inProcess is the shared driver of spawn and fork.
type inProcess struct {
	name    string
	fork    bool
	factory Factory
}

func (p *inProcess) Name() string { return p.name }

func (p *inProcess) Capabilities() Capabilities {
	return Capabilities{OutputSchema: true, MaxDepth: true, ToolFilter: true, Persona: true, InheritsContext: p.fork}
}

func (p *inProcess) Start(ctx context.Context, req Request) (Run, error) {
	if err := ctx.Err(); err != nil {
		return nil, context.Cause(ctx)
	}
	spec := ChildSpec{
		Parent: req.Parent, Depth: req.Depth, Label: req.Label,
		Provider: req.Provider, Model: req.Model, Effort: req.Effort,
		Tools: req.Tools, Persona: req.Persona, Permission: req.Permission,
	}
	if p.fork {
		// A fork's seed is the parent's whole log, payloads included.
		parent, err := req.Parent.Read(ctx, 0, -1)
		if err != nil {
			return nil, fmt.Errorf("fork: %w", err)
		}
		spec.Seed = ForkSeed(parent)
	}
	var capt *capture
	if len(req.OutputSchema) > 0 {
		var err error
		if capt, err = newCapture(req.OutputSchema); err != nil {
			return nil, errorf(CodeInvalidRequest, "outputSchema: %v", err)
		}
		spec.ExtraTools = []tool.Definition{capt.definition()}
	}
	child, err := p.factory.NewChild(ctx, spec)
	if err != nil {
		return nil, fmt.Errorf("create subagent: %w", err)
	}
	if err := CheckChild(spec, child); err != nil {
		return nil, errors.Join(err, child.Close())
	}
	r := &inProcessRun{child: child, seedLen: len(spec.Seed), capture: capt, done: make(chan struct{})}
	if capt != nil {
		capt.bind(child.Log(), r.seedLen)
	}
	if err := p.prepare(child, req, capt); err != nil {
		return nil, errors.Join(err, child.Close())
	}
	// The child outlives neither its parent's ctx (cause "parent") nor
	// Dispose (cause "disposed"); WithoutCancel lets the two causes be
	// told apart.
	runCtx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	stop := context.AfterFunc(ctx, func() { cancel(&agent.CancelCause{Kind: "parent"}) })
	r.cancel = func(cause error) {
		stop()
		cancel(cause)
	}
	go r.drive(runCtx)
	return r, nil
}

// prepare records the child's identity and queues its task.
func (p *inProcess) prepare(child Child, req Request, capt *capture) error {
	log, ag := child.Log(), child.Agent()
	if _, err := log.Append(session.TypeSubagentDescriptor, Descriptor{
		Version: DescriptorVersion, Mode: ModeOneShot, Provider: p.name, Label: req.Label,
	}); err != nil {
		return err
	}
	// A fork seed can end with input the parent had queued for later
	// turns; the agent restores it from the seed, and the child must not
	// run the parent's pending prompts as its own.
	if nt, ns := ag.Pending(); nt+ns > 0 {
		if err := ag.Cancel("parent", false); err != nil {
			return err
		}
	}
	content := append([]llm.Block(nil), req.Prompt...)
	if capt != nil {
		content = append(content, llm.TextBlock(structuredInstruction))
	}
	return ag.Queue(llm.Message{
		ID: newID(), Role: llm.RoleUser, Content: content,
		Source: llm.Source{Kind: SourceParent, Form: "delegation"},
	})
}

// inProcessRun drives one child agent to completion.
type inProcessRun struct {
	child   Child
	seedLen int
	capture *capture
	cancel  context.CancelCauseFunc

	done chan struct{}
	res  Result
	err  error

	disposeOnce sync.Once
	disposeErr  error
}

func (r *inProcessRun) ChildID() string { return r.child.ID() }

func (r *inProcessRun) Wait(ctx context.Context) (Result, error) {
	select {
	case <-r.done:
		return r.res, r.err
	case <-ctx.Done():
		return Result{}, context.Cause(ctx)
	}
}

func (r *inProcessRun) Dispose() error {
	r.disposeOnce.Do(func() {
		r.cancel(&agent.CancelCause{Kind: "disposed"})
		<-r.done
		r.disposeErr = r.child.Close()
	})
	return r.disposeErr
}

func (r *inProcessRun) drive(ctx context.Context) {
	defer close(r.done)
	// Release the run context (and the parent watch) as soon as the run
	// is over, even if the caller never disposes.
	defer r.cancel(nil)
	ag := r.child.Agent()
	out, err := ag.Run(ctx)
	if err == nil && r.capture != nil && out.Reason.Kind == session.EndCompleted && !r.capture.committed() {
		// One reminder: a model that answered in prose usually calls the
		// tool when told plainly; a second refusal is a failure.
		if err = ag.Steer(llm.Message{
			ID: newID(), Role: llm.RoleUser, Content: []llm.Block{llm.TextBlock(structuredReminder)},
			Source: llm.Source{Kind: "plugin", Plugin: "subagent", Form: "reminder"},
		}); err == nil {
			out, err = ag.Run(ctx)
		}
	}
	r.res, r.err = r.result(out), err
}

// result reads the outcome from the child's own events (those after the
// seed), which cover every turn of the run, not just the last Outcome.
func (r *inProcessRun) result(out agent.Outcome) Result {
	events := r.child.Log().Events()
	own := events[min(r.seedLen, len(events)):]
	res := Result{ChildID: r.child.ID(), Output: finalOutput(own), Usage: totalUsage(own)}
	res.StopReason, res.Diagnostic = stopReason(out.Reason)
	if r.capture != nil {
		v, lastErr := r.capture.value(own)
		switch {
		case v != nil:
			res.Structured = v
		case res.StopReason == StopCompleted:
			res.StopReason = StopError
			res.Diagnostic = "no result was reported through " + StructuredOutputTool
			if lastErr != "" {
				res.Diagnostic += "; the last attempt was rejected: " + lastErr
			}
		}
	}
	res.Diagnostic = clip(res.Diagnostic, MaxDiagnostic)
	return res
}

// stopReason maps a turn/end reason to a stop reason and diagnostic. A
// diagnostic is detail, not a sentence about "the subagent": consumers
// prefix it with their own wording.
func stopReason(r session.TurnEndReason) (string, string) {
	switch r.Kind {
	case session.EndCompleted:
		return StopCompleted, ""
	case session.EndMaxTokens:
		return StopMaxTokens, "the output token limit was reached"
	case session.EndAborted, session.EndInterrupted:
		cause := r.Cause
		if cause == "" {
			cause = "unknown"
		}
		return StopAborted, "cause: " + cause
	case session.EndBlocked:
		return StopError, "the turn was blocked before its model call"
	}
	if r.Failure != nil {
		return StopError, r.Failure.Error()
	}
	return StopError, "the turn ended with " + r.Kind
}

// finalOutput is the text of the last assistant message with non-empty
// text, else the text streamed so far (a turn cut off before its message
// was assembled), else nothing.
func finalOutput(events []session.Event) []llm.Block {
	var streamed []byte
	for i := len(events) - 1; i >= 0; i-- {
		e := events[i]
		if e.Type != session.TypeAssistantMsg {
			continue
		}
		var am session.AssistantMessage
		if e.Decode(&am) != nil {
			continue
		}
		var out []llm.Block
		for _, b := range am.Message.Content {
			if b.Type == llm.BlockText && b.Text != "" {
				out = append(out, b)
			}
		}
		if len(out) > 0 {
			return out
		}
	}
	for _, e := range events {
		if e.Type != session.TypeAssistantChunk {
			continue
		}
		var c session.AssistantChunk
		if e.Decode(&c) == nil && c.Chunk.Type == llm.ChunkTextDelta {
			streamed = append(streamed, c.Chunk.Text...)
		}
	}
	if len(streamed) > 0 {
		return []llm.Block{llm.TextBlock(string(streamed))}
	}
	return nil
}

func totalUsage(events []session.Event) llm.Usage {
	var u llm.Usage
	for _, e := range events {
		if e.Type != session.TypeAssistantMsg {
			continue
		}
		var am session.AssistantMessage
		if e.Decode(&am) == nil && am.Usage != nil {
			u.Add(*am.Usage)
		}
	}
	return u
}
