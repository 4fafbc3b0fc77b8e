package tui

import (
	"strings"
	"testing"

	"github.com/dsh-dev/dsh/internal/goal"
	"github.com/dsh-dev/dsh/internal/host"
	"github.com/dsh-dev/dsh/internal/session"
)

// TestGoalCommand: /goal TEXT creates a goal, /goal pause|resume|clear
// act on it; the goal's changes and rounds show in the transcript.
func TestGoalCommand(t *testing.T) {
	h := newHarness(t, 100, 24)
	for _, line := range []string{"/goal make the tests pass", "/goal pause", "/goal resume", "/goal clear"} {
		h.typeText(line)
		h.key("enter")
	}
	want := []host.GoalRequest{
		{Action: host.GoalCreate, Objective: "make the tests pass"},
		{Action: host.GoalPause}, {Action: host.GoalResume}, {Action: host.GoalClear},
	}
	if len(h.b.goals) != len(want) {
		t.Fatalf("goal requests %+v", h.b.goals)
	}
	for i := range want {
		if h.b.goals[i] != want[i] {
			t.Errorf("request %d: %+v, want %+v", i, h.b.goals[i], want[i])
		}
	}
	g := &goal.Goal{ID: "01a2-goal", Objective: "make the tests pass", Phase: goal.PhaseActive, Revision: 1, MaxRounds: 20}
	h.ev(session.TypeGoalChange, goal.Change{Version: 1, Operation: goal.OpCreate, Goal: g, By: goal.ByUser, Armed: true})
	h.ev(session.TypeTurnStart, session.TurnStart{Turn: 1})
	h.ev(session.TypeUserMessage, goal.RoundMessage(goal.Goal{ID: g.ID, Objective: g.Objective, Revision: 1, MaxRounds: 20, Rounds: 1}))
	blocked := *g
	blocked.Phase, blocked.BlockedReason, blocked.Revision = goal.PhaseBlocked, "round cap reached", 2
	h.ev(session.TypeGoalChange, goal.Change{Version: 1, Operation: goal.OpBlock, Goal: &blocked, By: goal.ByDriver})
	tr := h.transcript()
	for _, s := range []string{"goal set: make the tests pass (up to 20 rounds) (by user)", "── goal round 1 ──", "goal blocked: round cap reached (by driver)"} {
		if !strings.Contains(tr, s) {
			t.Errorf("transcript lacks %q:\n%s", s, tr)
		}
	}
	if strings.Contains(tr, "[Goal round 1 of 20]") {
		t.Error("the round prompt is shown as the person's message")
	}
	if got := goalText(goal.State{Goal: &blocked}); !strings.Contains(got, "blocked, round 0 of 20") || !strings.Contains(got, "/goal resume") {
		t.Errorf("status text %q", got)
	}
}
