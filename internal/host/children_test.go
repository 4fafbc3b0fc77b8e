package host_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/dsh-dev/dsh/internal/host"
	"github.com/dsh-dev/dsh/internal/llm/llmtest"
	"github.com/dsh-dev/dsh/internal/session"
	"github.com/dsh-dev/dsh/internal/session/sessiontest"
)

// TestDisposeStopsChildren: a hosted session's continuable child keeps
// working after the parent's turn (the session is not quiet, so it is not
// idle-disposed); disposing the parent stops the child (its turn ends
// aborted, cause "disposed") and the tree lists it.
func TestDisposeStopsChildren(t *testing.T) {
	f := newFixture(t, host.Config{})
	f.srv.SetFallback(func(r llmtest.Request) llmtest.Response {
		body := string(r.Body)
		switch {
		case strings.Contains(body, "CHILD TASK") && !strings.Contains(body, "start a child"):
			return llmtest.Response{Text: "the child never finishes", StallAfter: 1}
		case r.ToolResultCount() == 0:
			args, _ := json.Marshal(map[string]any{"description": "helper", "prompt": "CHILD TASK"})
			return llmtest.Response{ToolCalls: []llmtest.ToolCall{{Name: "subagent", Arguments: string(args)}}}
		default:
			return llmtest.Response{Text: "child started"}
		}
	})
	id := f.create(host.CreateRequest{}).Header.ID
	s, err := f.h.Follow(t.Context(), id, -1)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	f.send(id, "start a child", host.DeliveryQueue)
	until(t, s, isType(session.TypeTurnEnd))
	// The child's model request is in flight (and stalls).
	if err := f.srv.WaitRequests(t.Context(), 3); err != nil {
		t.Fatal(err)
	}
	rows, err := f.h.Tree(t.Context(), id)
	if err != nil || len(rows) != 1 || rows[0].Activity != "running" {
		t.Fatalf("tree %+v, %v", rows, err)
	}
	child := rows[0].ID
	f.dispose(id)
	events := f.stored(child)
	if err := sessiontest.Check(events); err != nil {
		t.Fatal(err)
	}
	var end session.TurnEnd
	for _, e := range events {
		if e.Type == session.TypeTurnEnd {
			_ = e.Decode(&end)
		}
	}
	if end.Reason.Kind != session.EndAborted || end.Reason.Cause != "disposed" {
		t.Fatalf("child turn/end %+v", end.Reason)
	}
	if info, err := f.h.Get(t.Context(), child); err != nil || !info.Child || info.ParentID != id {
		t.Fatalf("child info %+v, %v", info, err)
	}
	// Clients read children; their parent drives them.
	if err := f.h.Send(t.Context(), child, userText("hi"), ""); host.ErrorCode(err) != host.CodeInvalidArgument {
		t.Fatalf("send to a child: %v", err)
	}
}
