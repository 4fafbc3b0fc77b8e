package host_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dsh-dev/dsh/internal/host"
	"github.com/dsh-dev/dsh/internal/llm/llmtest"
	"github.com/dsh-dev/dsh/internal/session"
)

func writeCall(path, content string) llmtest.ToolCall {
	b, _ := json.Marshal(map[string]string{"file_path": path, "content": content})
	return llmtest.ToolCall{Name: "write", Arguments: string(b)}
}

// nextFeed reads f until an event satisfies match.
func nextFeed(t *testing.T, f *host.Feed, match func(host.FeedEvent) bool) host.FeedEvent {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	for {
		batch, err := f.Next(ctx)
		if err != nil {
			t.Fatalf("feed: %v", err)
		}
		for _, e := range batch {
			if match(e) {
				return e
			}
		}
	}
}

func feedType(typ string) func(host.FeedEvent) bool {
	return func(e host.FeedEvent) bool { return e.Type == typ }
}

// pendingApproval starts a turn whose write a rule asks about, and
// returns the approval once it is pending.
func pendingApproval(t *testing.T, f *fixture, feed *host.Feed, file string, more ...llmtest.Response) (host.Info, host.Approval) {
	t.Helper()
	f.srv.Enqueue(append([]llmtest.Response{{ToolCalls: []llmtest.ToolCall{writeCall(file, "written\n")}}}, more...)...)
	info := f.create(host.CreateRequest{})
	f.send(info.Header.ID, "write the file", host.DeliveryQueue)
	ev := nextFeed(t, feed, feedType(host.FeedApprovalPending))
	if ev.Approval == nil || ev.SessionID != info.Header.ID || ev.Approval.ToolName != "write" {
		t.Fatalf("approval/pending %+v", ev)
	}
	got, err := f.h.Get(t.Context(), info.Header.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != host.StatusAwaitingApproval || len(got.Pending) != 1 || got.Pending[0].ID != ev.Approval.ID {
		t.Fatalf("session while asking: status %s, pending %+v", got.Status, got.Pending)
	}
	return info, *ev.Approval
}

// TestApprovalAllowWritesTheFile: an ask waits in the host's queue with
// the logged approval id; allow-once lets the write run; a second answer
// is refused with APPROVAL_NOT_PENDING, an unknown id APPROVAL_NOT_FOUND.
func TestApprovalAllowWritesTheFile(t *testing.T) {
	f := newFixtureWith(t, host.Config{}, askWrites)
	feed := f.h.Subscribe()
	defer feed.Close()
	file := filepath.Join(f.cwd, "out.txt")
	info, ap := pendingApproval(t, f, feed, file, llmtest.Response{Text: "written"})
	id := info.Header.ID
	if all := f.h.Approvals(""); len(all) != 1 || all[0].ID != ap.ID {
		t.Fatalf("Approvals() = %+v", all)
	}
	if err := f.h.Answer(t.Context(), id, ap.ID, host.Answer{Decision: "maybe"}); host.ErrorCode(err) != host.CodeInvalidArgument {
		t.Fatalf("bad decision: %v", err)
	}
	if err := f.h.Answer(t.Context(), id, ap.ID, host.Answer{Decision: host.DecisionAllowOnce}); err != nil {
		t.Fatal(err)
	}
	if err := f.h.Answer(t.Context(), id, ap.ID, host.Answer{Decision: host.DecisionReject}); host.ErrorCode(err) != host.CodeApprovalNotPending {
		t.Fatalf("second answer: %v", err)
	}
	if err := f.h.Answer(t.Context(), id, "no-such-approval", host.Answer{Decision: host.DecisionReject}); host.ErrorCode(err) != host.CodeApprovalNotFound {
		t.Fatalf("unknown approval: %v", err)
	}
	res := nextFeed(t, feed, feedType(host.FeedApprovalResolved))
	if res.ApprovalID != ap.ID || res.Outcome != host.OutcomeAllowedOnce {
		t.Fatalf("approval/resolved %+v", res)
	}
	out, err := f.h.RunUntilIdle(t.Context(), id)
	if err != nil || out.Text != "written" {
		t.Fatalf("run: %+v, %v", out, err)
	}
	if b, err := os.ReadFile(file); err != nil || string(b) != "written\n" {
		t.Fatalf("file: %q, %v", b, err)
	}
	// The logged approval carries the id the host published.
	events, _, err := f.h.Events(t.Context(), id, -1, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(eventsOf(events, session.TypeApprovalDecided), ap.ID) {
		t.Errorf("approval/decided does not name %s", ap.ID)
	}
}

// TestApprovalRejectWithFeedback: a rejection's feedback reaches the
// model in the tool result.
func TestApprovalRejectWithFeedback(t *testing.T) {
	f := newFixtureWith(t, host.Config{}, askWrites)
	feed := f.h.Subscribe()
	defer feed.Close()
	file := filepath.Join(f.cwd, "out.txt")
	info, ap := pendingApproval(t, f, feed, file, llmtest.Response{Text: "ok, I will not"})
	const feedback = "write to notes.md instead"
	if err := f.h.Answer(t.Context(), info.Header.ID, ap.ID, host.Answer{Decision: host.DecisionReject, Feedback: feedback}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.h.RunUntilIdle(t.Context(), info.Header.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(file); !os.IsNotExist(err) {
		t.Fatalf("rejected write happened: %v", err)
	}
	reqs := f.srv.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d model requests", len(reqs))
	}
	body, _ := json.Marshal(reqs[1].Messages())
	if !strings.Contains(string(body), "rejected by the user: "+feedback) {
		t.Fatalf("the model was not told the feedback: %s", body)
	}
	res := nextFeed(t, feed, feedType(host.FeedApprovalResolved))
	if res.Outcome != host.OutcomeRejected {
		t.Fatalf("resolved %+v", res)
	}
}

// TestCancelResolvesPendingApproval: cancelling the turn resolves its
// pending approval as cancelled; answering it afterwards is refused.
func TestCancelResolvesPendingApproval(t *testing.T) {
	f := newFixtureWith(t, host.Config{}, askWrites)
	feed := f.h.Subscribe()
	defer feed.Close()
	info, ap := pendingApproval(t, f, feed, filepath.Join(f.cwd, "out.txt"))
	if err := f.h.Cancel(t.Context(), info.Header.ID, false); err != nil {
		t.Fatal(err)
	}
	res := nextFeed(t, feed, feedType(host.FeedApprovalResolved))
	if res.ApprovalID != ap.ID || res.Outcome != host.OutcomeCancelled {
		t.Fatalf("resolved %+v", res)
	}
	out, err := f.h.RunUntilIdle(t.Context(), info.Header.ID)
	if err != nil || out.Reason.Kind != session.EndAborted || out.Reason.Cause != "user" {
		t.Fatalf("outcome %+v, %v", out, err)
	}
	if err := f.h.Answer(t.Context(), info.Header.ID, ap.ID, host.Answer{Decision: host.DecisionAllowOnce}); host.ErrorCode(err) != host.CodeApprovalNotPending {
		t.Fatalf("answer after cancel: %v", err)
	}
	if p := f.h.Approvals(""); len(p) != 0 {
		t.Fatalf("still pending: %+v", p)
	}
}

func eventsOf(events []session.Event, typ string) string {
	var b strings.Builder
	for _, e := range events {
		if e.Type == typ {
			b.Write(e.Data)
		}
	}
	return b.String()
}
