package host_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/dsh-dev/dsh/internal/goal"
	"github.com/dsh-dev/dsh/internal/host"
	"github.com/dsh-dev/dsh/internal/llm"
	"github.com/dsh-dev/dsh/internal/llm/llmtest"
	"github.com/dsh-dev/dsh/internal/session"
	"github.com/dsh-dev/dsh/internal/session/sessiontest"
)

// goalRounds returns the goal-sourced user messages of events.
func goalRounds(t *testing.T, events []session.Event) []llm.Source {
	t.Helper()
	var out []llm.Source
	for _, e := range events {
		if e.Type != session.TypeUserMessage {
			continue
		}
		var m llm.Message
		if err := e.Decode(&m); err != nil {
			t.Fatal(err)
		}
		if m.Source.Kind == "goal" {
			out = append(out, m.Source)
		}
	}
	return out
}

func (f *fixture) setGoal(id string, r host.GoalRequest) goal.State {
	f.t.Helper()
	st, err := f.h.SetGoal(f.t.Context(), id, r)
	if err != nil {
		f.t.Fatalf("set goal %+v: %v", r, err)
	}
	return st
}

// TestGoalRoundsStopAtCap: a goal armed through the host runs one round
// per turn (user messages with source kind goal, numbered, with the goal's
// id and revision) and the driver blocks it at its cap of three, logged;
// RunUntilIdle waits for all of it.
func TestGoalRoundsStopAtCap(t *testing.T) {
	f := newFixture(t, host.Config{})
	f.srv.SetFallback(func(llmtest.Request) llmtest.Response { return llmtest.Response{Text: "made some progress"} })
	id := f.create(host.CreateRequest{}).Header.ID
	st := f.setGoal(id, host.GoalRequest{Action: host.GoalCreate, Objective: "port every file", MaxRounds: 3})
	if st.Goal == nil || !st.Armed || st.Goal.Phase != goal.PhaseActive {
		t.Fatalf("after create: %+v", st)
	}
	f.runIdle(id)
	events := f.stored(id)
	if err := sessiontest.Check(events); err != nil {
		t.Fatal(err)
	}
	rounds := goalRounds(t, events)
	if len(rounds) != 3 {
		t.Fatalf("%d rounds, want 3: %+v", len(rounds), rounds)
	}
	for i, r := range rounds {
		if r.Round != i+1 || r.GoalID != st.Goal.ID || r.Revision != 1 {
			t.Errorf("round %d source %+v", i+1, r)
		}
	}
	if n := countType(events, session.TypeTurnEnd); n != 3 {
		t.Errorf("%d turns, want 3", n)
	}
	got, err := f.h.Goal(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	g := got.Goal
	if g.Phase != goal.PhaseBlocked || g.Rounds != 3 || !strings.Contains(g.BlockedReason, "round cap") || got.Armed {
		t.Fatalf("after the cap: %+v armed=%v", g, got.Armed)
	}
	if fg, err := goal.Fold(events); err != nil || fg.Phase != goal.PhaseBlocked {
		t.Fatalf("fold: %+v, %v", fg, err)
	}
	info, err := f.h.Get(t.Context(), id)
	if err != nil || info.Goal == nil || info.Goal.Goal.ID != g.ID {
		t.Fatalf("info goal %+v, %v", info.Goal, err)
	}
	// Resuming a goal at its cap needs a higher cap first.
	if _, err := f.h.SetGoal(t.Context(), id, host.GoalRequest{Action: host.GoalResume}); host.ErrorCode(err) != goal.CodeCapReached {
		t.Fatalf("resume at cap: %v", err)
	}
}

// TestGoalCompletedByModel: the model completes the goal with update_goal
// in round 2 (reading the id and revision from the round message), so no
// third round starts; a stale revision is refused first.
func TestGoalCompletedByModel(t *testing.T) {
	f := newFixture(t, host.Config{})
	var gid string
	f.srv.SetFallback(func(r llmtest.Request) llmtest.Response {
		body := string(r.Body)
		switch {
		case r.ToolResultCount() == 0 && strings.Contains(body, "[Goal round 2 of"):
			stale, _ := json.Marshal(map[string]any{"goal_id": gid, "revision": 7, "action": "complete"})
			done, _ := json.Marshal(map[string]any{"goal_id": gid, "revision": 1, "action": "complete"})
			return llmtest.Response{ToolCalls: []llmtest.ToolCall{
				{Name: "update_goal", Arguments: string(stale)}, {Name: "update_goal", Arguments: string(done)},
			}}
		case r.ToolResultCount() > 0:
			return llmtest.Response{Text: "all done"}
		}
		return llmtest.Response{Text: "round one work"}
	})
	id := f.create(host.CreateRequest{}).Header.ID
	gid = f.setGoal(id, host.GoalRequest{Action: host.GoalCreate, Objective: "fix the build"}).Goal.ID
	f.runIdle(id)
	events := f.stored(id)
	if n := len(goalRounds(t, events)); n != 2 {
		t.Fatalf("%d rounds, want 2", n)
	}
	var codes []string
	for _, e := range events {
		if e.Type == session.TypeToolResult {
			var tr session.ToolResult
			_ = e.Decode(&tr)
			if tr.Error != nil {
				codes = append(codes, tr.Error.Code)
			} else {
				codes = append(codes, "ok")
			}
		}
	}
	if fmt.Sprint(codes) != "[GOAL_STALE_REVISION ok]" {
		t.Fatalf("update_goal results %v", codes)
	}
	st, _ := f.h.Goal(t.Context(), id)
	if st.Goal.Phase != goal.PhaseComplete || st.Goal.Revision != 2 {
		t.Fatalf("goal %+v", st.Goal)
	}
}

// stallRound2 makes the model answer round 1 and stall in round 2.
func stallRound2(r llmtest.Request) llmtest.Response {
	if strings.Contains(string(r.Body), "[Goal round 2 of") {
		return llmtest.Response{Text: "still going", StallAfter: 1}
	}
	return llmtest.Response{Text: "ok"}
}

// TestGoalResumeDisarms: a session disposed during round 2 keeps its
// active goal, but resumed it starts no round on its own (a person's
// message runs one turn, nothing follows) until a person re-arms it.
func TestGoalResumeDisarms(t *testing.T) {
	f := newFixture(t, host.Config{})
	f.srv.SetFallback(stallRound2)
	id := f.create(host.CreateRequest{}).Header.ID
	f.setGoal(id, host.GoalRequest{Action: host.GoalCreate, Objective: "keep going", MaxRounds: 4})
	if err := f.srv.WaitRequests(t.Context(), 2); err != nil {
		t.Fatal(err)
	}
	f.dispose(id)
	st, err := f.h.Goal(t.Context(), id)
	if err != nil || st.Goal.Phase != goal.PhaseActive || st.Armed || st.Goal.Rounds != 2 {
		t.Fatalf("stored goal %+v, %v", st, err)
	}
	f.srv.SetFallback(func(llmtest.Request) llmtest.Response { return llmtest.Response{Text: "hello"} })
	f.send(id, "what is the status?", host.DeliveryQueue)
	f.runIdle(id)
	if n := len(goalRounds(t, f.stored(id))); n != 2 {
		t.Fatalf("the resumed session started rounds on its own: %d", n)
	}
	st, _ = f.h.Goal(t.Context(), id)
	if st.Armed {
		t.Fatal("resumed goal is armed")
	}
	// A person re-arms it: rounds 3 and 4 run, then the cap.
	if st := f.setGoal(id, host.GoalRequest{Action: host.GoalResume}); !st.Armed {
		t.Fatalf("after resume: %+v", st)
	}
	f.runIdle(id)
	rounds := goalRounds(t, f.stored(id))
	if len(rounds) != 4 || rounds[3].Round != 4 {
		t.Fatalf("rounds %+v", rounds)
	}
}

// TestGoalForkDisarms: a fork inherits the goal but not its arming.
func TestGoalForkDisarms(t *testing.T) {
	f := newFixture(t, host.Config{})
	f.srv.SetFallback(stallRound2)
	id := f.create(host.CreateRequest{}).Header.ID
	f.setGoal(id, host.GoalRequest{Action: host.GoalCreate, Objective: "keep going", MaxRounds: 4})
	if err := f.srv.WaitRequests(t.Context(), 2); err != nil {
		t.Fatal(err)
	}
	fork, err := f.h.Fork(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	fid := fork.Header.ID
	st, err := f.h.Goal(t.Context(), fid)
	if err != nil || st.Goal == nil || st.Goal.Phase != goal.PhaseActive || st.Armed {
		t.Fatalf("fork goal %+v, %v", st, err)
	}
	f.send(fid, "carry on by hand", host.DeliveryQueue)
	f.runIdle(fid)
	events := f.stored(fid)
	if n := countType(events, session.TypeTurnEnd); n != 2 { // round 1 (seeded) and the person's turn
		t.Fatalf("fork ran %d turns", n)
	}
	if n := len(goalRounds(t, events)); n != 1 {
		t.Fatalf("fork started rounds: %d", n)
	}
	if err := f.h.Cancel(t.Context(), id, true); err != nil {
		t.Fatal(err)
	}
}

// TestGoalCancelPauses: a person cancelling a round pauses the goal.
func TestGoalCancelPauses(t *testing.T) {
	f := newFixture(t, host.Config{})
	f.srv.SetFallback(stallRound2)
	id := f.create(host.CreateRequest{}).Header.ID
	f.setGoal(id, host.GoalRequest{Action: host.GoalCreate, Objective: "keep going", MaxRounds: 4})
	if err := f.srv.WaitRequests(t.Context(), 2); err != nil {
		t.Fatal(err)
	}
	if err := f.h.Cancel(t.Context(), id, false); err != nil {
		t.Fatal(err)
	}
	f.runIdle(id)
	st, _ := f.h.Goal(t.Context(), id)
	if st.Goal.Phase != goal.PhasePaused || st.Armed {
		t.Fatalf("after cancel: %+v", st)
	}
	if _, err := f.h.SetGoal(t.Context(), id, host.GoalRequest{Action: host.GoalCreate, Objective: "another"}); host.ErrorCode(err) != goal.CodeExists {
		t.Fatalf("second goal: %v", err)
	}
	f.setGoal(id, host.GoalRequest{Action: host.GoalClear})
	if st, _ := f.h.Goal(t.Context(), id); st.Goal != nil {
		t.Fatalf("after clear: %+v", st)
	}
	if _, err := f.h.SetGoal(t.Context(), id, host.GoalRequest{Action: host.GoalPause}); host.ErrorCode(err) != goal.CodeNotFound {
		t.Fatalf("pause without a goal: %v", err)
	}
	if _, err := f.h.SetGoal(t.Context(), id, host.GoalRequest{Action: "explode"}); host.ErrorCode(err) != host.CodeInvalidArgument {
		t.Fatalf("bad action: %v", err)
	}
}

// toolCodes lists the outcome of every tool result in events ("ok" or
// the error code), in log order.
func toolCodes(events []session.Event) []string {
	var codes []string
	for _, e := range events {
		if e.Type == session.TypeToolResult {
			var tr session.ToolResult
			_ = e.Decode(&tr)
			if tr.Error != nil {
				codes = append(codes, tr.Name+":"+tr.Error.Code)
			} else {
				codes = append(codes, tr.Name+":ok")
			}
		}
	}
	return codes
}

// TestCreateGoalHumanAuthority: the scripted model calls create_goal in
// reply to a person who did not ask for a goal (refused,
// GOAL_NOT_AUTHORIZED, no goal) and to one who did (created and armed:
// its rounds follow the turn until the model completes it).
func TestCreateGoalHumanAuthority(t *testing.T) {
	f := newFixture(t, host.Config{})
	var id string
	f.srv.SetFallback(func(r llmtest.Request) llmtest.Response {
		body := string(r.Body)
		n := r.ToolResultCount()
		switch {
		case n == 0 || (n == 1 && strings.Contains(body, "as a goal")):
			return llmtest.Response{ToolCalls: []llmtest.ToolCall{
				{Name: "create_goal", Arguments: `{"objective":"tidy the repo","max_goal_rounds":2}`},
			}}
		case n == 2:
			return llmtest.Response{ToolCalls: []llmtest.ToolCall{{Name: "get_goal", Arguments: `{}`}}}
		case n == 3 && strings.Contains(body, "[Goal round 1 of 2]"):
			st, _ := f.h.Goal(t.Context(), id)
			args, _ := json.Marshal(map[string]any{"goal_id": st.Goal.ID, "revision": st.Goal.Revision, "action": "complete"})
			return llmtest.Response{ToolCalls: []llmtest.ToolCall{{Name: "update_goal", Arguments: string(args)}}}
		}
		return llmtest.Response{Text: "ok"}
	})
	id = f.create(host.CreateRequest{}).Header.ID
	f.send(id, "tidy the repo", host.DeliveryQueue)
	f.runIdle(id)
	if st, _ := f.h.Goal(t.Context(), id); st.Goal != nil {
		t.Fatalf("a goal without the person's ask: %+v", st.Goal)
	}
	f.send(id, "keep tidying the repo as a goal", host.DeliveryQueue)
	f.runIdle(id)
	events := f.stored(id)
	want := "[create_goal:GOAL_NOT_AUTHORIZED create_goal:ok get_goal:ok update_goal:ok]"
	if got := fmt.Sprint(toolCodes(events)); got != want {
		t.Fatalf("tool results %s, want %s", got, want)
	}
	if n := len(goalRounds(t, events)); n != 1 {
		t.Fatalf("%d rounds, want 1", n)
	}
	st, _ := f.h.Goal(t.Context(), id)
	if st.Goal.Phase != goal.PhaseComplete {
		t.Fatalf("goal %+v", st.Goal)
	}
}
