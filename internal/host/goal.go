package host

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/dsh-dev/dsh/internal/agent"
	"github.com/dsh-dev/dsh/internal/goal"
	"github.com/dsh-dev/dsh/internal/session"
	"github.com/dsh-dev/dsh/internal/subagent"
)

// Goal actions of SetGoal.
const (
	GoalCreate   = "create"
	GoalPause    = "pause"
	GoalResume   = "resume"
	GoalComplete = "complete"
	GoalClear    = "clear"
)

// GoalRequest is a person's goal command (/goal, dsh run --goal, the
// HTTP API).
type GoalRequest struct {
	// Action is GoalCreate, GoalPause, GoalResume (which also re-arms the
	// goal of a resumed or forked session), GoalComplete or GoalClear.
	Action string `json:"action"`
	// Objective is the goal of a create.
	Objective string `json:"objective,omitempty"`
	// MaxRounds is a create's round cap (0: goal.DefaultMaxRounds).
	MaxRounds int `json:"maxRounds,omitempty"`
	// Reason explains a pause or a clear.
	Reason string `json:"reason,omitempty"`
}

// Goal returns the goal state of session id; a session that is not live
// is folded from its stored log (and is never armed).
func (h *Host) Goal(ctx context.Context, id string) (goal.State, error) {
	full, err := h.resolve(ctx, id)
	if err != nil {
		return goal.State{}, err
	}
	if e, _ := h.lookup(full); e != nil {
		st, err := e.sess.Goals.State()
		return st, classify(err)
	}
	events, err := h.app.Store.ReadFrom(ctx, full, 0)
	if err != nil {
		return goal.State{}, classify(err)
	}
	g, err := goal.Fold(events)
	return goal.State{Goal: g}, classify(err)
}

// SetGoal carries out a person's goal command on session id (resumed on
// demand). A create or resume arms the goal: when the session is idle its
// next round starts at once, otherwise when its current run ends. Refused
// commands are *Error with the goal's code (GOAL_EXISTS, GOAL_NOT_FOUND,
// GOAL_INVALID_TRANSITION…).
func (h *Host) SetGoal(ctx context.Context, id string, r GoalRequest) (goal.State, error) {
	full, err := h.resolve(ctx, id)
	if err != nil {
		return goal.State{}, err
	}
	if e, _ := h.lookup(full); e == nil {
		// A subagent child is its parent's to drive (as Send refuses).
		hd, err := h.app.Store.Header(ctx, full)
		if err != nil {
			return goal.State{}, classify(err)
		}
		if hd.Origin == subagent.OriginSubagent {
			return goal.State{}, errorf(CodeInvalidArgument, "session %s is a subagent child: its parent's session drives it", full)
		}
	}
	e, done, err := h.deliverTo(ctx, full)
	if err != nil {
		return goal.State{}, err
	}
	defer done()
	k := e.sess.Goals
	arms := false
	switch r.Action {
	case GoalCreate:
		_, err = k.Create(goal.ByUser, r.Objective, r.MaxRounds, "")
		arms = true
	case GoalPause:
		_, err = k.Update(goal.Update{Action: goal.ActionPause, Reason: r.Reason, By: goal.ByUser})
	case GoalResume:
		_, err = k.Arm(goal.ByUser)
		arms = true
	case GoalComplete:
		_, err = k.Update(goal.Update{Action: goal.ActionComplete, By: goal.ByUser})
	case GoalClear:
		err = k.Clear(goal.ByUser, r.Reason)
	default:
		return goal.State{}, errorf(CodeInvalidArgument, "goal action %q: want create, pause, resume, complete or clear", r.Action)
	}
	if err != nil {
		return goal.State{}, goalError(err)
	}
	if arms {
		// A person started the rounds: RunUntilIdle reports from here.
		e.noteHuman()
		e.kickGoal()
	}
	if err := e.sess.Log.Flush(ctx); err != nil {
		return goal.State{}, classify(err)
	}
	st, err := k.State()
	return st, classify(err)
}

// goalError keeps a goal error's code as a host error code.
func goalError(err error) error {
	if code := goal.CodeOf(err); code != "" {
		return &Error{Code: code, Err: err}
	}
	return classify(err)
}

// kickGoal starts the next round of an armed goal when the session is
// idle with nothing queued; a busy session starts it when its run ends
// (driveGoal). goalMu makes the two exclusive, so one round starts.
func (e *entry) kickGoal() {
	e.goalMu.Lock()
	ag := e.sess.Agent
	wrote := false
	if nt, ns := ag.Pending(); nt+ns == 0 && !ag.Busy() {
		wrote = e.startRound()
	}
	e.goalMu.Unlock()
	if wrote {
		e.flushGoal()
	}
}

// driveGoal is the goal-round driver, called on the owner goroutine when
// a run has ended and before RunUntilIdle hears of it (so a round it
// queues keeps that wait going). After a normal end it starts the next
// round of an armed active goal (or blocks the goal at its round cap);
// a round a person cancelled, or one that failed, pauses the goal; a
// session being disposed or shut down is left alone (resuming it
// disarms the goal anyway).
func (e *entry) driveGoal(out agent.Outcome) {
	k := e.sess.Goals
	switch out.Reason.Kind {
	case session.EndCompleted, session.EndMaxTokens:
	case session.EndAborted:
		if out.Reason.Cause == "disposed" || out.Reason.Cause == "shutdown" || e.ctx.Err() != nil {
			return
		}
		e.interruptGoal(k, "the round was cancelled ("+out.Reason.Cause+")")
		return
	default:
		why := "the round ended " + out.Reason.Kind
		if out.Reason.Failure != nil {
			why += ": " + out.Reason.Failure.Error()
		}
		e.interruptGoal(k, why)
		return
	}
	e.goalMu.Lock()
	wrote := false
	// Queued input runs first; its run's end comes back here.
	if nt, ns := e.sess.Agent.Pending(); nt+ns == 0 {
		wrote = e.startRound()
	}
	e.goalMu.Unlock()
	if wrote {
		e.flushGoal()
	}
}

// flushGoal makes what the driver logged durable, as a Send's message is
// once accepted: a round or the cap's block survives a crash right after.
func (e *entry) flushGoal() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := e.sess.Log.Flush(ctx); err != nil {
		fmt.Fprintf(os.Stderr, "dsh: session %s: flush goal: %v\n", e.id, err)
	}
}

func (e *entry) interruptGoal(k *goal.Keeper, why string) {
	paused, err := k.Interrupt(why)
	if err != nil {
		fmt.Fprintf(os.Stderr, "dsh: session %s: pause goal: %v\n", e.id, err)
	}
	if paused {
		e.flushGoal()
	}
}

// startRound logs and queues the next round, if the goal wants one, and
// reports whether it logged anything (the caller flushes it once goalMu,
// held here, is released).
func (e *entry) startRound() bool {
	before := e.sess.Log.Len()
	msg, ok, err := e.sess.Goals.NextRound()
	wrote := e.sess.Log.Len() != before // a round, or the block at the cap
	if err != nil {
		fmt.Fprintf(os.Stderr, "dsh: session %s: goal round: %v\n", e.id, err)
		return wrote
	}
	if !ok {
		return wrote
	}
	if err := e.sess.Agent.Queue(msg); err != nil {
		fmt.Fprintf(os.Stderr, "dsh: session %s: queue goal round: %v\n", e.id, err)
	}
	return wrote
}
