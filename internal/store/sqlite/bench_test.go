package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"testing"
	"time"

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

// Shape of the listing benchmark: 10,000 stored sessions in 20
// directories, every seventh one a child of the session before it.
const (
	listSessions = 10_000
	listDirs     = 20
)

// listChild reports whether session i of the listing benchmark is a child.
func listChild(i int) bool { return i%7 == 6 }

// listCount counts the benchmark's sessions in directory dir (-1: any),
// children included or not.
func listCount(dir int, children bool) int {
	n := 0
	for i := range listSessions {
		if (dir < 0 || i%listDirs == dir) && (children || !listChild(i)) {
			n++
		}
	}
	return n
}

// storeListing stores the listing benchmark's sessions in one transaction,
// each with a title, a turn and a last turn's state, as appends leave them.
func storeListing(b *testing.B, s *Store) {
	ctx := context.Background()
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		for i := range listSessions {
			h := session.Header{Version: session.FormatVersion, ID: fmt.Sprintf("019a%08d", i),
				CreatedAt: 1_700_000_000_000 + int64(i), Cwd: fmt.Sprintf("/work/project-%02d", i%listDirs)}
			if listChild(i) {
				h.ParentSession = fmt.Sprintf("019a%08d", i-1)
			}
			if err := s.insertSession(ctx, tx, h); err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, `UPDATE sessions SET title = ?, turns = 1, state = 'completed', next_seq = 7,
				updated_at = ? WHERE id = ?`, fmt.Sprintf("task number %d of the listing benchmark", i), h.CreatedAt, h.ID); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
}

// BenchmarkList10k lists 10,000 stored sessions: all of them (dsh
// sessions list --all), one directory's top-level sessions (dsh sessions
// list, GET /api/sessions?cwd=) and every top-level session.
func BenchmarkList10k(b *testing.B) {
	s, _ := newStore(b)
	storeListing(b, s)
	for _, c := range []struct {
		name string
		f    ListFilter
		want int
	}{
		{"all", ListFilter{}, listSessions},
		{"cwd-top-level", ListFilter{Cwd: "/work/project-03", TopLevelOnly: true}, listCount(3, false)},
		{"top-level", ListFilter{TopLevelOnly: true}, listCount(-1, false)},
	} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				es, err := s.List(context.Background(), c.f)
				if err != nil || len(es) != c.want {
					b.Fatalf("%d entries, want %d: %v", len(es), c.want, err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/1e6, "ms/list")
		})
	}
}

// BenchmarkNewSession is the store's share of a new `dsh run` before its
// first model request, on a database that already holds 200 sessions:
// open the store, create the session, take its lease, append the first
// batch (a 32 KiB request header, as the built-in tool set's, and four
// small events), then release and close. Each stage is reported in µs.
func BenchmarkNewSession(b *testing.B) {
	ctx := context.Background()
	_, path := newStore(b)
	pad := strings.Repeat("x", 32<<10)
	batch := func(b *testing.B) []session.Event {
		return []session.Event{
			ev(b, 0, session.TypeTurnStart, session.TurnStart{Turn: 0}),
			ev(b, 1, session.TypeStepStart, session.StepRef{Turn: 0}),
			ev(b, 2, session.TypeUserMessage, llm.Message{ID: "u", Role: llm.RoleUser, Content: []llm.Block{llm.TextBlock("hi")}}),
			ev(b, 3, session.TypeRequestHeader, session.RequestHeader{Header: session.RequestHeaderData{System: pad}, Reason: "initial"}),
			ev(b, 4, session.TypeRequestContext, session.RequestContext{Provider: "p", Model: "m"}),
		}
	}
	{
		s, err := Open(ctx, path)
		if err != nil {
			b.Fatal(err)
		}
		for i := range 200 {
			id := fmt.Sprint("old", i)
			mustCreate(b, s, id)
			mustAppend(b, s, id, batch(b)...)
		}
		s.Close()
	}
	var open, create, acquire, appendT, closeT time.Duration
	n := 0
	for b.Loop() {
		t0 := time.Now()
		s, err := Open(ctx, path)
		if err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		id := fmt.Sprint("new", n)
		n++
		mustCreate(b, s, id)
		t2 := time.Now()
		l, err := s.Acquire(ctx, id, "bench")
		if err != nil {
			b.Fatal(err)
		}
		t3 := time.Now()
		if err := l.Append(ctx, id, batch(b)); err != nil {
			b.Fatal(err)
		}
		t4 := time.Now()
		if err := l.Release(ctx); err != nil {
			b.Fatal(err)
		}
		s.Close()
		t5 := time.Now()
		open += t1.Sub(t0)
		create += t2.Sub(t1)
		acquire += t3.Sub(t2)
		appendT += t4.Sub(t3)
		closeT += t5.Sub(t4)
	}
	us := func(d time.Duration) float64 { return float64(d.Microseconds()) / float64(n) }
	b.ReportMetric(us(open), "open-µs")
	b.ReportMetric(us(create), "create-µs")
	b.ReportMetric(us(acquire), "acquire-µs")
	b.ReportMetric(us(appendT), "append-µs")
	b.ReportMetric(us(closeT), "close-µs")
}

// BenchmarkAppendSearchable appends turns whose events are all indexed
// but the bookkeeping (a prompt, a reply with reasoning, a tool call and
// a 2 KiB result), in batches of 9 (one turn) per append: the share of
// an append that the full-text index adds, in ns/event and ns/turn.
func BenchmarkAppendSearchable(b *testing.B) {
	s, _ := newStore(b)
	const turns = 200
	out := strings.Repeat("ok  github.com/example/pkg/sub 0.123s coverage: 81.2% of statements\n", 30)
	n := 0
	for b.Loop() {
		id := fmt.Sprint("bench", n)
		n++
		mustCreate(b, s, id)
		for t := range turns {
			first := int64(t * 9)
			mustAppend(b, s, id, searchLog(b, first, fmt.Sprintf("turn %d: please fix the failing parser test in internal/parse", t),
				"The parser test fails because the tokenizer drops trailing whitespace; I will fix the tokenizer.",
				"go test ./internal/parse/...", out)...)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(n*turns*9), "ns/event")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(n*turns), "ns/turn")
}

// BenchmarkAppendStep is an agent step's two commits on a session that
// keeps growing (stepEvents: the model's message and tool call, then the
// result), each its own append: the store's share of a step's CPU.
func BenchmarkAppendStep(b *testing.B) {
	s, _ := newStore(b)
	mustCreate(b, s, "x")
	ctx := context.Background()
	step := 0
	for b.Loop() {
		first, second := stepEvents(b, int64(step*5), step)
		step++
		if err := s.Append(ctx, "x", first); err != nil {
			b.Fatal(err)
		}
		if err := s.Append(ctx, "x", second); err != nil {
			b.Fatal(err)
		}
	}
}
