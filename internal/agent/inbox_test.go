package agent_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/dsh-dev/dsh/internal/agent"
	"github.com/dsh-dev/dsh/internal/llm"
	"github.com/dsh-dev/dsh/internal/llm/llmtest"
	"github.com/dsh-dev/dsh/internal/proc/proctest"
	"github.com/dsh-dev/dsh/internal/session"
)

// TestPromoteEntersTheRunningTurn: a message queued for the next turn
// while a turn runs, then promoted, enters that turn's next step; no
// second turn runs for it.
func TestPromoteEntersTheRunningTurn(t *testing.T) {
	h := newHarness(t)
	fifo, lines := proctest.Fifo(t)
	// The command blocks on a gate until the message is queued and
	// promoted, so both land while the turn is still running.
	gate := filepath.Join(t.TempDir(), "gate")
	if err := syscall.Mkfifo(gate, 0o600); err != nil {
		t.Fatal(err)
	}
	h.srv.Enqueue(
		llmtest.Response{ToolCalls: []llmtest.ToolCall{bashCall("echo go > " + fifo + "; read x < " + gate)}},
		llmtest.Response{Text: "promoted"},
	)
	later := agent.NewUserMessage("queued then steered")
	promoted := make(chan error, 1)
	go func() {
		<-lines
		err := h.agent.Queue(later)
		if err == nil {
			err = h.agent.Promote(later.ID)
		}
		if f, ferr := os.OpenFile(gate, os.O_WRONLY, 0); ferr == nil {
			_, _ = f.WriteString("go\n")
			f.Close()
		}
		promoted <- err
	}()
	out := h.run(t.Context(), "hi")
	if err := <-promoted; err != nil {
		t.Fatalf("queue+promote: %v", err)
	}
	if out.Reason.Kind != session.EndCompleted || out.Turn != 1 || out.Text != "promoted" {
		t.Fatalf("outcome %+v", out)
	}
	reqs := h.srv.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests, want 2 (one turn)", len(reqs))
	}
	msgs := reqs[1].Messages()
	if last := msgs[len(msgs)-1]; last["role"] != "user" || msgText(last) != "queued then steered" {
		t.Errorf("promoted message not in step 2: %v", msgs)
	}
	if nt, ns := h.agent.Pending(); nt != 0 || ns != 0 {
		t.Errorf("pending %d/%d after the turn", nt, ns)
	}
	var outcomes []string
	for _, sp := range eventsOf[session.InboxSpliced](t, h.log.Events(), session.TypeInboxSpliced) {
		if sp.RemovedCount > 0 {
			outcomes = append(outcomes, sp.Target+":"+sp.Outcome)
		}
	}
	// The prompt claimed at turn start, the promotion, the step's claim.
	if got := strings.Join(outcomes, ","); got != "next-turn:,next-turn:steered,next-step:" {
		t.Errorf("removals %s", got)
	}
	checkBalanced(t, h.log.Events())
}

// TestPromoteAndUnqueueSurviveResume: promotions and removals are in the
// log, so a resumed agent rebuilds the same inbox; a promoted message
// starts a turn of an idle serving agent; the promoted prompt's
// user/message is stored as a reference to the splice that moved it.
func TestPromoteAndUnqueueSurviveResume(t *testing.T) {
	h := newHarness(t)
	sink := &memSink{}
	hd := session.Header{ID: "promote-resume", Cwd: t.TempDir()}
	log, err := session.NewLog(hd, nil, sink)
	if err != nil {
		t.Fatal(err)
	}
	first := h.newAgent(log)
	a, b, c := agent.NewUserMessage("alpha"), agent.NewUserMessage("beta"), agent.NewUserMessage("gamma")
	for _, m := range []llm.Message{a, b, c} {
		if err := first.Queue(m); err != nil {
			t.Fatal(err)
		}
	}
	if err := first.Promote(c.ID); err != nil {
		t.Fatal(err)
	}
	if err := first.Unqueue(a.ID); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{a.ID, c.ID, "nope"} {
		err := first.Unqueue(id)
		var qe *agent.QueueItemError
		if !errors.As(err, &qe) || qe.Code() != agent.CodeQueueItemNotFound || qe.ID != id {
			t.Errorf("Unqueue(%s) = %v, want QUEUE_ITEM_NOT_FOUND", id, err)
		}
		if err := first.Promote(id); !errors.As(err, &qe) {
			t.Errorf("Promote(%s) = %v, want QUEUE_ITEM_NOT_FOUND", id, err)
		}
	}
	if nt, ns := first.Pending(); nt != 1 || ns != 1 {
		t.Fatalf("pending %d/%d, want 1/1", nt, ns)
	}
	if err := log.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}

	resumed, err := session.NewLog(hd, append([]session.Event(nil), sink.events...), sink)
	if err != nil {
		t.Fatal(err)
	}
	second := h.newAgent(resumed)
	if nt, ns := second.Pending(); nt != 1 || ns != 1 {
		t.Fatalf("resumed pending %d/%d, want 1/1", nt, ns)
	}
	// Promote the last queued message on the idle, serving agent: Serve
	// wakes and one turn takes both (next-step first).
	h.srv.Enqueue(llmtest.Response{Text: "done"})
	outcomes := make(chan agent.Outcome, 1)
	ctx, cancel := context.WithCancel(t.Context())
	served := make(chan error, 1)
	go func() { served <- second.Serve(ctx, func(o agent.Outcome) { outcomes <- o }) }()
	if err := second.Promote(b.ID); err != nil {
		t.Fatal(err)
	}
	o := <-outcomes
	cancel()
	<-served
	if o.Text != "done" || o.Turn != 1 {
		t.Fatalf("outcome %+v", o)
	}
	msgs := h.srv.Requests()[0].Messages()
	var texts []string
	for _, m := range msgs[1:] {
		texts = append(texts, msgText(m))
	}
	if got := strings.Join(texts, ","); got != "gamma,beta" {
		t.Errorf("request user texts %q, want gamma,beta", got)
	}
	if err := resumed.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	// Stored user/messages are references (no text of their own).
	for _, e := range sink.events {
		if e.Type == session.TypeUserMessage && strings.Contains(string(e.Data), `"text"`) {
			t.Errorf("user/message stored whole: %s", e.Data)
		}
	}
	if _, err := session.ExpandEvents(sink.events); err != nil {
		t.Errorf("stored log does not expand: %v", err)
	}
	checkBalanced(t, resumed.Events())
}
