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

	forked := storedFork(t, f, id)
	for _, e := range forked {
		if int(e.Seq) < len(stored) && e.Type == stored[e.Seq].Type && e.Type != session.TypeEndSeed && string(e.Data) != string(stored[e.Seq].Data) {
			t.Fatalf("fork event %d (%s) differs from its parent's", e.Seq, e.Type)
		}
	}
	if n := countType(forked, session.TypeToolResult); n != 4 {
		t.Errorf("the fork holds %d tool results, want 4", n)
	}
}

// TestColdResumeLeavesChunksInTheStore: a session reopened from the store
// holds its streamed chunks as released envelopes (their bodies were
// never read), and everything a surface reads of it — a follower from
// the start, the event pages, a fork — is still the stored log, chunk
// payloads included; the resumed turn's requests carry the history.
func TestColdResumeLeavesChunksInTheStore(t *testing.T) {
	f := newFixture(t, host.Config{})
	f.srv.Enqueue(llmtest.Response{Text: "first answer, streamed in pieces"}, llmtest.Response{Text: "second answer"})
	id := f.create(host.CreateRequest{}).Header.ID
	f.send(id, "one", host.DeliveryQueue)
	f.runIdle(id)
	f.dispose(id)
	before, err := f.app.Store.ReadFrom(t.Context(), id, 0)
	if err != nil {
		t.Fatal(err)
	}
	chunks := countType(before, session.TypeAssistantChunk)
	if chunks == 0 {
		t.Fatal("the first turn streamed no chunks")
	}

	f.send(id, "two", host.DeliveryQueue) // resumes it cold
	log, ok := f.h.Log(id)
	if !ok {
		t.Fatal("session not live after the send")
	}
	released := 0
	for e := range log.View().From(0) {
		if e.Seq < int64(len(before)) && e.Type == session.TypeAssistantChunk && e.Released() {
			released++
		}
	}
	if released != chunks {
		t.Fatalf("%d of the %d stored chunks are released in the resumed log", released, chunks)
	}
	out, err := f.h.RunUntilIdle(t.Context(), id)
	if err != nil || out.Text != "second answer" {
		t.Fatalf("resumed turn: %+v, %v", out, err)
	}
	body, _ := json.Marshal(f.srv.Requests()[1].Messages())
	if !strings.Contains(string(body), "first answer, streamed in pieces") {
		t.Fatalf("the resumed request lacks the first answer: %s", body)
	}

	stored, err := f.app.Store.ReadFrom(t.Context(), id, 0)
	if err != nil {
		t.Fatal(err)
	}
	same := func(what string, got []session.Event) {
		t.Helper()
		if len(got) == 0 {
			t.Fatalf("%s: no events", what)
		}
		for _, e := range got {
			w := stored[e.Seq]
			if e.Released() || e.Type != w.Type || e.Time != w.Time || string(e.Data) != string(w.Data) {
				t.Fatalf("%s: event %d (%s) = %q, stored %s %q", what, e.Seq, e.Type, e.Data, w.Type, w.Data)
			}
		}
	}
	s, err := f.h.Follow(t.Context(), id, -1)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var replay []session.Event
	for len(replay) < len(before) {
		replay = append(replay, until(t, s, isType(session.TypeTurnEnd))...)
	}
	same("follower from the start", replay)
	page, _, err := f.h.Events(t.Context(), id, -1, 1000)
	if err != nil {
		t.Fatal(err)
	}
	same("events page", page)
	forked := storedFork(t, f, id)
	if countType(forked, session.TypeAssistantChunk) != countType(stored, session.TypeAssistantChunk) {
		t.Fatal("the fork lost chunks")
	}
	for _, e := range forked {
		if e.Type == session.TypeAssistantChunk && string(e.Data) != string(stored[e.Seq].Data) {
			t.Fatalf("fork chunk %d differs from its parent's", e.Seq)
		}
	}
}

// storedFork forks session id and returns the fork's stored events.
func storedFork(t *testing.T, f *fixture, id string) []session.Event {
	t.Helper()
	fork, err := f.h.Fork(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	forked, err := f.app.Store.ReadFrom(t.Context(), fork.Header.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	return forked
}
