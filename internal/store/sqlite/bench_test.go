package sqlite

import (
	"context"
	"fmt"
	"testing"

	"github.com/dsh-dev/dsh/internal/llm"
	"github.com/dsh-dev/dsh/internal/session"
)

const (
	benchEvents = 100_000
	benchBatch  = 256 // session.Log's flush size
)

// benchLog is a realistic stream of small events: turns of 1000 events,
// mostly text-delta chunks, each turn balanced.
func benchLog(b *testing.B) []session.Event {
	events := make([]session.Event, 0, benchEvents)
	add := func(typ string, data any) {
		events = append(events, ev(b, int64(len(events)), typ, data))
	}
	for turn := 0; len(events) < benchEvents; turn++ {
		add(session.TypeTurnStart, session.TurnStart{Turn: turn})
		add(session.TypeStepStart, session.StepRef{Turn: turn})
		for range 995 {
			add(session.TypeAssistantChunk, session.AssistantChunk{Turn: turn, Chunk: llm.Chunk{Type: llm.ChunkTextDelta, Text: "some streamed words "}})
		}
		add(session.TypeAssistantMsg, session.AssistantMessage{Turn: turn, Message: llm.Message{
			ID: fmt.Sprint("m", turn), Role: llm.RoleAssistant, Content: []llm.Block{llm.TextBlock("done")}, Source: llm.Source{Kind: "model"}}})
		add(session.TypeStepEnd, session.StepRef{Turn: turn})
		add(session.TypeTurnEnd, session.TurnEnd{Turn: turn, Reason: session.TurnEndReason{Kind: session.EndCompleted}})
	}
	return events[:benchEvents]
}

func appendAll(b *testing.B, s *Store, id string, events []session.Event) {
	for i := 0; i < len(events); i += benchBatch {
		if err := s.Append(context.Background(), id, events[i:min(i+benchBatch, len(events))]); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAppend appends 100k small events in batches of 256 per op.
func BenchmarkAppend(b *testing.B) {
	s, _ := newStore(b)
	events := benchLog(b)
	n := 0
	for b.Loop() {
		id := fmt.Sprint("bench", n)
		n++
		mustCreate(b, s, id)
		appendAll(b, s, id, events)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(n*benchEvents), "ns/event")
}

// BenchmarkLoad replays (reads, decodes, validates, checks balance) a
// 100k-event session per op.
func BenchmarkLoad(b *testing.B) {
	s, _ := newStore(b)
	mustCreate(b, s, "bench")
	appendAll(b, s, "bench", benchLog(b))
	n := 0
	for b.Loop() {
		_, events, err := s.Load(context.Background(), "bench")
		if err != nil || len(events) != benchEvents {
			b.Fatal(len(events), err)
		}
		n++
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(n*benchEvents), "ns/event")
}
