package sqlite

import (
	"context"
	"reflect"
	"testing"

	"github.com/dsh-dev/dsh/internal/llm"
	"github.com/dsh-dev/dsh/internal/session"
)

// countingSource is the store as a session.Source, counting what the
// log reads back.
type countingSource struct {
	s     *Store
	reads map[string]int // by type
}

func (c *countingSource) ReadPage(ctx context.Context, id string, from int64, limit int) ([]session.Event, error) {
	page, err := c.s.ReadPage(ctx, id, from, limit)
	for _, e := range page {
		c.reads[e.Type]++
	}
	return page, err
}

// TestLeaseLoadLeavesChunksInTheStore: a leased load (what seeds a
// resumed session's log) gives the streamed chunks as released envelopes
// with their row's type, seq and time; a log seeded with them reads them
// back byte for byte when asked, and a typed scan of other types never
// asks for them.
func TestLeaseLoadLeavesChunksInTheStore(t *testing.T) {
	ctx := context.Background()
	s, _ := newStore(t)
	mustCreate(t, s, "s")
	var stored []session.Event
	add := func(typ string, data any) {
		stored = append(stored, ev(t, int64(len(stored)), typ, data))
	}
	add(session.TypeTurnStart, session.TurnStart{Turn: 1})
	for step := 1; step <= 700; step++ { // past one decode batch
		add(session.TypeStepStart, session.StepRef{Turn: 1, Step: step})
		add(session.TypeAssistantChunk, session.AssistantChunk{Turn: 1, Step: step, Chunk: llm.Chunk{Type: llm.ChunkTextDelta, Text: "hi \"there\""}})
		add(session.TypeAssistantChunk, session.AssistantChunk{Turn: 1, Step: step, Chunk: llm.Chunk{Type: llm.ChunkTextDelta, Text: "!"}})
		add(session.TypeAssistantMsg, session.AssistantMessage{Turn: 1, Step: step,
			Message: llm.Message{ID: "m", Role: llm.RoleAssistant, Content: []llm.Block{llm.TextBlock("hi")}}, Usage: &llm.Usage{InputTokens: int64(step), OutputTokens: 1}})
		add(session.TypeStepEnd, session.StepRef{Turn: 1, Step: step})
	}
	add(session.TypeTurnEnd, session.TurnEnd{Turn: 1})
	mustAppend(t, s, "s", stored...)

	_, full, err := s.Load(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	l := mustAcquire(t, s, "s", "test")
	h, seed, err := l.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(seed) != len(full) {
		t.Fatalf("leased load: %d events, want %d", len(seed), len(full))
	}
	for i, e := range seed {
		want := full[i]
		if session.Bare(want.Type) {
			if !e.Released() || e.Data != nil || e.Type != want.Type || e.Seq != want.Seq || e.Time != want.Time {
				t.Fatalf("event %d: %+v, want the released envelope of %+v", i, e, want)
			}
			continue
		}
		if e.Released() || !reflect.DeepEqual(e, want) {
			t.Fatalf("event %d: %+v, want %+v", i, e, want)
		}
	}
	log, err := session.NewLog(h, seed, nil)
	if err != nil {
		t.Fatal(err)
	}
	src := &countingSource{s: s, reads: map[string]int{}}
	log.SetSource(src)
	var usage int64
	if err := log.ScanTypes(ctx, 0, []string{session.TypeAssistantMsg, session.TypeTurnEnd}, func(e session.Event) error {
		if e.Type == session.TypeAssistantMsg {
			m, err := session.PeekAssistant(e.Data)
			if err != nil {
				return err
			}
			usage += m.Usage.InputTokens
		}
		return nil
	}); err != nil || usage != 700*701/2 {
		t.Fatalf("typed scan: usage %d, %v", usage, err)
	}
	if len(src.reads) != 0 {
		t.Fatalf("a scan of other types read back %v", src.reads)
	}
	got, err := log.Read(ctx, 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, full) {
		t.Fatal("the log read back differs from the store's events")
	}
	if src.reads[session.TypeAssistantChunk] == 0 {
		t.Fatal("the chunks were not read back")
	}
	// A log with no source says so instead of handing out nothing.
	bare, err := session.NewLog(h, seed, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bare.Read(ctx, 0, -1); err == nil {
		t.Fatal("a log without a source read back released events")
	}
}

// TestBareEnvelopeValidation: a chunk's envelope is its type, seq and
// time; one with source seqs or the ignorable flag is refused, so a
// leased load can leave its body unread without losing anything.
func TestBareEnvelopeValidation(t *testing.T) {
	s, _ := newStore(t)
	mustCreate(t, s, "s")
	for _, mut := range []func(*session.Event){
		func(e *session.Event) { e.Ignorable = true },
		func(e *session.Event) { e.SourceEventSeqs = []int64{0} },
	} {
		e := ev(t, 0, session.TypeAssistantChunk, session.AssistantChunk{Turn: 1, Step: 1, Chunk: llm.Chunk{Type: llm.ChunkTextDelta, Text: "x"}})
		mut(&e)
		if err := s.Append(context.Background(), "s", []session.Event{e}); err == nil {
			t.Fatalf("stored %+v", e)
		}
	}
}
