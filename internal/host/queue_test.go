package host_test

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dsh-dev/dsh/internal/host"
	"github.com/dsh-dev/dsh/internal/llm"
	"github.com/dsh-dev/dsh/internal/llm/llmtest"
	"github.com/dsh-dev/dsh/internal/session"
	"github.com/dsh-dev/dsh/internal/session/sessiontest"
)

// TestUpdateQueueSteersAndRemoves: while a turn waits on an approval,
// one queued message is steered (it enters that turn's next step) and
// another removed (no turn ever carries it); unknown ids, bad ops and
// unknown sessions get their codes.
func TestUpdateQueueSteersAndRemoves(t *testing.T) {
	f := newFixtureWith(t, host.Config{}, askWrites)
	feed := f.h.Subscribe()
	defer feed.Close()
	info, ap := pendingApproval(t, f, feed, filepath.Join(f.cwd, "a.txt"), llmtest.Response{Text: "done with both"})
	id := info.Header.ID
	for _, m := range []struct{ id, text string }{{"m-steer", "steer me in"}, {"m-drop", "never sent"}} {
		msg := llm.Message{ID: m.id, Role: llm.RoleUser, Content: []llm.Block{llm.TextBlock(m.text)}}
		if err := f.h.Send(t.Context(), id, msg, host.DeliveryQueue); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.h.UpdateQueue(t.Context(), id, "m-steer", host.QueueSteer); err != nil {
		t.Fatal(err)
	}
	if err := f.h.UpdateQueue(t.Context(), id, "m-drop", host.QueueRemove); err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		sid, mid, op, code string
	}{
		"steered twice":   {id, "m-steer", host.QueueSteer, host.CodeQueueItemNotFound},
		"removed twice":   {id, "m-drop", host.QueueRemove, host.CodeQueueItemNotFound},
		"unknown message": {id, "nope", host.QueueSteer, host.CodeQueueItemNotFound},
		"bad op":          {id, "m-steer", "later", host.CodeInvalidArgument},
		"empty id":        {id, "", host.QueueRemove, host.CodeInvalidArgument},
		"unknown session": {"no-such-session", "m-steer", host.QueueSteer, host.CodeSessionNotFound},
	} {
		if err := f.h.UpdateQueue(t.Context(), tc.sid, tc.mid, tc.op); host.ErrorCode(err) != tc.code {
			t.Errorf("%s: %v, want %s", name, err, tc.code)
		}
	}
	if err := f.h.Answer(t.Context(), id, ap.ID, host.Answer{Decision: host.DecisionAllowOnce}); err != nil {
		t.Fatal(err)
	}
	out, err := f.h.RunUntilIdle(t.Context(), id)
	if err != nil || out.Text != "done with both" {
		t.Fatalf("outcome %+v, %v", out, err)
	}
	f.dispose(id)
	events := f.stored(id)
	if n := countType(events, session.TypeTurnStart); n != 1 {
		t.Fatalf("%d turns, want the steered message inside the first", n)
	}
	reqs := f.srv.Requests()
	body, _ := json.Marshal(reqs[len(reqs)-1].Messages())
	if !strings.Contains(string(body), "steer me in") || strings.Contains(string(body), "never sent") {
		t.Fatalf("the second step: %s", body)
	}
	var outcomes []string
	for _, sp := range sessiontest.EventsOf[session.InboxSpliced](t, events, session.TypeInboxSpliced) {
		if sp.Outcome != "" {
			outcomes = append(outcomes, sp.Outcome)
		}
	}
	if got := strings.Join(outcomes, ","); got != "steered,removed" {
		t.Errorf("splice outcomes %s", got)
	}
	sessiontest.CheckBalanced(t, events)
}
