package goal

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/dsh-dev/dsh/internal/llm"
	"github.com/dsh-dev/dsh/internal/session"
	"github.com/dsh-dev/dsh/internal/tool"
)

func newLog(t *testing.T, seed []session.Event) *session.Log {
	t.Helper()
	log, err := session.NewLog(session.Header{Version: session.FormatVersion, ID: "s1", Cwd: "/tmp"}, seed, nil)
	if err != nil {
		t.Fatal(err)
	}
	return log
}

// turn logs a turn/start and a user message of the given source kind.
func turn(t *testing.T, log *session.Log, n int, kind, text string) {
	t.Helper()
	if _, err := log.Append(session.TypeTurnStart, session.TurnStart{Turn: n}); err != nil {
		t.Fatal(err)
	}
	m := llm.Message{ID: "m" + text, Role: llm.RoleUser, Content: []llm.Block{llm.TextBlock(text)}, Source: llm.Source{Kind: kind}}
	if _, err := log.Append(session.TypeUserMessage, m, session.Surface()); err != nil {
		t.Fatal(err)
	}
}

func code(err error) string {
	if c := CodeOf(err); c != "" {
		return c
	}
	var te *tool.Error
	if e, ok := err.(*tool.Error); ok {
		te = e
		return te.Code
	}
	if err == nil {
		return "ok"
	}
	return err.Error()
}

// TestInvariants drives a keeper with random operations from every
// writer and checks, after each, that the goal read from the latest event
// equals the replay of the whole log through Apply, that the goal's own
// invariants hold, that the revision never goes back and that rounds
// never pass the cap.
func TestInvariants(t *testing.T) {
	for seed := range uint64(8) {
		r := rand.New(rand.NewPCG(seed, 7))
		log := newLog(t, nil)
		k := NewKeeper(log)
		lastRev, lastID := 0, ""
		for range 120 {
			var err error
			switch r.IntN(9) {
			case 0:
				_, err = k.Create(ByUser, "objective", 1+r.IntN(4), "")
			case 1:
				_, _, err = k.NextRound()
			case 2:
				_, err = k.Interrupt("cancelled")
			case 3:
				_, err = k.Arm(ByUser)
			case 4:
				err = k.Clear(ByUser, "")
			default:
				acts := []string{ActionEdit, ActionPause, ActionResume, ActionComplete, ActionBlocked, "bogus"}
				u := Update{Action: acts[r.IntN(len(acts))], By: ByModel, Reason: []string{"", "stuck"}[r.IntN(2)]}
				if st, _ := k.State(); st.Goal != nil && r.IntN(4) > 0 {
					u.GoalID, u.Revision = st.Goal.ID, st.Goal.Revision
				} else {
					u.GoalID, u.Revision = "other", 1+r.IntN(3)
				}
				if u.Action == ActionEdit {
					obj, n := "new objective", 1+r.IntN(5)
					u.Objective, u.MaxRounds = &obj, &n
				}
				_, err = k.Update(u)
			}
			if err != nil && CodeOf(err) == "" {
				t.Fatalf("seed %d: untyped error %v", seed, err)
			}
			st, err := k.State()
			if err != nil {
				t.Fatal(err)
			}
			folded, err := Fold(log.Events())
			if err != nil {
				t.Fatalf("seed %d: the log does not replay: %v", seed, err)
			}
			if !reflect.DeepEqual(folded, st.Goal) {
				t.Fatalf("seed %d: latest %+v, fold %+v", seed, st.Goal, folded)
			}
			g := st.Goal
			if g == nil {
				lastRev, lastID = 0, ""
				continue
			}
			if err := g.valid(); err != nil {
				t.Fatalf("seed %d: %v", seed, err)
			}
			if g.ID == lastID && g.Revision < lastRev {
				t.Fatalf("seed %d: revision went back %d → %d", seed, lastRev, g.Revision)
			}
			if st.Armed && g.Phase != PhaseActive {
				t.Fatalf("seed %d: armed %s goal", seed, g.Phase)
			}
			lastRev, lastID = g.Revision, g.ID
		}
	}
}

// TestApplyRefuses checks the transitions Apply refuses outright.
func TestApplyRefuses(t *testing.T) {
	g := &Goal{ID: "g", Objective: "o", Phase: PhaseActive, Revision: 1, MaxRounds: 2}
	with := func(f func(*Goal)) *Goal { c := g.clone(); f(c); return c }
	for name, tc := range map[string]struct {
		cur  *Goal
		c    Change
		code string
	}{
		"create over active":   {g, Change{Operation: OpCreate, Goal: with(func(x *Goal) { x.ID = "h" })}, CodeExists},
		"edit without goal":    {nil, Change{Operation: OpEdit, Goal: g}, CodeNotFound},
		"clear without goal":   {nil, Change{Operation: OpClear, Cleared: "g"}, CodeNotFound},
		"revision skipped":     {g, Change{Operation: OpPause, Goal: with(func(x *Goal) { x.Phase, x.Revision = PhasePaused, 3 })}, CodeInvalidTransition},
		"round past cap":       {with(func(x *Goal) { x.Rounds = 2 }), Change{Operation: OpRound, Goal: with(func(x *Goal) { x.Rounds = 3 })}, CodeInvalidTransition},
		"round bumps revision": {g, Change{Operation: OpRound, Goal: with(func(x *Goal) { x.Rounds, x.Revision = 1, 2 })}, CodeInvalidTransition},
		"identity changed":     {g, Change{Operation: OpEdit, Goal: with(func(x *Goal) { x.ID, x.Revision = "h", 2 })}, CodeInvalidTransition},
		"blocked no reason":    {g, Change{Operation: OpBlock, Goal: with(func(x *Goal) { x.Phase, x.Revision = PhaseBlocked, 2 })}, CodeInvalidTransition},
		"resume active":        {g, Change{Operation: OpResume, Goal: with(func(x *Goal) { x.Revision = 2 })}, CodeInvalidTransition},
		"unknown operation":    {g, Change{Operation: "explode", Goal: with(func(x *Goal) { x.Revision = 2 })}, CodeInvalidAction},
		"empty objective":      {g, Change{Operation: OpEdit, Goal: with(func(x *Goal) { x.Objective, x.Revision = " ", 2 })}, CodeInvalidArgument},
	} {
		if _, err := Apply(tc.cur, tc.c); CodeOf(err) != tc.code {
			t.Errorf("%s: %v, want %s", name, err, tc.code)
		}
	}
}

// TestAuthorized: both sides of the human-authority rule.
func TestAuthorized(t *testing.T) {
	for name, tc := range map[string]struct {
		kind, text string
		want       bool
	}{
		"person asks":          {"user", "Make it a goal: get the tests green", true},
		"person, plural":       {"user", "set these goals please", true},
		"person, through Send": {"", "work on this as a goal", true},
		"person, no ask":       {"user", "fix the tests", false},
		"goal round":           {"goal", "[Goal round 2 of 20] … Goal: x", false},
		"subagent's parent":    {"parent", "create a goal", false},
		"not a word (goalkee)": {"user", "the goalkeeper module", false},
	} {
		log := newLog(t, nil)
		turn(t, log, 1, tc.kind, tc.text)
		if got := Authorized(log); got != tc.want {
			t.Errorf("%s: %v, want %v", name, got, tc.want)
		}
	}
	// Only this turn counts: an earlier turn's ask does not authorise.
	log := newLog(t, nil)
	turn(t, log, 1, "user", "start a goal")
	turn(t, log, 2, "user", "now something else")
	if Authorized(log) {
		t.Error("an earlier turn's ask authorised this turn")
	}
}

func call(t *testing.T, d tool.Definition, args string) (tool.Result, error) {
	t.Helper()
	return d.Execute(context.Background(), &tool.Call{ID: "c1", Name: d.Name, Arguments: json.RawMessage(args)})
}

// TestToolCodes exercises every tool and its codes.
func TestToolCodes(t *testing.T) {
	log := newLog(t, nil)
	k := NewKeeper(log)
	create, get, update := CreateTool(k, log), GetTool(k), UpdateTool(k)
	turn(t, log, 1, "user", "fix the build")
	if _, err := call(t, create, `{"objective":"x"}`); code(err) != CodeNotAuthorized {
		t.Fatalf("unasked create: %v", err)
	}
	if _, err := call(t, get, `{}`); code(err) != CodeNotFound {
		t.Fatalf("get without goal: %v", err)
	}
	turn(t, log, 2, "user", "please make this a goal: fix the build")
	for args, want := range map[string]string{
		`{}`:                                    tool.CodeInvalidArgs,
		`{"objective":"x","extra":1}`:           tool.CodeInvalidArgs,
		`{"objective":"x","max_goal_rounds":0}`: CodeInvalidArgument,
		`{"objective":"  "}`:                    CodeInvalidArgument,
	} {
		if _, err := call(t, create, args); code(err) != want {
			t.Errorf("create %s: %v, want %s", args, err, want)
		}
	}
	res, err := call(t, create, `{"objective":"fix the build","max_goal_rounds":5}`)
	if err != nil {
		t.Fatal(err)
	}
	var g Goal
	if err := json.Unmarshal(res.Meta, &g); err != nil || g.MaxRounds != 5 || g.Revision != 1 || g.Phase != PhaseActive {
		t.Fatalf("created %+v, %v", g, err)
	}
	if _, err := call(t, create, `{"objective":"again"}`); code(err) != CodeExists {
		t.Fatalf("second create: %v", err)
	}
	if res, err := call(t, get, `{}`); err != nil || !strings.Contains(res.Content[0].Text, g.ID) {
		t.Fatalf("get: %+v, %v", res, err)
	}
	up := func(rev int, action, extra string) string {
		return `{"goal_id":"` + g.ID + `","revision":` + string(rune('0'+rev)) + `,"action":"` + action + `"` + extra + `}`
	}
	for _, tc := range []struct{ args, want string }{
		{`{"goal_id":"nope","revision":1,"action":"pause"}`, CodeNotFound},
		{up(2, "pause", ""), CodeStaleRevision},
		{up(1, "explode", ""), CodeInvalidAction},
		{up(1, "blocked", ""), CodeInvalidArgument},
		{up(1, "edit", ""), CodeInvalidArgument},
		{up(1, "pause", `,"objective":"y"`), CodeInvalidArgument},
		{up(1, "resume", ""), CodeInvalidTransition},
		{`{"goal_id":"x","action":"pause"}`, tool.CodeInvalidArgs},
		{up(1, "pause", ""), "ok"},
		{up(2, "pause", ""), CodeInvalidTransition},
		{up(2, "edit", `,"max_goal_rounds":9`), "ok"},
		{up(3, "blocked", `,"reason":"needs a password"`), "ok"},
		{up(4, "resume", ""), "ok"},
		{up(5, "complete", ""), "ok"},
		{up(6, "edit", `,"objective":"more"`), CodeInvalidTransition},
	} {
		if _, err := call(t, update, tc.args); code(err) != tc.want {
			t.Errorf("update %s: %v, want %s", tc.args, err, tc.want)
		}
	}
	// A completed goal makes room for a new one.
	if _, err := call(t, create, `{"objective":"next goal"}`); err != nil {
		t.Fatalf("create after complete: %v", err)
	}
	if _, err := Fold(log.Events()); err != nil {
		t.Fatal(err)
	}
}

// TestArmingIsLive: a log resumed from stored events keeps the goal but
// not its arming; Arm re-arms it with an arm event, Interrupt pauses.
func TestArmingIsLive(t *testing.T) {
	log := newLog(t, nil)
	k := NewKeeper(log)
	if _, err := k.Create(ByUser, "o", 3, ""); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := k.NextRound(); !ok || err != nil {
		t.Fatalf("round: %v %v", ok, err)
	}
	resumed := newLog(t, log.Events())
	k2 := NewKeeper(resumed)
	st, _ := k2.State()
	if st.Armed || st.Goal.Rounds != 1 {
		t.Fatalf("resumed %+v", st)
	}
	if _, ok, _ := k2.NextRound(); ok {
		t.Fatal("a disarmed goal started a round")
	}
	if _, err := k2.Arm(ByUser); err != nil {
		t.Fatal(err)
	}
	msg, ok, err := k2.NextRound()
	if !ok || err != nil || msg.Source.Round != 2 || msg.Source.Kind != "goal" {
		t.Fatalf("round after arm: %+v %v %v", msg.Source, ok, err)
	}
	if paused, err := k2.Interrupt("cancelled"); !paused || err != nil {
		t.Fatalf("interrupt: %v %v", paused, err)
	}
	if st, _ := k2.State(); st.Goal.Phase != PhasePaused || st.Armed {
		t.Fatalf("after interrupt %+v", st)
	}
}

// TestRoundMessageWithoutTools: a session whose model has no update_goal
// is not told to call it.
func TestRoundMessageWithoutTools(t *testing.T) {
	log := newLog(t, nil)
	k := NewKeeper(log)
	k.NoTools()
	if _, err := k.Create(ByUser, "o", 2, ""); err != nil {
		t.Fatal(err)
	}
	msg, ok, err := k.NextRound()
	if !ok || err != nil || strings.Contains(msg.Text(), "update_goal") || !strings.Contains(msg.Text(), "[Goal round 1 of 2]") {
		t.Fatalf("%q %v %v", msg.Text(), ok, err)
	}
}
