package session

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/dsh-dev/dsh/internal/llm"
)

// TestClosersFromTailSameAsFullFold: Closers, which folds only the tail
// after the last turn and step boundaries, gives what folding every
// event with a Balance gives, for every prefix of a log with several
// turns, steps, calls with and without results, and a turn/end.
func TestClosersFromTailSameAsFullFold(t *testing.T) {
	var events []Event
	add := func(typ string, data any) {
		raw, err := json.Marshal(data)
		if err != nil {
			t.Fatal(err)
		}
		e := Event{Type: typ, Seq: int64(len(events)), Time: int64(100 + len(events)), Data: raw}
		if IsSurfaceType(typ) {
			e.SurfaceOp = Append
		}
		events = append(events, e)
	}
	call := func(id string) llm.Block {
		return llm.Block{Type: llm.BlockToolCall, ID: id, Name: "bash", Arguments: `{}`}
	}
	add(TypeInboxSpliced, InboxSpliced{Target: "next-turn"})
	for turn := 1; turn <= 2; turn++ {
		add(TypeTurnStart, TurnStart{Turn: turn})
		for step := 1; step <= 2; step++ {
			add(TypeStepStart, StepRef{Turn: turn, Step: step})
			add(TypeAssistantMsg, AssistantMessage{Turn: turn, Step: step, Message: llm.Message{ID: "a", Role: llm.RoleAssistant, Content: []llm.Block{call("x"), call("y"), call("z")}}})
			add(TypeToolCall, ToolCall{Turn: turn, Step: step, CallID: "x", Name: "bash"})
			add(TypeToolResult, ToolResult{Turn: turn, Step: step, CallID: "x", Name: "bash"})
			add(TypeToolCall, ToolCall{Turn: turn, Step: step, CallID: "y", Name: "bash"})
			add(TypeStepEnd, StepRef{Turn: turn, Step: step})
		}
		if turn == 1 {
			add(TypeTurnEnd, TurnEnd{Turn: turn, Reason: TurnEndReason{Kind: EndCompleted}})
			add(TypeSandboxMode, struct{}{})
		}
	}
	for n := 0; n <= len(events); n++ {
		var b Balance
		for _, e := range events[:n] {
			b.Add(e)
		}
		if got, want := Closers(events[:n]), b.Closers(); !reflect.DeepEqual(got, want) {
			t.Fatalf("prefix %d: Closers = %+v, full fold = %+v", n, got, want)
		}
	}
	// Mid-step: y was logged (a result), z was not (a call and a
	// result), then step/end and turn/end.
	if got := Closers(events[:7]); len(got) != 5 || got[0].Type != TypeToolResult || got[1].Type != TypeToolCall {
		t.Fatalf("closers of an open step: %+v", got)
	}
}
