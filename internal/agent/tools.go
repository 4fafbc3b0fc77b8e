package agent

import (
	"context"
	"encoding/json"
	"sync"

	"github.com/dsh-dev/dsh/internal/llm"
	"github.com/dsh-dev/dsh/internal/session"
	"github.com/dsh-dev/dsh/internal/tool"
)

// runTools executes the step's tool calls. Consecutive concurrency-safe
// calls overlap in a rolling pool of MaxParallel; any other call runs
// alone. tool/call is logged immediately before a call enters the
// pipeline and tool/result commits in model order. Once ctx is cancelled
// no further call starts: started calls drain and each never-started call
// gets a synthetic ABORTED_BEFORE_DISPATCH pair. It reports whether a
// result concluded the turn.
func (a *Agent) runTools(ctx context.Context, turn, step int, calls []llm.Block) (bool, error) {
	results := make([]tool.Result, len(calls))
	ready := make([]chan struct{}, len(calls))
	committed := make([]chan struct{}, len(calls))
	for i := range ready {
		ready[i] = make(chan struct{})
		committed[i] = make(chan struct{})
	}
	var (
		wg       sync.WaitGroup
		logMu    sync.Mutex // serialises tool/call appends with their start
		logErr   error
		errOnce  sync.Once
		sem      = make(chan struct{}, a.cfg.MaxParallel)
		started  = make([]bool, len(calls))
		commitCh = make(chan error, 1)
	)
	setErr := func(err error) { errOnce.Do(func() { logErr = err }) }

	// The committer appends results in model order as they become ready.
	go func() {
		var err error
		for i := range calls {
			<-ready[i]
			if err != nil {
				close(committed[i])
				continue
			}
			err = a.commitResult(turn, step, calls[i], results[i])
			close(committed[i])
		}
		commitCh <- err
	}()

	start := func(i int) bool {
		logMu.Lock()
		defer logMu.Unlock()
		if ctx.Err() != nil {
			return false
		}
		if _, err := a.log.Append(session.TypeToolCall, session.ToolCall{
			Turn: turn, Step: step, CallID: calls[i].ID, Name: calls[i].Name, Arguments: calls[i].Arguments,
		}); err != nil {
			setErr(err)
			return false
		}
		started[i] = true
		return true
	}
	run := func(i int) {
		results[i] = a.cfg.Pipeline.Run(ctx, a.newCall(turn, step, calls[i]))
		close(ready[i])
	}

	i := 0
	for i < len(calls) {
		if !a.concurrencySafe(calls[i]) {
			wg.Wait()
			if !start(i) {
				break
			}
			run(i)
			// Keep an exclusive call's result adjacent to its call.
			<-committed[i]
			i++
			continue
		}
		// A group of consecutive concurrency-safe calls.
		for i < len(calls) && a.concurrencySafe(calls[i]) {
			sem <- struct{}{}
			if !start(i) {
				<-sem
				goto stop
			}
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				defer func() { <-sem }()
				run(i)
			}(i)
			i++
		}
		wg.Wait()
	}
stop:
	wg.Wait()
	// Calls that never started get a synthetic, logged pair.
	for j := range calls {
		if started[j] {
			continue
		}
		logMu.Lock()
		_, err := a.log.Append(session.TypeToolCall, session.ToolCall{
			Turn: turn, Step: step, CallID: calls[j].ID, Name: calls[j].Name, Arguments: calls[j].Arguments,
		})
		logMu.Unlock()
		if err != nil {
			setErr(err)
		}
		results[j] = tool.Result{
			Content: []llm.Block{llm.TextBlock("Error: tool call aborted before dispatch")},
			IsError: true,
			Error:   &tool.Error{Name: "ToolAbortedError", Code: tool.CodeAbortedBeforeDispatch, Message: "tool call aborted before dispatch"},
		}
		close(ready[j])
	}
	if err := <-commitCh; err != nil {
		setErr(err)
	}
	if logErr != nil {
		return false, logErr
	}
	concluded := false
	for _, r := range results {
		concluded = concluded || r.ConcludesTurn
		for _, m := range r.AdditionalContexts {
			if err := a.Inject(m); err != nil {
				return false, err
			}
		}
	}
	if ctx.Err() != nil {
		return false, &stepErr{context.Cause(ctx)}
	}
	return concluded, nil
}

func (a *Agent) concurrencySafe(c llm.Block) bool {
	def, ok := a.cfg.Tools.Lookup(a.cfg.Scope, c.Name)
	if !ok || def.ConcurrencySafe == nil {
		return false
	}
	args := json.RawMessage(c.Arguments)
	if len(args) == 0 || !json.Valid(args) {
		return false
	}
	return def.ConcurrencySafe(args)
}

func (a *Agent) newCall(turn, step int, c llm.Block) *tool.Call {
	return &tool.Call{
		ID: c.ID, Name: c.Name, RawArguments: c.Arguments,
		Turn: turn, Step: step, SessionID: a.log.ID(), Scope: a.cfg.Scope, Cwd: a.log.Header().Cwd,
		Emit: func(typ string, data any) error {
			_, err := a.log.Append(typ, data)
			return err
		},
		Flush: a.log.Flush,
	}
}

func (a *Agent) commitResult(turn, step int, c llm.Block, r tool.Result) error {
	tr := session.ToolResult{
		Turn: turn, Step: step, CallID: c.ID, Name: c.Name,
		Content: r.Content, IsError: r.IsError, Meta: r.Meta,
	}
	if tr.Content == nil {
		tr.Content = []llm.Block{}
	}
	if r.Error != nil {
		tr.Error = &session.ToolError{Name: r.Error.Name, Code: r.Error.Code, Reason: r.Error.Reason}
	}
	_, err := a.log.Append(session.TypeToolResult, tr, session.Surface())
	return err
}
