package agent_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/dsh-dev/dsh/internal/llm/llmtest"
	"github.com/dsh-dev/dsh/internal/session"
	"github.com/dsh-dev/dsh/internal/session/sessiontest"
	"github.com/dsh-dev/dsh/internal/store/sqlite"
)

// TestCrashAtEveryBoundaryRepairsPaired records a live session with
// parallel tool calls, then simulates a crash after every event: the
// stored prefix is loaded (which repairs it durably) and must be balanced
// with every tool/result paired with exactly one tool/call before it, in
// model order, exactly as the live path logs them.
func TestCrashAtEveryBoundaryRepairsPaired(t *testing.T) {
	h := newHarness(t, barrierTool(3))
	h.srv.Enqueue(
		llmtest.Response{ToolCalls: []llmtest.ToolCall{
			{Name: "probe", Arguments: `{"id":"a"}`},
			{Name: "probe", Arguments: `{"id":"b"}`},
			{Name: "probe", Arguments: `{"id":"c"}`},
			bashCall("echo exclusive"),
		}},
		llmtest.Response{ToolCalls: []llmtest.ToolCall{bashCall("echo one"), bashCall("echo two")}},
		llmtest.Response{Text: "done"},
	)
	if out := h.run(t.Context(), "go"); out.Reason.Kind != session.EndCompleted {
		t.Fatalf("outcome %+v", out)
	}
	recorded := h.log.Events()
	sessiontest.CheckBalanced(t, recorded)

	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "dsh.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	repairedCalls := 0
	for n := 0; n <= len(recorded); n++ {
		prefix := recorded[:n]
		// The live path keeps the pairing at every boundary, not only at
		// the end.
		sessiontest.CheckPairing(t, prefix)
		id := fmt.Sprintf("crash-%03d", n)
		if err := st.Create(ctx, session.Header{Version: session.FormatVersion, ID: id, CreatedAt: 1, Cwd: "/w"}); err != nil {
			t.Fatal(err)
		}
		if err := st.Append(ctx, id, prefix); err != nil {
			t.Fatal(err)
		}
		_, events, err := st.Load(ctx, id)
		if err != nil {
			t.Fatalf("crash after %d events: %v", n, err)
		}
		t.Run(fmt.Sprintf("after-%d", n), func(t *testing.T) {
			sessiontest.CheckBalanced(t, events)
			if _, err := session.DeriveMessages(events); err != nil {
				t.Fatal(err)
			}
			checkModelOrder(t, events[n:])
		})
		repairedCalls += len(sessiontest.EventsOf[session.ToolCall](t, events[n:], session.TypeToolCall))
		// Loading again finds nothing to repair.
		if _, again, err := st.Load(ctx, id); err != nil || len(again) != len(events) {
			t.Fatalf("second load: %d events, %v", len(again), err)
		}
	}
	if repairedCalls == 0 {
		t.Fatal("no crash point left a call unstarted; the recording does not exercise the repair")
	}
}

// checkModelOrder asserts that the closers answer calls in model order:
// each synthesized tool/call is immediately followed by its result.
func checkModelOrder(t *testing.T, closers []session.Event) {
	t.Helper()
	for i, e := range closers {
		if e.Type != session.TypeToolCall {
			continue
		}
		var c session.ToolCall
		var r session.ToolResult
		_ = e.Decode(&c)
		if i+1 >= len(closers) || closers[i+1].Type != session.TypeToolResult || closers[i+1].Decode(&r) != nil || r.CallID != c.CallID {
			t.Fatalf("synthesized tool/call %s not followed by its result", c.CallID)
		}
		if r.Error == nil || r.Error.Code != session.CodeToolNotStarted {
			t.Fatalf("unstarted call %s answered with %+v", c.CallID, r.Error)
		}
	}
}
