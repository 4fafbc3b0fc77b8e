// Package sessiontest has test helpers for session logs: decoding events
// of one type and asserting the log invariants (contiguous seq, paired
// turns and steps, exactly one result per requested tool call, nothing
// for crash repair to close).
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
// and steps, exactly one tool/result after each tool/call, every tool call
// the model made answered, and nothing for crash repair to close.
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
	calls := map[string]int{}
	requested := map[string]bool{}
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
		case session.TypeAssistantMsg:
			var am session.AssistantMessage
			if err := e.Decode(&am); err != nil {
				return fmt.Errorf("seq %d: %w", e.Seq, err)
			}
			for _, c := range am.Message.ToolCalls() {
				requested[c.ID] = true
			}
		case session.TypeToolCall:
			var c session.ToolCall
			if err := e.Decode(&c); err != nil {
				return fmt.Errorf("seq %d: %w", e.Seq, err)
			}
			if !requested[c.CallID] {
				return fmt.Errorf("seq %d: tool/call %s the model never requested", e.Seq, c.CallID)
			}
			calls[c.CallID]++
		case session.TypeToolResult:
			var r session.ToolResult
			if err := e.Decode(&r); err != nil {
				return fmt.Errorf("seq %d: %w", e.Seq, err)
			}
			if calls[r.CallID] != 1 {
				code := ""
				if r.Error != nil {
					code = " (" + r.Error.Code + ")"
				}
				return fmt.Errorf("seq %d: tool/result %s%s without exactly one tool/call", e.Seq, r.CallID, code)
			}
			calls[r.CallID] = 2
		}
	}
	if openTurn || openStep {
		return fmt.Errorf("log ends inside a turn or step")
	}
	for id, n := range calls {
		if n != 2 {
			return fmt.Errorf("tool call %s has no result", id)
		}
		delete(requested, id)
	}
	if len(requested) > 0 {
		return fmt.Errorf("requested calls never logged: %v", requested)
	}
	if cl := session.Closers(events); cl != nil {
		return fmt.Errorf("balanced log still has closers: %+v", cl)
	}
	return nil
}
