package cli

import (
	"fmt"

	"github.com/dsh-dev/dsh/internal/goal"
	"github.com/dsh-dev/dsh/internal/ralph"
	"github.com/dsh-dev/dsh/internal/session"
)

// goalLine is the transcript line of a goal/change or ralph/round event
// ("" for a goal round, which its user message shows).
func goalLine(e session.Event) string {
	if e.Type == session.TypeRalphRound {
		var r ralph.Round
		if e.Decode(&r) != nil {
			return ""
		}
		state := "not done"
		switch {
		case r.StopReason != "completed":
			state = "stopped: " + r.StopReason
		case r.Done:
			state = "done"
		}
		return fmt.Sprintf("[ralph] round %d/%d %s (session %s): %s\n", r.Round, r.MaxRounds, state, r.ChildID, indent(r.Summary))
	}
	var c goal.Change
	if e.Decode(&c) != nil || c.Operation == goal.OpRound {
		return ""
	}
	what := c.Operation
	if g := c.Goal; g != nil {
		what += fmt.Sprintf(": %s [%s, round %d/%d, revision %d]", g.Objective, g.Phase, g.Rounds, g.MaxRounds, g.Revision)
	}
	if c.Reason != "" {
		what += " — " + c.Reason
	}
	return fmt.Sprintf("[goal] %s (by %s)\n", indent(what), c.By)
}
