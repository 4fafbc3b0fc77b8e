package compaction

import (
	"context"
	"errors"

	"github.com/dsh-dev/dsh/internal/agent"
	"github.com/dsh-dev/dsh/internal/llm"
)

// PreStep is an agent pre-step hook (register it in agent.Hooks.PreStep):
// when the estimated size of the next request, counting the step's
// entering messages, reaches Threshold × window, it compacts the logged
// history first. The entering messages are returned untouched; they are
// logged after the summary and so stay verbatim.
//
// A failed summary call is logged in compaction/end and the step goes on
// uncompacted, so the hook returns an error only when ctx is cancelled or
// the log cannot be written. It never rejects a step.
func (c *Compactor) PreStep(ctx context.Context, in agent.PreStep) ([]llm.Message, bool, error) {
	w := c.Window()
	if w <= 0 || float64(c.Estimate(in.Messages)) < c.opts.Threshold*float64(w) {
		return in.Messages, false, nil
	}
	turn := in.Turn
	_, err := c.compact(ctx, ReasonPressure, &turn, false)
	if ctx.Err() != nil {
		return nil, false, context.Cause(ctx)
	}
	var fail *llm.Failure
	if err != nil && !errors.As(err, &fail) && !errors.Is(err, errSurfaceChanged) {
		return nil, false, err
	}
	return in.Messages, false, nil
}

// RequestError is an agent request-error hook (register it in
// agent.Hooks.RequestError): when the provider reports
// CONTEXT_WINDOW_EXCEEDED it compacts once, keeping only the shortest
// valid verbatim tail (the estimate has just proven wrong), and asks for
// a retry. Each step gets at most one such retry, and none when nothing
// could be shadowed or the summary call failed.
func (c *Compactor) RequestError(ctx context.Context, in agent.RequestError) bool {
	if in.Failure == nil || in.Failure.Code != llm.CodeContextWindowExceeded || ctx.Err() != nil {
		return false
	}
	key := stepKey{turn: in.Turn, step: in.Step, set: true}
	c.mu.Lock()
	used := c.overflow == key
	c.overflow = key
	c.mu.Unlock()
	if used {
		return false
	}
	turn := in.Turn
	res, err := c.compact(ctx, ReasonOverflow, &turn, true)
	return err == nil && res.Compacted
}
