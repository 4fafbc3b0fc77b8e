package session

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// goroutinesRunning counts live goroutines whose stack mentions fn.
func goroutinesRunning(fn string) int {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	n := 0
	for g := range strings.SplitSeq(string(buf), "\n\n") {
		if strings.Contains(g, fn) {
			n++
		}
	}
	return n
}

// blockingSink blocks every Append until release is closed, signalling
// entered first.
type blockingSink struct {
	entered chan struct{}
	release chan struct{}
	mu      sync.Mutex
	events  []Event
}

func (b *blockingSink) Append(ctx context.Context, _ string, evs []Event) error {
	b.entered <- struct{}{}
	select {
	case <-b.release:
	case <-ctx.Done():
		return ctx.Err()
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(evs) > 0 && evs[0].Seq != int64(len(b.events)) {
		return errors.New("seq conflict")
	}
	b.events = append(b.events, evs...)
	return nil
}

// TestLogFlushOutsideLock: a sink write in flight blocks neither readers
// nor appenders, and the next flush writes what was appended meanwhile.
func TestLogFlushOutsideLock(t *testing.T) {
	sink := &blockingSink{entered: make(chan struct{}, 1), release: make(chan struct{})}
	l, _ := NewLog(Header{ID: "s"}, nil, sink)
	if _, err := l.Append(TypeTurnStart, TurnStart{Turn: 1}); err != nil {
		t.Fatal(err)
	}
	flushed := make(chan error, 1)
	go func() { flushed <- l.Flush(context.Background()) }()
	<-sink.entered
	// The write is in flight: the log still reads and appends.
	if _, err := l.Append(TypeTurnEnd, TurnEnd{Turn: 1, Reason: TurnEndReason{Kind: EndCompleted}}); err != nil {
		t.Fatal(err)
	}
	if n := len(l.Events()); n != 2 {
		t.Fatalf("%d events", n)
	}
	// A second Flush waits for the first; its context bounds the wait.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := l.Flush(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("flush with a cancelled context while one is in flight: %v", err)
	}
	close(sink.release)
	if err := <-flushed; err != nil {
		t.Fatal(err)
	}
	go func() { <-sink.entered }()
	if err := l.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(sink.events) != 2 || sink.events[1].Seq != 1 {
		t.Fatalf("sink holds %+v", sink.events)
	}
}

// TestObserversOutsideLockInOrder: observers may read the log (they run
// without its lock), see every event in seq order once, and have seen an
// event by the time its Append returns, with concurrent appenders.
func TestObserversOutsideLockInOrder(t *testing.T) {
	l, _ := NewLog(Header{ID: "s"}, nil, nil)
	var mu sync.Mutex
	var seen []int64
	l.Observe(func(e Event) {
		_ = l.Len() // would deadlock under the log's lock
		mu.Lock()
		seen = append(seen, e.Seq)
		mu.Unlock()
	})
	const workers, each = 8, 200
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for range each {
				e, err := l.Append(TypeAssistantChunk, map[string]any{"delta": "x"})
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				ok := len(seen) > int(e.Seq) && seen[e.Seq] == e.Seq
				mu.Unlock()
				if !ok {
					t.Errorf("append %d returned before its observer saw it", e.Seq)
					return
				}
			}
		})
	}
	wg.Wait()
	if len(seen) != workers*each {
		t.Fatalf("observer saw %d events, want %d", len(seen), workers*each)
	}
	for i, s := range seen {
		if s != int64(i) {
			t.Fatalf("observer saw seq %d at position %d", s, i)
		}
	}
}

// TestObserverPanicLeavesLogUsable: a panicking observer does not wedge
// later appends.
func TestObserverPanicLeavesLogUsable(t *testing.T) {
	l, _ := NewLog(Header{ID: "s"}, nil, nil)
	boom := true
	var seen []int64
	l.Observe(func(e Event) {
		seen = append(seen, e.Seq)
		if boom {
			boom = false
			panic("observer")
		}
	})
	func() {
		defer func() { _ = recover() }()
		_, _ = l.Append(TypeTurnStart, TurnStart{Turn: 1})
	}()
	done := make(chan struct{})
	go func() {
		defer close(done)
		if _, err := l.Append(TypeTurnEnd, TurnEnd{Turn: 1, Reason: TurnEndReason{Kind: EndCompleted}}); err != nil {
			t.Error(err)
		}
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("append after an observer panic hangs")
	}
	if len(seen) != 2 || seen[0] != 0 || seen[1] != 1 {
		t.Fatalf("observer saw %v, want each event once", seen)
	}
}

// TestFollowerNeverBlocksAppends: a follower that does not read holds up
// nothing; once it reads, it gets every event in order, in bounded
// batches, and drains with a cancelled context.
func TestFollowerNeverBlocksAppends(t *testing.T) {
	l, _ := NewLog(Header{ID: "s"}, nil, nil)
	if _, err := l.Append(TypeTurnStart, TurnStart{Turn: 1}); err != nil {
		t.Fatal(err)
	}
	f := l.Follow(1) // from the second event on
	defer f.Close()
	const n = 5000
	for range n {
		if _, err := l.Append(TypeAssistantChunk, map[string]any{"delta": "x"}); err != nil {
			t.Fatal(err)
		}
	}
	if lag := f.Lag(); lag != n {
		t.Fatalf("lag %d, want %d", lag, n)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	want := int64(1)
	for {
		batch, err := f.Next(ctx, 100)
		if err != nil {
			if !errors.Is(err, context.Canceled) {
				t.Fatal(err)
			}
			break
		}
		if len(batch) > 100 {
			t.Fatalf("batch of %d", len(batch))
		}
		for _, e := range batch {
			if e.Seq != want {
				t.Fatalf("seq %d, want %d", e.Seq, want)
			}
			want++
		}
	}
	if want != n+1 {
		t.Fatalf("drained up to %d, want %d", want, n+1)
	}
}

// TestFollowerWakesAndCloses: a waiting follower wakes on append; its
// goroutine ends with its context and none is left behind.
func TestFollowerWakesAndCloses(t *testing.T) {
	l, _ := NewLog(Header{ID: "s"}, nil, nil)
	f := l.Follow(0)
	ctx, cancel := context.WithCancel(context.Background())
	got := make(chan int64)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			batch, err := f.Next(ctx, 0)
			if err != nil {
				return
			}
			for _, e := range batch {
				got <- e.Seq
			}
		}
	}()
	for i := range int64(3) {
		if _, err := l.Append(TypeAssistantChunk, map[string]any{"delta": "x"}); err != nil {
			t.Fatal(err)
		}
		if s := <-got; s != i {
			t.Fatalf("got seq %d, want %d", s, i)
		}
	}
	cancel()
	<-done
	f.Close()
	if _, err := f.Next(context.Background(), 0); err == nil {
		t.Fatal("Next after Close succeeded")
	}
	if n := goroutinesRunning("session.(*Follower).Next"); n != 0 {
		t.Fatalf("%d goroutines still in Follower.Next", n)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.followers) != 0 {
		t.Fatal("closed follower still registered")
	}
}

// TestFollowerReadsOnlyDelivered: a follower gets an event only once
// every observer has seen it, so what a stream shows is already in the
// state observers keep (the host's status after a turn's end).
func TestFollowerReadsOnlyDelivered(t *testing.T) {
	l, _ := NewLog(Header{ID: "s"}, nil, nil)
	entered, release := make(chan struct{}), make(chan struct{})
	l.Observe(func(Event) {
		entered <- struct{}{}
		<-release
	})
	f := l.Follow(0)
	defer f.Close()
	appended := make(chan error, 1)
	go func() {
		_, err := l.Append(TypeAssistantChunk, map[string]any{"delta": "x"})
		appended <- err
	}()
	<-entered // appended, not yet delivered
	done, cancel := context.WithCancel(context.Background())
	cancel()
	if batch, err := f.Next(done, 0); err == nil || len(batch) != 0 || f.Lag() != 0 {
		t.Fatalf("the follower read %d events (lag %d) before the observer saw them", len(batch), f.Lag())
	}
	close(release)
	if err := <-appended; err != nil {
		t.Fatal(err)
	}
	if batch, err := f.Next(context.Background(), 0); err != nil || len(batch) != 1 || batch[0].Seq != 0 {
		t.Fatalf("after delivery: %d events, %v", len(batch), err)
	}
}

// TestLossyFollowerIsToldItFellBehind: a lossy follower that lags more
// than its window skips to the newest events and is told what it missed.
func TestLossyFollowerIsToldItFellBehind(t *testing.T) {
	l, _ := NewLog(Header{ID: "s"}, nil, nil)
	f := l.Follow(0).Lossy(10)
	defer f.Close()
	for range 100 {
		if _, err := l.Append(TypeAssistantChunk, map[string]any{"delta": "x"}); err != nil {
			t.Fatal(err)
		}
	}
	_, err := f.Next(t.Context(), 0)
	var behind *FellBehindError
	if !errors.As(err, &behind) || behind.From != 0 || behind.To != 90 {
		t.Fatalf("Next = %v, want a skip of 0..89", err)
	}
	batch, err := f.Next(t.Context(), 0)
	if err != nil || len(batch) != 10 || batch[0].Seq != 90 || batch[9].Seq != 99 {
		t.Fatalf("after the skip: %d events, %v", len(batch), err)
	}
	// Within its window it loses nothing.
	if _, err := l.Append(TypeAssistantChunk, map[string]any{"delta": "x"}); err != nil {
		t.Fatal(err)
	}
	if batch, err := f.Next(t.Context(), 0); err != nil || len(batch) != 1 || batch[0].Seq != 100 {
		t.Fatalf("next: %v, %v", batch, err)
	}
}
