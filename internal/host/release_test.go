package host_test

import (
	"encoding/json"
	"testing"

	"github.com/dsh-dev/dsh/internal/host"
	"github.com/dsh-dev/dsh/internal/llm/llmtest"
	"github.com/dsh-dev/dsh/internal/session"
	"github.com/dsh-dev/dsh/internal/session/sessiontest"
)

// TestReleasedPayloadsReadBack runs a session over the real store with
// every durable payload released at once, and checks that what the
// surfaces read (the event pages, a follower from the start, a fork) is
// the stored log, payloads included, while the live log holds only
// envelopes of the released types.
func TestReleasedPayloadsReadBack(t *testing.T) {
	prev := session.SetSegmentSize(1)
	t.Cleanup(func() { session.SetSegmentSize(prev) })
	f := newFixture(t, host.Config{})
	f.srv.SetFallback(llmtest.LoopFallback("todo_write", `{"todos":[{"content":"keep going","status":"in_progress"}]}`, 4))
	info := f.create(host.CreateRequest{})
	id := info.Header.ID
	s, err := f.h.Follow(t.Context(), id, -1)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	f.send(id, "plan it", host.DeliveryQueue)
	live := until(t, s, isType(session.TypeTurnEnd))
	log, ok := f.h.Log(id)
	if !ok {
		t.Fatal("session not live")
	}
	if err := log.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}

	stored, err := f.app.Store.ReadFrom(t.Context(), id, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(stored) < len(live) {
		t.Fatalf("stored %d events, streamed %d", len(stored), len(live))
	}
	same := func(what string, got []session.Event) {
		t.Helper()
		for i, e := range got {
			w := stored[e.Seq]
			if e.Released() || e.Type != w.Type || string(e.Data) != string(w.Data) {
				t.Fatalf("%s: event %d (%s) = %q, stored %s %q", what, i, e.Type, e.Data, w.Type, w.Data)
			}
		}
	}
	same("live stream", live)

	released := 0
	for e := range log.View().All() {
		if e.Released() {
			released++
		}
	}
	if released < 4*4 {
		t.Errorf("%d events released after 4 steps, want every durable chunk, message, call and result", released)
	}

	// A follower that starts now reads the released payloads back.
	s2, err := f.h.Follow(t.Context(), id, -1)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	replay := until(t, s2, isType(session.TypeTurnEnd))
	same("replay", replay)
	if err := sessiontest.Check(replay); err != nil {
		t.Fatal(err)
	}
	page, _, err := f.h.Events(t.Context(), id, -1, 1000)
	if err != nil {
		t.Fatal(err)
	}
	same("events page", page)
	var am session.AssistantMessage
	for _, e := range page {
		if e.Type == session.TypeAssistantMsg {
			if err := json.Unmarshal(e.Data, &am); err != nil {
				t.Fatalf("assistant message %d: %v", e.Seq, err)
			}
		}
	}

	fork, err := f.h.Fork(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	forked, err := f.app.Store.ReadFrom(t.Context(), fork.Header.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range forked {
		if int(e.Seq) < len(stored) && e.Type == stored[e.Seq].Type && e.Type != session.TypeEndSeed && string(e.Data) != string(stored[e.Seq].Data) {
			t.Fatalf("fork event %d (%s) differs from its parent's", e.Seq, e.Type)
		}
	}
	if n := countType(forked, session.TypeToolResult); n != 4 {
		t.Errorf("the fork holds %d tool results, want 4", n)
	}
}
