package server_test

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dsh-dev/dsh/internal/host"
	"github.com/dsh-dev/dsh/internal/llm/llmtest"
	"github.com/dsh-dev/dsh/internal/session"
)

// TestQueueSteerAndRemove: messages queued during a turn (held by an
// approval) are steered into it or removed through
// POST /api/sessions/{id}/queue/{messageId}; the model's next request in
// that turn carries the steered one only; every stream starts with
// retry: 1000; the route's errors have their codes.
func TestQueueSteerAndRemove(t *testing.T) {
	e := newEnv(t, `  - id: permissions
    module: permissions
    config:
      rules:
        - {tool: write, action: ask}
`)
	args, _ := json.Marshal(map[string]string{"file_path": filepath.Join(e.cwd, "a.txt"), "content": "x\n"})
	e.model.Enqueue(
		llmtest.Response{ToolCalls: []llmtest.ToolCall{{Name: "write", Arguments: string(args)}}},
		llmtest.Response{Text: "steered in"},
	)
	feed := e.openSSE(e.req("GET", "/api/events", nil))
	defer feed.close()
	id := e.create(nil).Header.ID
	st := e.openSSE(e.req("GET", "/api/sessions/"+id+"/stream", nil))
	defer st.close()
	e.send(id, "write the file")
	pending := feedUntil(t, feed, host.FeedApprovalPending)
	if feed.retry != "1000" {
		t.Fatalf("host feed retry field %q", feed.retry)
	}

	queue := func(text string) string {
		var r struct {
			MessageID string `json:"messageId"`
		}
		e.call("POST", "/api/sessions/"+id+"/messages", map[string]any{"text": text}, 202, &r)
		if r.MessageID == "" {
			t.Fatal("202 without messageId")
		}
		return r.MessageID
	}
	steer, drop := queue("steer this in"), queue("drop this")
	path := "/api/sessions/" + id + "/queue/"
	e.call("POST", path+steer, map[string]any{"op": "steer"}, 200, nil)
	e.call("POST", path+drop, map[string]any{"op": "remove"}, 200, nil)
	e.wantError(e.req("POST", path+steer, map[string]any{"op": "steer"}), 404, "QUEUE_ITEM_NOT_FOUND")
	e.wantError(e.req("POST", path+"nosuch", map[string]any{"op": "remove"}), 404, "QUEUE_ITEM_NOT_FOUND")
	e.wantError(e.req("POST", path+drop, map[string]any{"op": "later"}), 400, "INVALID_ARGUMENT")
	e.wantError(e.req("POST", "/api/sessions/nosuch/queue/"+steer, map[string]any{"op": "steer"}), 404, "SESSION_NOT_FOUND")

	e.call("POST", "/api/sessions/"+id+"/approvals/"+pending.Approval.ID, map[string]any{"decision": "allow-once"}, 200, nil)
	untilType(t, st, session.TypeTurnEnd)
	if st.retry != "1000" {
		t.Fatalf("session stream retry field %q", st.retry)
	}
	reqs := e.model.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d model requests, want 2 (one turn)", len(reqs))
	}
	body, _ := json.Marshal(reqs[1].Messages())
	if !strings.Contains(string(body), "steer this in") || strings.Contains(string(body), "drop this") {
		t.Fatalf("second step of the turn: %s", body)
	}
}
