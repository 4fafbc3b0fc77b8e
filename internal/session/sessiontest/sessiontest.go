// Package sessiontest has test helpers for session logs: decoding events
// of one type and asserting the log invariants (contiguous seq, paired
// turns and steps, exactly one result per requested tool call, nothing
// for crash repair to close).
package sessiontest

import (
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
	openTurn, openStep := false, false
	calls := map[string]int{}
	requested := map[string]bool{}
	for i, e := range events {
		if e.Seq != int64(i) {
			t.Fatalf("seq %d at position %d", e.Seq, i)
		}
		if err := e.Validate(); err != nil {
			t.Fatal(err)
		}
		switch e.Type {
		case session.TypeTurnStart:
			if openTurn {
				t.Fatalf("seq %d: turn/start inside a turn", e.Seq)
			}
			openTurn = true
		case session.TypeTurnEnd:
			if !openTurn || openStep {
				t.Fatalf("seq %d: unbalanced turn/end", e.Seq)
			}
			openTurn = false
		case session.TypeStepStart:
			if !openTurn || openStep {
				t.Fatalf("seq %d: unbalanced step/start", e.Seq)
			}
			openStep = true
		case session.TypeStepEnd:
			if !openStep {
				t.Fatalf("seq %d: step/end without step/start", e.Seq)
			}
			openStep = false
		case session.TypeAssistantMsg:
			var am session.AssistantMessage
			_ = e.Decode(&am)
			for _, c := range am.Message.ToolCalls() {
				requested[c.ID] = true
			}
		case session.TypeToolCall:
			var c session.ToolCall
			_ = e.Decode(&c)
			if !requested[c.CallID] {
				t.Fatalf("seq %d: tool/call %s the model never requested", e.Seq, c.CallID)
			}
			calls[c.CallID]++
		case session.TypeToolResult:
			var r session.ToolResult
			_ = e.Decode(&r)
			if calls[r.CallID] != 1 {
				t.Fatalf("seq %d: tool/result %s without exactly one tool/call", e.Seq, r.CallID)
			}
			calls[r.CallID] = 2
		}
	}
	if openTurn || openStep {
		t.Fatal("log ends inside a turn or step")
	}
	for id, n := range calls {
		if n != 2 {
			t.Fatalf("tool call %s has no result", id)
		}
		delete(requested, id)
	}
	if len(requested) > 0 {
		t.Fatalf("requested calls never logged: %v", requested)
	}
	if cl := session.Closers(events); cl != nil {
		t.Fatalf("balanced log still has closers: %+v", cl)
	}
}
