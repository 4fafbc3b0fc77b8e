package host_test

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/dsh-dev/dsh/internal/host"
	"github.com/dsh-dev/dsh/internal/llm/llmtest"
	"github.com/dsh-dev/dsh/internal/ralph"
	"github.com/dsh-dev/dsh/internal/session"
	"github.com/dsh-dev/dsh/internal/session/sessiontest"
	"github.com/dsh-dev/dsh/internal/subagent"
)

var roundOf = regexp.MustCompile(`You are round (\d+) of at most (\d+)`)

// ralphScript is the fake model of a parent that calls ralph once and of
// its round children, which report done from round doneAt on (never when
// doneAt is 0). stall makes that round's child hang instead, closing
// stalled when it asks.
func ralphScript(maxRounds, doneAt, stall int, stalled chan struct{}) func(llmtest.Request) llmtest.Response {
	var once sync.Once
	return func(r llmtest.Request) llmtest.Response {
		body := string(r.Body)
		if m := roundOf.FindStringSubmatch(body); m != nil {
			n, _ := strconv.Atoi(m[1])
			if n == stall {
				once.Do(func() { close(stalled) })
				return llmtest.Response{Text: "working forever", StallAfter: 1}
			}
			if r.ToolResultCount() > 0 {
				return llmtest.Response{Text: "reported"}
			}
			rep, _ := json.Marshal(ralph.Report{Done: doneAt > 0 && n >= doneAt, Summary: fmt.Sprintf("round %d did its part", n)})
			return llmtest.Response{ToolCalls: []llmtest.ToolCall{{Name: subagent.StructuredOutputTool, Arguments: string(rep)}}}
		}
		if r.ToolResultCount() == 0 {
			args, _ := json.Marshal(map[string]any{"objective": "RALPH OBJECTIVE: make every test pass", "maxRounds": maxRounds})
			return llmtest.Response{ToolCalls: []llmtest.ToolCall{{Name: ralph.Name, Arguments: string(args)}}}
		}
		return llmtest.Response{Text: "ralph finished"}
	}
}

// ralphResult returns the ralph call's tool/result and the ralph/round
// events of a parent's log.
func ralphResult(t *testing.T, events []session.Event) (session.ToolResult, []ralph.Round) {
	t.Helper()
	var tr session.ToolResult
	var rounds []ralph.Round
	for _, e := range events {
		switch e.Type {
		case session.TypeToolResult:
			_ = e.Decode(&tr)
		case session.TypeRalphRound:
			var r ralph.Round
			if err := e.Decode(&r); err != nil {
				t.Fatal(err)
			}
			rounds = append(rounds, r)
		}
	}
	return tr, rounds
}

// TestRalphDone: round 2's child reports done, so the loop ends there;
// each round is a fresh child with its own subagent/start/end pair and
// ralph/round in the parent's log, and the tree lists both.
func TestRalphDone(t *testing.T) {
	f := newFixture(t, host.Config{})
	f.srv.SetFallback(ralphScript(5, 2, 0, nil))
	id := f.create(host.CreateRequest{}).Header.ID
	f.send(id, "run the loop", host.DeliveryQueue)
	f.runIdle(id)
	events := f.stored(id)
	if err := sessiontest.Check(events); err != nil {
		t.Fatal(err)
	}
	tr, rounds := ralphResult(t, events)
	if tr.Name != ralph.Name || tr.IsError || !strings.Contains(tr.Content[0].Text, "done in round 2 of 5") {
		t.Fatalf("ralph result %+v", tr)
	}
	if len(rounds) != 2 || rounds[0].Done || !rounds[1].Done || rounds[1].Summary != "round 2 did its part" || rounds[0].ChildID == rounds[1].ChildID {
		t.Fatalf("rounds %+v", rounds)
	}
	if countType(events, session.TypeSubagentStart) != 2 || countType(events, session.TypeSubagentEnd) != 2 {
		t.Fatal("want one subagent/start and /end per round")
	}
	rows, err := f.h.Tree(t.Context(), id)
	if err != nil || len(rows) != 2 || rows[0].Label != "ralph round 1/5" || rows[1].Label != "ralph round 2/5" {
		t.Fatalf("tree %+v, %v", rows, err)
	}
	// Each child saw the objective and nothing of the parent's chat.
	child := f.stored(rounds[1].ChildID)
	var prompt string
	for _, e := range child {
		if e.Type == session.TypeUserMessage && prompt == "" {
			prompt = string(e.Data)
		}
	}
	if !strings.Contains(prompt, "RALPH OBJECTIVE") || strings.Contains(prompt, "run the loop") {
		t.Fatalf("child prompt %s", prompt)
	}
	// A child is its parent's to drive: no goal through the host.
	if _, err := f.h.SetGoal(t.Context(), rounds[0].ChildID, host.GoalRequest{Action: host.GoalCreate, Objective: "x"}); host.ErrorCode(err) != host.CodeInvalidArgument {
		t.Fatalf("goal on a child: %v", err)
	}
}

// TestRalphCap: no child ever reports done: three rounds, then
// RALPH_CAP_REACHED.
func TestRalphCap(t *testing.T) {
	f := newFixture(t, host.Config{})
	f.srv.SetFallback(ralphScript(3, 0, 0, nil))
	id := f.create(host.CreateRequest{}).Header.ID
	f.send(id, "run the loop", host.DeliveryQueue)
	f.runIdle(id)
	tr, rounds := ralphResult(t, f.stored(id))
	if !tr.IsError || tr.Error == nil || tr.Error.Code != ralph.CodeCapReached || len(rounds) != 3 {
		t.Fatalf("result %+v, %d rounds", tr, len(rounds))
	}
}

// TestRalphCancel: cancelling the parent's turn during round 2 aborts
// that round's child and ends the loop; no round 3 starts.
func TestRalphCancel(t *testing.T) {
	f := newFixture(t, host.Config{})
	stalled := make(chan struct{})
	f.srv.SetFallback(ralphScript(5, 0, 2, stalled))
	id := f.create(host.CreateRequest{}).Header.ID
	f.send(id, "run the loop", host.DeliveryQueue)
	// Round 2's child has asked the model (and stalls there).
	select {
	case <-stalled:
	case <-t.Context().Done():
		t.Fatal("round 2 never asked the model")
	}
	if err := f.h.Cancel(t.Context(), id, false); err != nil {
		t.Fatal(err)
	}
	f.runIdle(id)
	events := f.stored(id)
	if err := sessiontest.Check(events); err != nil {
		t.Fatal(err)
	}
	if n := countType(events, session.TypeSubagentStart); n != 2 {
		t.Fatalf("%d rounds started", n)
	}
	var end subagent.EndEvent
	for _, e := range events {
		if e.Type == session.TypeSubagentEnd {
			_ = e.Decode(&end)
		}
	}
	if end.StopReason != subagent.StopAborted {
		t.Fatalf("round 2 ended %+v", end)
	}
	tr, _ := ralphResult(t, events)
	if !tr.IsError {
		t.Fatalf("ralph result %+v", tr)
	}
}

// TestRalphRoundFailed: a child that never reports through
// structured_output ends the loop at its round with RALPH_ROUND_FAILED.
func TestRalphRoundFailed(t *testing.T) {
	f := newFixture(t, host.Config{})
	f.srv.SetFallback(func(r llmtest.Request) llmtest.Response {
		if roundOf.MatchString(string(r.Body)) {
			return llmtest.Response{Text: "I would rather chat than report."}
		}
		if r.ToolResultCount() == 0 {
			return llmtest.Response{ToolCalls: []llmtest.ToolCall{{Name: ralph.Name, Arguments: `{"objective":"anything"}`}}}
		}
		return llmtest.Response{Text: "ok"}
	})
	id := f.create(host.CreateRequest{}).Header.ID
	f.send(id, "run the loop", host.DeliveryQueue)
	f.runIdle(id)
	tr, rounds := ralphResult(t, f.stored(id))
	if !tr.IsError || tr.Error == nil || tr.Error.Code != ralph.CodeRoundFailed || len(rounds) != 1 || rounds[0].Done {
		t.Fatalf("result %+v, rounds %+v", tr, rounds)
	}
}
