package server_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/dsh-dev/dsh/internal/host"
	"github.com/dsh-dev/dsh/internal/llm/llmtest"
	"github.com/dsh-dev/dsh/internal/sandbox"
	"github.com/dsh-dev/dsh/internal/session"
)

func bashCall(cmd string) llmtest.ToolCall {
	b, _ := json.Marshal(map[string]string{"command": cmd, "description": "test"})
	return llmtest.ToolCall{Name: "bash", Arguments: string(b)}
}

// feedUntil reads the feed until an event of type typ and returns it.
func feedUntil(t *testing.T, s *sseStream, typ string) host.FeedEvent {
	t.Helper()
	for {
		ev, err := s.next()
		if err != nil {
			t.Fatalf("feed ended before %s: %v", typ, err)
		}
		if ev.Event != typ {
			continue
		}
		var fe host.FeedEvent
		if err := json.Unmarshal([]byte(ev.Data), &fe); err != nil {
			t.Fatal(err)
		}
		if fe.Type != typ {
			t.Fatalf("event %q carries type %q", ev.Event, fe.Type)
		}
		return fe
	}
}

// TestApprovalsAcrossReconnects: a pending approval survives the feed
// connection dropping; the reopened feed shows it again with the same
// id; the first answer wins and runs the command, the second is 409.
func TestApprovalsAcrossReconnects(t *testing.T) {
	if _, err := sandbox.Default().Backend(); err != nil {
		t.Skipf("no sandbox backend on this machine: %v", err)
	}
	e := newEnv(t, `  - id: permissions
    module: permissions
    config:
      rules:
        - {tool: bash, command_prefix: "echo", action: ask}
`)
	e.model.Enqueue(
		llmtest.Response{ToolCalls: []llmtest.ToolCall{bashCall("echo approved > out.txt")}},
		llmtest.Response{Text: "written"},
	)
	feed := e.openSSE(e.req("GET", "/api/events", nil))
	id := e.create(nil).Header.ID
	st := e.openSSE(e.req("GET", "/api/sessions/"+id+"/stream", nil))
	defer st.close()
	e.send(id, "write the file")
	pending := feedUntil(t, feed, host.FeedApprovalPending)
	if pending.SessionID != id || pending.Approval == nil || pending.Approval.ID == "" || pending.Approval.Command != "echo approved > out.txt" {
		t.Fatalf("pending %+v", pending)
	}
	aid := pending.Approval.ID
	feed.close() // the client goes away

	var list struct{ Approvals []host.Approval }
	e.call("GET", "/api/approvals", nil, 200, &list)
	if len(list.Approvals) != 1 || list.Approvals[0].ID != aid {
		t.Fatalf("approvals %+v", list)
	}
	var info sessionInfo
	e.call("GET", "/api/sessions/"+id, nil, 200, &info)
	if info.Status != "awaiting-approval" || len(info.Pending) != 1 || info.Pending[0].ID != aid {
		t.Fatalf("session while asking: %+v", info)
	}

	// A new connection starts with the snapshot: the same approval.
	feed2 := e.openSSE(e.req("GET", "/api/events", nil))
	defer feed2.close()
	again := feedUntil(t, feed2, host.FeedApprovalPending)
	if again.Approval == nil || again.Approval.ID != aid {
		t.Fatalf("after reconnect %+v", again)
	}
	if st := feedUntil(t, feed2, host.FeedSessionStatus); st.SessionID != id || st.Status != host.StatusAwaitingApproval {
		t.Fatalf("snapshot status %+v", st)
	}

	e.call("POST", "/api/sessions/"+id+"/approvals/"+aid, map[string]any{"decision": "allow-once"}, 200, nil)
	e.wantError(e.req("POST", "/api/sessions/"+id+"/approvals/"+aid, map[string]any{"decision": "reject"}), 409, "APPROVAL_NOT_PENDING")
	resolved := feedUntil(t, feed2, host.FeedApprovalResolved)
	if resolved.ApprovalID != aid || resolved.Outcome != host.OutcomeAllowedOnce {
		t.Fatalf("resolved %+v", resolved)
	}
	untilType(t, st, session.TypeTurnEnd)
	b, err := os.ReadFile(filepath.Join(e.cwd, "out.txt"))
	if err != nil || string(b) != "approved\n" {
		t.Fatalf("out.txt: %q %v", b, err)
	}
	e.call("GET", "/api/approvals", nil, 200, &list)
	if len(list.Approvals) != 0 {
		t.Fatalf("still pending: %+v", list)
	}
}
