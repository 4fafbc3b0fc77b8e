package agent_test

import (
	"context"
	"sync"
	"testing"

	"github.com/dsh-dev/dsh/internal/agent"
	"github.com/dsh-dev/dsh/internal/llm/llmtest"
	"github.com/dsh-dev/dsh/internal/session"
)

// stallingSink blocks the first cancellable append (the flush before a
// model request) until its context ends.
type stallingSink struct {
	entered chan struct{}
	once    sync.Once

	mu     sync.Mutex
	stored []session.Event
}

func (s *stallingSink) Append(ctx context.Context, _ string, events []session.Event) error {
	stall := false
	if ctx.Done() != nil {
		s.once.Do(func() { stall = true })
	}
	if stall {
		close(s.entered)
		<-ctx.Done()
		return context.Cause(ctx)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stored = append(s.stored, events...)
	return nil
}

// TestCancelDuringRequestFlush: a turn cancelled while the log is being
// written before its model request ends aborted; Run does not fail as if
// the log could not be written, and the pending events reach the store
// when Run returns.
func TestCancelDuringRequestFlush(t *testing.T) {
	h := newHarness(t)
	h.srv.Enqueue(llmtest.Response{Text: "never requested"})
	sink := &stallingSink{entered: make(chan struct{})}
	log, err := session.NewLog(session.Header{ID: "flush-cancel", Cwd: t.TempDir()}, nil, sink)
	if err != nil {
		t.Fatal(err)
	}
	a := h.newAgent(log)
	if err := a.Queue(agent.NewUserMessage("hi")); err != nil {
		t.Fatal(err)
	}
	type result struct {
		out agent.Outcome
		err error
	}
	done := make(chan result, 1)
	go func() {
		out, err := a.Run(t.Context())
		done <- result{out, err}
	}()
	<-sink.entered
	if err := a.Cancel("user", true); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil {
		t.Fatalf("Run failed: %v", r.err)
	}
	if r.out.Reason.Kind != session.EndAborted || r.out.Reason.Cause != "user" {
		t.Fatalf("outcome %+v", r.out.Reason)
	}
	if h.srv.RequestCount() != 0 {
		t.Fatal("the model was called for a cancelled turn")
	}
	sink.mu.Lock()
	defer sink.mu.Unlock()
	if n := int64(len(sink.stored)); n != int64(log.Len()) || sink.stored[n-1].Type != session.TypeTurnEnd {
		t.Fatalf("stored %d of %d events", n, log.Len())
	}
	checkBalanced(t, sink.stored)
}
