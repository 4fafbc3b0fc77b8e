package tui

import (
	"context"
	"fmt"
	"strings"

	tea "charm.land/bubbletea/v2"

	"github.com/dsh-dev/dsh/internal/goal"
	"github.com/dsh-dev/dsh/internal/host"
	"github.com/dsh-dev/dsh/internal/session"
)

// goalCommand runs /goal: alone it shows the goal; "pause", "resume",
// "complete" and "clear" act on it; any other text creates (and arms) a
// goal with that objective. The host logs every change as goal/change,
// which the transcript then shows.
func (m *model) goalCommand(arg string) tea.Cmd {
	b, ctx, id := m.b, m.ctx, m.id
	req := host.GoalRequest{Action: host.GoalCreate, Objective: arg}
	switch strings.ToLower(arg) {
	case "":
		return func() tea.Msg {
			st, err := b.Goal(ctx, id)
			if err != nil {
				return doneMsg{err: err}
			}
			return doneMsg{notice: goalText(st)}
		}
	case host.GoalPause, host.GoalResume, host.GoalComplete, host.GoalClear:
		req = host.GoalRequest{Action: strings.ToLower(arg)}
	}
	return func() tea.Msg {
		if _, err := b.SetGoal(ctx, id, req); err != nil {
			return doneMsg{err: fmt.Errorf("/goal: %w", err)}
		}
		return doneMsg{}
	}
}

// goalText describes a goal state for /goal.
func goalText(st goal.State) string {
	g := st.Goal
	if g == nil {
		return "no goal (/goal OBJECTIVE starts one)"
	}
	s := fmt.Sprintf("goal %s: %s\n%s, round %d of %d, revision %d", shortID(g.ID), g.Objective, g.Phase, g.Rounds, g.MaxRounds, g.Revision)
	if g.BlockedReason != "" {
		s += ": " + g.BlockedReason
	}
	switch {
	case g.Phase == goal.PhaseActive && !st.Armed:
		s += "\nnot armed here (a resumed or forked session): /goal resume starts its rounds"
	case g.Phase == goal.PhasePaused || g.Phase == goal.PhaseBlocked:
		s += "\n/goal resume continues it"
	}
	return s
}

// goalChange is the transcript line of a goal/change event (rounds are
// shown by their own user message).
func goalChange(e session.Event) []block {
	var c goal.Change
	if e.Decode(&c) != nil || c.Operation == goal.OpRound {
		return nil
	}
	text := "goal " + c.Operation
	switch c.Operation {
	case goal.OpClear:
		text = "goal cleared"
	case goal.OpCreate:
		text = fmt.Sprintf("goal set: %s (up to %d rounds)", c.Goal.Objective, c.Goal.MaxRounds)
	case goal.OpComplete:
		text = "goal complete"
	case goal.OpBlock:
		text = "goal blocked: " + c.Goal.BlockedReason
	case goal.OpPause, goal.OpResume, goal.OpArm, goal.OpEdit:
		text = map[string]string{goal.OpPause: "goal paused", goal.OpResume: "goal resumed", goal.OpArm: "goal re-armed", goal.OpEdit: "goal edited: " + c.Goal.Objective}[c.Operation]
	}
	if c.Reason != "" && c.Operation != goal.OpBlock {
		text += ": " + c.Reason
	}
	if c.By != "" {
		text += " (by " + c.By + ")"
	}
	return []block{{kind: bNotice, text: text}}
}

func (b *hostBackend) Goal(ctx context.Context, id string) (goal.State, error) {
	return b.h.Goal(ctx, id)
}

func (b *hostBackend) SetGoal(ctx context.Context, id string, r host.GoalRequest) (goal.State, error) {
	return b.h.SetGoal(ctx, id, r)
}

func (b *attachBackend) Goal(ctx context.Context, id string) (goal.State, error) {
	var st goal.State
	err := b.call(ctx, "GET", sessionPath(id, "/goal"), nil, nil, &st)
	return st, err
}

func (b *attachBackend) SetGoal(ctx context.Context, id string, r host.GoalRequest) (goal.State, error) {
	var st goal.State
	err := b.call(ctx, "POST", sessionPath(id, "/goal"), nil, r, &st)
	return st, err
}
