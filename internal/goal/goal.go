// Package goal is a session's goal: one long-running objective the agent
// pursues over several turns ("rounds") of the same session.
//
// The state is folded from goal/change events, each of which carries the
// operation and the whole goal after it, so the current goal is the
// latest event's snapshot (Log.Latest, no walk) and Fold replays a log to
// check that every change was a legal transition. A Keeper is one
// session's writer: the model's tools (create_goal, get_goal, update_goal),
// a person's commands through the session host (/goal, dsh run --goal, the
// HTTP API) and the host's round driver all change the goal through it.
//
// Armed: the round driver starts rounds only for a goal armed in the live
// session, that is, created, resumed or re-armed by an event this process
// appended. A resumed or forked session inherits the goal but not the
// arming, so it never starts rounds on its own.
package goal

import (
	"errors"
	"fmt"
	"strings"
)

// Phases of a goal.
const (
	PhaseActive   = "active"
	PhasePaused   = "paused"
	PhaseBlocked  = "blocked"
	PhaseComplete = "complete"
)

// Operations of a goal/change event.
const (
	OpCreate   = "create"
	OpEdit     = "edit"
	OpPause    = "pause"
	OpResume   = "resume"
	OpComplete = "complete"
	OpBlock    = "block"
	// OpArm re-arms an active goal in a resumed or forked session (a
	// person's /goal resume); the phase does not change.
	OpArm = "arm"
	// OpRound records that the driver started a round.
	OpRound = "round"
	OpClear = "clear"
)

// Who made a change.
const (
	ByUser   = "user"   // a person, through a surface
	ByModel  = "model"  // a goal tool call
	ByDriver = "driver" // the host's round driver
)

// DefaultMaxRounds is a goal's round cap when none is given.
const DefaultMaxRounds = 20

// MaxMaxRounds bounds max_goal_rounds.
const MaxMaxRounds = 1000

// MaxObjective bounds an objective in bytes.
const MaxObjective = 16 << 10

// Version is the goal/change payload version.
const Version = 1

// Goal is the state of a session's goal.
type Goal struct {
	ID        string `json:"goalId"`
	Objective string `json:"objective"`
	Phase     string `json:"phase"`
	// Revision counts changes a writer must know about (create is 1;
	// every edit, pause, resume, complete, block adds one); rounds and
	// arming leave it alone, so a round never makes a model's revision
	// stale.
	Revision  int `json:"revision"`
	MaxRounds int `json:"max_goal_rounds"`
	// Rounds is the number of rounds the driver has started.
	Rounds        int    `json:"roundsStarted"`
	BlockedReason string `json:"blockedReason,omitempty"`
	CreatedAt     int64  `json:"createdAt"`
	UpdatedAt     int64  `json:"updatedAt"`
}

// Change is the payload of goal/change.
type Change struct {
	Version   int    `json:"version"`
	Operation string `json:"operation"`
	// Goal is the goal after the change (nil for clear).
	Goal *Goal `json:"goal,omitempty"`
	// Cleared is the id of the goal a clear removed.
	Cleared string `json:"cleared,omitempty"`
	By      string `json:"by"`
	// CallID is the tool call that made a model's change.
	CallID string `json:"callId,omitempty"`
	// Reason explains a pause, block or clear (also kept as the
	// blocked reason).
	Reason string `json:"reason,omitempty"`
	// Armed says whether the goal is armed after this change, in the
	// process that appended it (see the package comment); a reader in
	// another process ignores it for events before its live part.
	Armed bool `json:"armed,omitempty"`
}

// Error codes.
const (
	CodeNotFound          = "GOAL_NOT_FOUND"
	CodeExists            = "GOAL_EXISTS"
	CodeStaleRevision     = "GOAL_STALE_REVISION"
	CodeNotAuthorized     = "GOAL_NOT_AUTHORIZED"
	CodeInvalidAction     = "GOAL_INVALID_ACTION"
	CodeInvalidTransition = "GOAL_INVALID_TRANSITION"
	CodeInvalidArgument   = "GOAL_INVALID_ARGUMENT"
	CodeCapReached        = "GOAL_CAP_REACHED"
	CodeUnavailable       = "GOAL_UNAVAILABLE"
)

// Error is a refused goal operation with a stable code; Message is fit
// for the model and for a person.
type Error struct {
	Code    string
	Message string
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

func errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// CodeOf returns the code of a goal *Error in err's chain, else "".
func CodeOf(err error) string {
	var ge *Error
	if errors.As(err, &ge) {
		return ge.Code
	}
	return ""
}

// Apply checks that c is a legal change of cur (nil: no goal) and returns
// the goal after it (nil after a clear). It is the one transition rule:
// the Keeper checks every change it appends with it and Fold replays a log
// through it.
func Apply(cur *Goal, c Change) (*Goal, error) {
	if c.Operation == OpClear {
		if cur == nil {
			return nil, errorf(CodeNotFound, "there is no goal to clear")
		}
		if c.Cleared != cur.ID {
			return nil, errorf(CodeInvalidTransition, "clear names goal %q, the goal is %q", c.Cleared, cur.ID)
		}
		if c.Goal != nil {
			return nil, errorf(CodeInvalidTransition, "a clear carries no goal")
		}
		return nil, nil
	}
	next := c.Goal
	if next == nil {
		return nil, errorf(CodeInvalidTransition, "%s carries no goal", c.Operation)
	}
	if err := next.valid(); err != nil {
		return nil, err
	}
	if c.Operation == OpCreate {
		if cur != nil && cur.Phase != PhaseComplete {
			return nil, errorf(CodeExists, "goal %s is %s; complete or clear it before creating another", cur.ID, cur.Phase)
		}
		if next.Revision != 1 || next.Rounds != 0 || next.Phase != PhaseActive {
			return nil, errorf(CodeInvalidTransition, "a new goal starts active at revision 1 with no rounds")
		}
		return next, nil
	}
	if cur == nil {
		return nil, errorf(CodeNotFound, "there is no goal")
	}
	if next.ID != cur.ID || next.CreatedAt != cur.CreatedAt {
		return nil, errorf(CodeInvalidTransition, "%s changes the goal's identity", c.Operation)
	}
	from, to := cur.Phase, next.Phase
	bump := true
	var ok bool
	switch c.Operation {
	case OpEdit:
		ok = from != PhaseComplete && to == from
	case OpPause:
		ok = from == PhaseActive && to == PhasePaused
	case OpResume:
		ok = (from == PhasePaused || from == PhaseBlocked) && to == PhaseActive
	case OpComplete:
		ok = from != PhaseComplete && to == PhaseComplete
	case OpBlock:
		ok = (from == PhaseActive || from == PhasePaused) && to == PhaseBlocked && next.BlockedReason != ""
	case OpArm:
		ok, bump = from == PhaseActive && to == PhaseActive, false
	case OpRound:
		ok, bump = from == PhaseActive && to == PhaseActive && next.Rounds == cur.Rounds+1, false
	default:
		return nil, errorf(CodeInvalidAction, "unknown goal operation %q", c.Operation)
	}
	if !ok {
		return nil, errorf(CodeInvalidTransition, "cannot %s a goal that is %s (to %s)", c.Operation, from, to)
	}
	want := cur.Revision
	if bump {
		want++
	}
	if next.Revision != want {
		return nil, errorf(CodeInvalidTransition, "%s must leave the goal at revision %d, not %d", c.Operation, want, next.Revision)
	}
	if c.Operation != OpRound && next.Rounds != cur.Rounds {
		return nil, errorf(CodeInvalidTransition, "only a round changes the round count")
	}
	if c.Operation != OpEdit && (next.Objective != cur.Objective || next.MaxRounds != cur.MaxRounds) {
		return nil, errorf(CodeInvalidTransition, "only an edit changes the objective or the round cap")
	}
	return next, nil
}

// valid checks a goal's own invariants.
func (g *Goal) valid() error {
	switch {
	case g.ID == "":
		return errorf(CodeInvalidTransition, "the goal has no id")
	case strings.TrimSpace(g.Objective) == "":
		return errorf(CodeInvalidArgument, "the objective is empty")
	case len(g.Objective) > MaxObjective:
		return errorf(CodeInvalidArgument, "the objective has %d bytes, at most %d are allowed", len(g.Objective), MaxObjective)
	case g.MaxRounds < 1 || g.MaxRounds > MaxMaxRounds:
		return errorf(CodeInvalidArgument, "max_goal_rounds is %d; it must be between 1 and %d", g.MaxRounds, MaxMaxRounds)
	case g.Rounds < 0 || g.Rounds > g.MaxRounds:
		return errorf(CodeInvalidTransition, "%d rounds started, outside 0..%d", g.Rounds, g.MaxRounds)
	case g.Revision < 1:
		return errorf(CodeInvalidTransition, "revision %d", g.Revision)
	}
	switch g.Phase {
	case PhaseActive, PhasePaused, PhaseComplete:
		if g.BlockedReason != "" {
			return errorf(CodeInvalidTransition, "a %s goal has no blocked reason", g.Phase)
		}
	case PhaseBlocked:
		if g.BlockedReason == "" {
			return errorf(CodeInvalidTransition, "a blocked goal needs a reason")
		}
	default:
		return errorf(CodeInvalidTransition, "unknown phase %q", g.Phase)
	}
	return nil
}

// clone returns a copy of g (nil for nil).
func (g *Goal) clone() *Goal {
	if g == nil {
		return nil
	}
	c := *g
	return &c
}
