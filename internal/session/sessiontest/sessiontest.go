// Package sessiontest has test helpers for session logs: decoding events
// of one type and asserting the log invariants (contiguous seq, paired
// turns and steps, each tool/result paired with exactly one tool/call
// before it and each tool/call with exactly one result, nothing for crash
// repair to close).
package sessiontest

import (
	"fmt"
	"testing"

	"github.com/dsh-dev/dsh/internal/session"
)

// EventsOf returns the decoded payloads of every event of type typ.
func EventsOf[T any](t testing.TB, events []session.Event, typ string) []T {
	t.Helper()
	var out []T
	for _, e := range events {
		if e.Type != typ {
			continue
		}
		var v T
		if err := e.Decode(&v); err != nil {
			t.Fatal(err)
		}
		out = append(out, v)
	}
	return out
}

// CheckBalanced asserts the log invariants: contiguous seq, paired turns
// and steps, the call/result pairing of [CheckPairing], every tool call
// the model made logged and answered, and nothing for crash repair to
// close.
func CheckBalanced(t testing.TB, events []session.Event) {
	t.Helper()
	if err := Check(events); err != nil {
		t.Fatal(err)
	}
}

// Check is [CheckBalanced] as a value: it returns the first violation of
// the log invariants, or nil. Tests that examine many logs (the crash
// test) use it to report every broken log instead of stopping at one.
func Check(events []session.Event) error {
	openTurn, openStep := false, false
	for i, e := range events {
		if e.Seq != int64(i) {
			return fmt.Errorf("seq %d at position %d", e.Seq, i)
		}
		if err := e.Validate(); err != nil {
			return err
		}
		switch e.Type {
		case session.TypeTurnStart:
			if openTurn {
				return fmt.Errorf("seq %d: turn/start inside a turn", e.Seq)
			}
			openTurn = true
		case session.TypeTurnEnd:
			if !openTurn || openStep {
				return fmt.Errorf("seq %d: unbalanced turn/end", e.Seq)
			}
			openTurn = false
		case session.TypeStepStart:
			if !openTurn || openStep {
				return fmt.Errorf("seq %d: unbalanced step/start", e.Seq)
			}
			openStep = true
		case session.TypeStepEnd:
			if !openStep {
				return fmt.Errorf("seq %d: step/end without step/start", e.Seq)
			}
			openStep = false
		}
	}
	if openTurn || openStep {
		return fmt.Errorf("log ends inside a turn or step")
	}
	unanswered, unlogged, err := pairing(events)
	if err != nil {
		return err
	}
	if len(unanswered) > 0 {
		return fmt.Errorf("tool calls without a result: %v", unanswered)
	}
	if len(unlogged) > 0 {
		return fmt.Errorf("requested calls never logged: %v", unlogged)
	}
	if cl := session.Closers(events); cl != nil {
		return fmt.Errorf("balanced log still has closers: %+v", cl)
	}
	return nil
}

// CheckPairing asserts the call/result pairing every consumer relies on,
// in both directions, on any log (a crashed prefix included): every
// tool/call names a call the model requested and is the only tool/call
// of that id; every tool/result has exactly one tool/call before it, in
// the same turn and step, and is the only result of that id. It returns
// the ids of tool/calls that have no result yet and of requested calls
// with no tool/call, which a balanced log must not have.
func CheckPairing(t testing.TB, events []session.Event) (unanswered, unlogged []string) {
	t.Helper()
	unanswered, unlogged, err := pairing(events)
	if err != nil {
		t.Fatal(err)
	}
	return unanswered, unlogged
}

// pairing is [CheckPairing] as a value, for [Check].
func pairing(events []session.Event) (unanswered, unlogged []string, err error) {
	type ref struct{ turn, step int }
	requested := map[string]bool{}
	var order []string // requested ids in model order
	called := map[string]ref{}
	answered := map[string]bool{}
	for _, e := range events {
		switch e.Type {
		case session.TypeAssistantMsg:
			var am session.AssistantMessage
			if err := e.Decode(&am); err != nil {
				return nil, nil, fmt.Errorf("seq %d: %w", e.Seq, err)
			}
			for _, c := range am.Message.ToolCalls() {
				if !requested[c.ID] {
					order = append(order, c.ID)
				}
				requested[c.ID] = true
			}
		case session.TypeToolCall:
			var c session.ToolCall
			if err := e.Decode(&c); err != nil {
				return nil, nil, fmt.Errorf("seq %d: %w", e.Seq, err)
			}
			if !requested[c.CallID] {
				return nil, nil, fmt.Errorf("seq %d: tool/call %s the model never requested", e.Seq, c.CallID)
			}
			if _, dup := called[c.CallID]; dup {
				return nil, nil, fmt.Errorf("seq %d: second tool/call %s", e.Seq, c.CallID)
			}
			called[c.CallID] = ref{c.Turn, c.Step}
		case session.TypeToolResult:
			var r session.ToolResult
			if err := e.Decode(&r); err != nil {
				return nil, nil, fmt.Errorf("seq %d: %w", e.Seq, err)
			}
			at, ok := called[r.CallID]
			if !ok {
				return nil, nil, fmt.Errorf("seq %d: tool/result %s without a tool/call before it", e.Seq, r.CallID)
			}
			if answered[r.CallID] {
				return nil, nil, fmt.Errorf("seq %d: second tool/result %s", e.Seq, r.CallID)
			}
			if at != (ref{r.Turn, r.Step}) {
				return nil, nil, fmt.Errorf("seq %d: tool/result %s in turn %d step %d, its tool/call in turn %d step %d", e.Seq, r.CallID, r.Turn, r.Step, at.turn, at.step)
			}
			answered[r.CallID] = true
		}
	}
	for _, id := range order {
		if _, ok := called[id]; !ok {
			unlogged = append(unlogged, id)
		} else if !answered[id] {
			unanswered = append(unanswered, id)
		}
	}
	return unanswered, unlogged, nil
}
