package session

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/dsh-dev/dsh/internal/llm"
)

// storeSink is a sink that is also a Source, as the SQLite store is.
type storeSink struct {
	mu      sync.Mutex
	events  []Event
	readErr error
	reads   int
}

func (s *storeSink) Append(_ context.Context, _ string, evs []Event) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(evs) > 0 && evs[0].Seq != int64(len(s.events)) {
		return errors.New("seq conflict")
	}
	s.events = append(s.events, evs...)
	return nil
}

func (s *storeSink) ReadPage(_ context.Context, _ string, from int64, limit int) ([]Event, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reads++
	if s.readErr != nil {
		return nil, s.readErr
	}
	if from >= int64(len(s.events)) {
		return nil, nil
	}
	return append([]Event(nil), s.events[from:min(from+int64(limit), int64(len(s.events)))]...), nil
}

// withSegmentSize sets the segment size of the logs a test creates.
func withSegmentSize(t *testing.T, n int) {
	prev := SetSegmentSize(n)
	t.Cleanup(func() { SetSegmentSize(prev) })
}

// envelopes returns a copy of the log's envelopes.
func envelopes(l *Log) []Event {
	v := l.View()
	return v.Slice(0, v.Len())
}

// appendStep appends one step's worth of events: a turn start, chunks,
// the assistant message with a tool call, the call and its result.
func appendStep(t *testing.T, l *Log, step int) {
	t.Helper()
	must := func(typ string, data any, opts ...AppendOption) {
		t.Helper()
		if _, err := l.Append(typ, data, opts...); err != nil {
			t.Fatal(err)
		}
	}
	id := fmt.Sprintf("c%d", step)
	must(TypeStepStart, StepRef{Turn: 1, Step: step})
	must(TypeAssistantChunk, AssistantChunk{Turn: 1, Step: step, Chunk: llm.Chunk{Text: "thinking about " + id}})
	must(TypeAssistantMsg, AssistantMessage{Turn: 1, Step: step, Message: llm.Message{ID: "a-" + id, Role: llm.RoleAssistant,
		Content: []llm.Block{{Type: llm.BlockToolCall, ToolCallID: id, Name: "bash", Arguments: `{"command":"true"}`}}}}, Surface())
	must(TypeToolCall, ToolCall{Turn: 1, Step: step, CallID: id, Name: "bash", Arguments: `{"command":"true"}`})
	must(TypeToolResult, ToolResult{Turn: 1, Step: step, CallID: id, Name: "bash",
		Content: []llm.Block{llm.TextBlock(strings.Repeat("output of "+id+" ", 40))}}, Surface())
}

// sourcedLog returns an empty log over a store-like sink that is also
// its source, so it seals.
func sourcedLog(t *testing.T) (*Log, *storeSink) {
	t.Helper()
	sink := &storeSink{}
	l, err := NewLog(Header{ID: "s1"}, nil, sink)
	if err != nil {
		t.Fatal(err)
	}
	l.SetSource(sink)
	return l, sink
}

// threeSteps returns a log over a store-like sink, sealing, holding a
// turn start, a prompt and three steps.
func threeSteps(t *testing.T) (*Log, *storeSink) {
	t.Helper()
	l, sink := sourcedLog(t)
	if _, err := l.Append(TypeTurnStart, TurnStart{Turn: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Append(TypeUserMessage, userMsg("go"), Surface()); err != nil {
		t.Fatal(err)
	}
	for step := 1; step <= 3; step++ {
		appendStep(t, l, step)
	}
	return l, sink
}

func TestReleaseKeepsEnvelopesAndReadsPayloadsBack(t *testing.T) {
	withSegmentSize(t, 1)
	l, sink := threeSteps(t)
	before := envelopes(l) // a view taken before the release
	history := l.Messages()
	if err := l.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	appendStep(t, l, 4) // pending: not durable, so not released

	view := envelopes(l)
	released := 0
	for _, e := range view {
		switch {
		case e.Released():
			released++
			if !Releasable(e.Type) || e.Seq >= int64(len(before)) || e.Data != nil {
				t.Errorf("event %d (%s) released: durable %d, data %q", e.Seq, e.Type, len(before), e.Data)
			}
			var v any
			var rel *ReleasedError
			if err := e.Decode(&v); !errors.As(err, &rel) || rel.Seq != e.Seq {
				t.Errorf("decode of released event %d: %v", e.Seq, err)
			}
		case Releasable(e.Type) && e.Seq < int64(len(before)):
			t.Errorf("durable %s event %d kept its data", e.Type, e.Seq)
		case e.Data == nil:
			t.Errorf("event %d (%s) lost its data", e.Seq, e.Type)
		}
	}
	if released != 12 {
		t.Errorf("released %d events, want the 12 chunk/message/call/result events of the 3 durable steps", released)
	}
	for i, e := range before {
		if e.Released() || e.Data == nil {
			t.Fatalf("the view taken before the release changed at %d: %+v", i, e)
		}
	}
	if got := l.Messages(); len(got) != len(history)+2 || fmt.Sprint(got[:len(history)]) != fmt.Sprint(history) {
		t.Errorf("history changed by the release: %d messages, had %d", len(got), len(history))
	}

	// Every reader that needs payloads gets the events as appended.
	if err := l.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	want := sink.events
	all, err := l.Read(t.Context(), 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	same := func(what string, got []Event, want []Event) {
		t.Helper()
		if len(got) != len(want) {
			t.Fatalf("%s: %d events, want %d", what, len(got), len(want))
		}
		for i := range got {
			if got[i].Released() || string(got[i].Data) != string(want[i].Data) || got[i].Type != want[i].Type || got[i].Seq != want[i].Seq {
				t.Fatalf("%s: event %d = %s %q, want %s %q", what, i, got[i].Type, got[i].Data, want[i].Type, want[i].Data)
			}
		}
	}
	same("Read", all, want)
	same("Events", l.Events(), want)
	var scanned []Event
	if err := l.Scan(t.Context(), 3, func(e Event) error { scanned = append(scanned, e); return nil }); err != nil {
		t.Fatal(err)
	}
	same("Scan from 3", scanned, want[3:])
	if e, err := l.At(t.Context(), 5); err != nil || string(e.Data) != string(want[5].Data) {
		t.Errorf("At(5) = %+v, %v", e, err)
	}
	f := l.Follow(0)
	defer f.Close()
	var followed []Event
	for int64(len(followed)) < int64(len(want)) {
		evs, err := f.Next(t.Context(), 7)
		if err != nil {
			t.Fatal(err)
		}
		followed = append(followed, evs...)
	}
	same("Follow", followed, want)
}

func TestReleaseReadBackErrors(t *testing.T) {
	withSegmentSize(t, 1)
	l, sink := sourcedLog(t)
	appendStep(t, l, 1)
	if err := l.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	sink.mu.Lock()
	sink.readErr = errors.New("disk gone")
	sink.mu.Unlock()
	if _, err := l.Read(t.Context(), 0, -1); err == nil || !strings.Contains(err.Error(), "disk gone") {
		t.Errorf("Read with a failing source: %v", err)
	}
	f := l.Follow(0)
	defer f.Close()
	if _, err := f.Next(t.Context(), 0); err == nil || !strings.Contains(err.Error(), "disk gone") {
		t.Errorf("Follow with a failing source: %v", err)
	}
	if f.Lag() != int64(l.Len()) {
		t.Errorf("a failed read moved the follower: lag %d of %d", f.Lag(), l.Len())
	}

	// A store that disagrees with the log is an error, not a wrong event.
	sink.mu.Lock()
	sink.readErr = nil
	sink.events[1].Type = TypeStepEnd
	sink.mu.Unlock()
	if _, err := l.Read(t.Context(), 0, -1); err == nil || !strings.Contains(err.Error(), "in the store") {
		t.Errorf("Read of a disagreeing store: %v", err)
	}
}

func TestNoReleaseWithoutSourceOrBelowThreshold(t *testing.T) {
	for _, tc := range []struct {
		name      string
		threshold int
		source    bool
	}{{"no source", 1, false}, {"segment not full", 1 << 20, true}} {
		t.Run(tc.name, func(t *testing.T) {
			withSegmentSize(t, tc.threshold)
			sink := &storeSink{}
			l, err := NewLog(Header{ID: "s1"}, nil, sink)
			if err != nil {
				t.Fatal(err)
			}
			if tc.source {
				l.SetSource(sink)
			}
			appendStep(t, l, 1)
			if err := l.Flush(t.Context()); err != nil {
				t.Fatal(err)
			}
			for _, e := range envelopes(l) {
				if e.Released() || e.Data == nil {
					t.Errorf("event %d released", e.Seq)
				}
			}
			if sink.reads != 0 {
				t.Errorf("%d reads", sink.reads)
			}
		})
	}
}

// TestReleaseOfASeed: a resumed log's seed is durable, so the first
// flush past the threshold releases its payloads too.
func TestReleaseOfASeed(t *testing.T) {
	withSegmentSize(t, 1)
	sink := &storeSink{}
	first, err := NewLog(Header{ID: "s1"}, nil, sink)
	if err != nil {
		t.Fatal(err)
	}
	appendStep(t, first, 1)
	if err := first.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	l, err := NewLog(Header{ID: "s1"}, append([]Event(nil), sink.events...), sink)
	if err != nil {
		t.Fatal(err)
	}
	l.SetSource(sink)
	if _, err := l.Append(TypeEndSeed, struct{}{}); err != nil {
		t.Fatal(err)
	}
	if err := l.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range envelopes(l) {
		if e.Released() {
			n++
		}
	}
	if n != 4 {
		t.Errorf("released %d seed events, want 4", n)
	}
	if got := l.Messages(); len(got) != 2 {
		t.Errorf("history of the resumed log: %d messages", len(got))
	}
}

// TestReleaseRacesReaders: readers of earlier views and followers run
// while appends flush and release (run with -race).
func TestReleaseRacesReaders(t *testing.T) {
	withSegmentSize(t, 1)
	l, _ := sourcedLog(t)
	l.Observe(func(e Event) {
		if e.Released() || e.Data == nil {
			t.Errorf("observer got event %d without data", e.Seq)
		}
	})
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	wg.Go(func() {
		// Flushes race the appends' deliveries: nothing undelivered
		// may be released.
		for ctx.Err() == nil {
			_ = l.Flush(ctx)
		}
	})
	wg.Go(func() {
		f := l.Follow(0)
		defer f.Close()
		for {
			evs, err := f.Next(ctx, 3)
			if err != nil {
				return
			}
			for _, e := range evs {
				if e.Released() || e.Data == nil {
					t.Errorf("follower got event %d without data", e.Seq)
				}
			}
		}
	})
	wg.Go(func() {
		for ctx.Err() == nil {
			for e := range l.View().All() {
				_ = len(e.Data)
			}
		}
	})
	// A second appender: while one delivers, the other's event waits
	// undelivered, durable once a flush writes it.
	wg.Go(func() {
		for i := 0; ctx.Err() == nil && i < 2000; i++ {
			if _, err := l.Append(TypeToolResult, ToolResult{CallID: fmt.Sprint("x", i), Content: []llm.Block{llm.TextBlock("x")}}, Surface()); err != nil {
				t.Error(err)
				return
			}
		}
	})
	for step := 1; step <= 40; step++ {
		appendStep(t, l, step)
		if err := l.Flush(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	cancel()
	wg.Wait()
}

// TestSealedEnvelopesMatch: a sealed segment gives back every envelope
// as it was appended (type, seq, time, flags, surface op, sources), with
// the data of the non-releasable types and none of the releasable ones.
func TestSealedEnvelopesMatch(t *testing.T) {
	withSegmentSize(t, 3)
	l, _ := threeSteps(t)
	if _, err := l.Append(TypeAssistantMsg, AssistantMessage{Turn: 1, Step: 4, Message: llm.Message{ID: "summary", Role: llm.RoleAssistant,
		Content: []llm.Block{llm.TextBlock("summary")}}}, func(e *Event) {
		e.SurfaceOp, e.SourceEventSeqs = &SurfaceOp{Replace: true, Start: 0, End: 2}, []int64{3, 4}
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Append(TypeTitle, Title{Title: "t"}, Ignorable()); err != nil {
		t.Fatal(err)
	}
	before := l.Events()
	if err := l.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	v := l.View()
	sealedEnd := v.Len() / 3 * 3
	for seq := range v.Len() {
		got, want := v.At(seq), before[seq]
		if got.Type != want.Type || got.Seq != want.Seq || got.Time != want.Time || got.Ignorable != want.Ignorable ||
			fmt.Sprint(got.SurfaceOp) != fmt.Sprint(want.SurfaceOp) || fmt.Sprint(got.SourceEventSeqs) != fmt.Sprint(want.SourceEventSeqs) {
			t.Errorf("event %d: %+v, appended %+v", seq, got, want)
		}
		wantReleased := seq < sealedEnd && Releasable(want.Type)
		if got.Released() != wantReleased || (!wantReleased && string(got.Data) != string(want.Data)) || (wantReleased && got.Data != nil) {
			t.Errorf("event %d (%s): released %v data %q; want released %v", seq, got.Type, got.Released(), got.Data, wantReleased)
		}
	}
	if e, ok := l.Latest(TypeTitle); !ok || e.Seq != v.Len()-1 {
		t.Errorf("latest title: %+v", e)
	}
	var back []int64
	for e := range v.Backward() {
		back = append(back, e.Seq)
		if len(back) == 3 {
			break
		}
	}
	if fmt.Sprint(back) != fmt.Sprint([]int64{v.Len() - 1, v.Len() - 2, v.Len() - 3}) {
		t.Errorf("backward: %v", back)
	}
}
