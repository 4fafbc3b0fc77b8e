package cli_test

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/dsh-dev/dsh/internal/goal"
	"github.com/dsh-dev/dsh/internal/llm"
	"github.com/dsh-dev/dsh/internal/llm/llmtest"
	"github.com/dsh-dev/dsh/internal/ralph"
	"github.com/dsh-dev/dsh/internal/session"
	"github.com/dsh-dev/dsh/internal/subagent"
)

// goalSources returns the sources of the goal-round user messages.
func goalSources(t *testing.T, events []session.Event) []llm.Source {
	t.Helper()
	var out []llm.Source
	for _, e := range events {
		var m llm.Message
		if e.Type == session.TypeUserMessage && e.Decode(&m) == nil && m.Source.Kind == "goal" {
			out = append(out, m.Source)
		}
	}
	return out
}

// TestRunGoalStopsAtCap: the real dsh run --goal runs three rounds (one
// turn each, user messages with source kind goal) and stops at its cap of
// three: exit 1, the goal blocked with the cap as its reason, said on
// stderr and in run/result.
func TestRunGoalStopsAtCap(t *testing.T) {
	e := newEnv(t)
	e.srv.SetFallback(func(llmtest.Request) llmtest.Response { return llmtest.Response{Text: "some progress"} })
	out, stderr, code := e.dsh("", "run", "--json", "--goal", "port every module", "--max-goal-rounds", "3")
	if code != 1 {
		t.Fatalf("exit %d, want 1; stderr:\n%s", code, stderr)
	}
	events, res := parseJSONRun(t, out)
	rounds := goalSources(t, events)
	if len(rounds) != 3 || rounds[2].Round != 3 || countTypes(events)[session.TypeTurnEnd] != 3 {
		t.Fatalf("rounds %+v, turns %d", rounds, countTypes(events)[session.TypeTurnEnd])
	}
	if res.Status != "goal-blocked" || res.Goal == nil || res.Goal.Phase != goal.PhaseBlocked || res.Goal.Rounds != 3 {
		t.Fatalf("run/result %+v goal %+v", res, res.Goal)
	}
	if !strings.Contains(stderr, "dsh: goal blocked after 3 of 3 rounds: round cap reached") {
		t.Errorf("stderr:\n%s", stderr)
	}
	// The stored log replays to the same goal.
	_, stored, _ := exportEvents(t, e, res.SessionID)
	if g, err := goal.Fold(stored); err != nil || g.Phase != goal.PhaseBlocked {
		t.Fatalf("fold %+v, %v", g, err)
	}
	show, _, code := e.dsh("", "sessions", "show", res.SessionID)
	if code != 0 || !strings.Contains(show, "[goal round 3]") || !strings.Contains(show, "[goal] block: port every module [blocked, round 3/3") {
		t.Fatalf("sessions show: %d\n%s", code, show)
	}
	// Resumed, the goal is not armed: a prompt runs one turn, no round.
	if _, stderr, code := e.dsh("", "run", "--resume", res.SessionID, "status?"); code != 0 {
		t.Fatalf("resume: %d %s", code, stderr)
	}
	_, stored, _ = exportEvents(t, e, res.SessionID)
	// The export holds prompts as references to their inbox splices.
	stored, err := session.ExpandEvents(stored)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(goalSources(t, stored)); n != 3 {
		t.Fatalf("rounds after resume: %d", n)
	}
}

// TestRunGoalComplete: the model completes the goal in round 2; exit 0.
func TestRunGoalComplete(t *testing.T) {
	e := newEnv(t)
	idRev := regexp.MustCompile(`goal_id \\?"([^"\\]+)\\?", revision (\d+)`)
	e.srv.SetFallback(func(r llmtest.Request) llmtest.Response {
		body := string(r.Body)
		if strings.Contains(body, "[Goal round 2 of") && r.ToolResultCount() == 0 {
			m := idRev.FindStringSubmatch(body)
			if m == nil {
				return llmtest.Response{Text: "no goal id in " + body}
			}
			return llmtest.Response{ToolCalls: []llmtest.ToolCall{{Name: "update_goal",
				Arguments: fmt.Sprintf(`{"goal_id":%q,"revision":%s,"action":"complete"}`, m[1], m[2])}}}
		}
		return llmtest.Response{Text: "worked on it"}
	})
	out, stderr, code := e.dsh("", "run", "--json", "--goal", "fix the parser")
	if code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", code, stderr)
	}
	events, res := parseJSONRun(t, out)
	if n := len(goalSources(t, events)); n != 2 || res.Goal.Phase != goal.PhaseComplete || res.Status != "goal-complete" {
		t.Fatalf("%d rounds, result %+v", n, res)
	}
	if !strings.Contains(stderr, "goal complete after 2 of 20 rounds") {
		t.Errorf("stderr:\n%s", stderr)
	}
}

// TestRunGoalUsage: --goal replaces PROMPT; bad caps are usage errors.
func TestRunGoalUsage(t *testing.T) {
	e := newEnv(t)
	for _, args := range [][]string{
		{"run", "--goal", "x", "also a prompt"},
		{"run", "--goal", " "},
		{"run", "--max-goal-rounds", "3", "a prompt"},
		{"run", "--goal", "x", "--max-goal-rounds", "-1"},
	} {
		if _, stderr, code := e.dsh("", args...); code != 2 {
			t.Errorf("%q: exit %d, stderr %s", args, code, stderr)
		}
	}
}

// TestRalphTree: a real dsh run whose model calls ralph; the second
// round's child reports done, and `dsh sessions tree` lists both rounds.
func TestRalphTree(t *testing.T) {
	e := newEnv(t)
	roundOf := regexp.MustCompile(`You are round (\d+) of at most`)
	e.srv.SetFallback(func(r llmtest.Request) llmtest.Response {
		body := string(r.Body)
		if m := roundOf.FindStringSubmatch(body); m != nil {
			if r.ToolResultCount() > 0 {
				return llmtest.Response{Text: "reported"}
			}
			rep, _ := json.Marshal(ralph.Report{Done: m[1] == "2", Summary: "round " + m[1]})
			return llmtest.Response{ToolCalls: []llmtest.ToolCall{{Name: subagent.StructuredOutputTool, Arguments: string(rep)}}}
		}
		if r.ToolResultCount() == 0 {
			return llmtest.Response{ToolCalls: []llmtest.ToolCall{{Name: "ralph", Arguments: `{"objective":"convert the docs","maxRounds":4}`}}}
		}
		return llmtest.Response{Text: "loop over"}
	})
	out, stderr, code := e.dsh("", "run", "--json", "loop it")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	events, res := parseJSONRun(t, out)
	if n := countTypes(events)[session.TypeRalphRound]; n != 2 {
		t.Fatalf("%d ralph/round events", n)
	}
	tree, stderr, code := e.dsh("", "sessions", "tree", res.SessionID)
	if code != 0 || !strings.Contains(tree, "ralph round 1/4") || !strings.Contains(tree, "ralph round 2/4") {
		t.Fatalf("sessions tree: %d %s\n%s", code, stderr, tree)
	}
	// sessions show renders the new events without failing.
	if show, stderr, code := e.dsh("", "sessions", "show", res.SessionID); code != 0 || !strings.Contains(show, "[ralph] round 2/4 done") {
		t.Fatalf("sessions show: %d %s", code, stderr)
	}
}
