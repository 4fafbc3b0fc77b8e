package projection

import (
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/dsh-dev/dsh/internal/session"
)

func newLog(t *testing.T) *session.Log {
	t.Helper()
	l, err := session.NewLog(session.Header{ID: "s1"}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// seen is a test state: how many events were folded and the seqs, so a
// test can tell a missed or duplicated event.
type seen struct {
	seqs []int64
}

// countingUnit folds every event into a seen and counts Apply calls.
func countingUnit(key string, calls *atomic.Int64) Unit {
	return Typed(key, nil, func() seen { return seen{} }, func(s seen, e session.Event) seen {
		calls.Add(1)
		s.seqs = append(s.seqs, e.Seq)
		return s
	})
}

func appendN(t *testing.T, l *session.Log, n int) {
	t.Helper()
	for range n {
		if _, err := l.Append(session.TypeTurnStart, session.TurnStart{Turn: 1}); err != nil {
			t.Fatal(err)
		}
	}
}

func TestRegister(t *testing.T) {
	noop := func(s any, _ session.Event) any { return s }
	init := func() any { return 0 }
	tests := []struct {
		name    string
		units   []Unit
		wantErr string
	}{
		{"ok", []Unit{{Key: "a", Init: init, Apply: noop}, {Key: "b", Init: init, Apply: noop}}, ""},
		{"duplicate", []Unit{{Key: "a", Init: init, Apply: noop}, {Key: "a", Init: init, Apply: noop}}, "already registered"},
		{"empty key", []Unit{{Init: init, Apply: noop}}, "no key"},
		{"no init", []Unit{{Key: "a", Apply: noop}}, "required"},
		{"no apply", []Unit{{Key: "a", Init: init}}, "required"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := NewRegistry()
			var err error
			for _, u := range tt.units {
				if err = r.Register(u); err != nil {
					break
				}
			}
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("err = %v, want %q", err, tt.wantErr)
			}
		})
	}
}

func TestAttachFoldsHistoryThenAppends(t *testing.T) {
	l := newLog(t)
	appendN(t, l, 3)
	var calls atomic.Int64
	r := NewRegistry()
	if err := r.Register(countingUnit("n", &calls)); err != nil {
		t.Fatal(err)
	}
	p := r.Attach(l)
	s, seq, ok := GetAs[seen](p, "n")
	if !ok || seq != 2 || len(s.seqs) != 3 {
		t.Fatalf("after attach: %v seq %d ok %v", s.seqs, seq, ok)
	}
	appendN(t, l, 2)
	s, seq, _ = GetAs[seen](p, "n")
	if seq != 4 || len(s.seqs) != 5 {
		t.Fatalf("after appends: %v seq %d", s.seqs, seq)
	}
	if v, seq := p.Get("missing"); v != nil || seq != -1 || p.Has("missing") || !p.Has("n") {
		t.Fatalf("unknown key: %v %d", v, seq)
	}
	if _, _, ok := GetAs[int](p, "n"); ok {
		t.Fatal("GetAs with the wrong type reported ok")
	}
}

func TestEmptyLogWatermark(t *testing.T) {
	var calls atomic.Int64
	r := NewRegistry()
	_ = r.Register(countingUnit("n", &calls))
	p := r.Attach(newLog(t))
	if _, seq := p.Get("n"); seq != -1 {
		t.Fatalf("empty log seq %d, want -1", seq)
	}
}

// TestWatermarkFoldCount checks that the fold work is one Apply per event
// per unit, however often the projections are read: history is never
// refolded.
func TestWatermarkFoldCount(t *testing.T) {
	tests := []struct {
		name            string
		before, after   int
		reads           int
		checkpointSeq   int64 // -2: no checkpoint
		wantCheckpoint  int64 // Apply calls of the checkpointed unit
		wantPlainApplys int64
	}{
		{"empty", 0, 0, 5, -2, 0, 0},
		{"history only", 50, 0, 10, -2, 0, 50},
		{"live only", 0, 40, 10, -2, 0, 40},
		{"both", 100, 100, 50, -2, 0, 200},
		{"checkpoint", 100, 10, 5, 79, 30, 110},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := newLog(t)
			appendN(t, l, tt.before)
			var plain, cp atomic.Int64
			r := NewRegistry()
			_ = r.Register(countingUnit("plain", &plain))
			_ = r.Register(countingUnit("cp", &cp))
			var from map[string]Checkpoint
			if tt.checkpointSeq > -2 {
				from = map[string]Checkpoint{"cp": {State: seen{}, Seq: tt.checkpointSeq}}
			}
			p := r.AttachFrom(l, from)
			for i := range tt.after {
				appendN(t, l, 1)
				for range tt.reads {
					p.Get("plain")
					p.Snapshot()
				}
				if _, seq := p.Get("plain"); seq != int64(tt.before+i) {
					t.Fatalf("watermark %d after append %d", seq, i)
				}
			}
			if got := plain.Load(); got != tt.wantPlainApplys {
				t.Errorf("plain unit: %d Apply calls, want %d", got, tt.wantPlainApplys)
			}
			if tt.checkpointSeq > -2 {
				if got := cp.Load(); got != tt.wantCheckpoint {
					t.Errorf("checkpointed unit: %d Apply calls, want %d", got, tt.wantCheckpoint)
				}
				s, _, _ := GetAs[seen](p, "cp")
				if len(s.seqs) > 0 && s.seqs[0] != tt.checkpointSeq+1 {
					t.Errorf("checkpointed unit started at %d", s.seqs[0])
				}
			}
		})
	}
}

// TestAttachDuringAppends attaches while another goroutine appends: every
// event must be folded exactly once and in seq order.
func TestAttachDuringAppends(t *testing.T) {
	for range 20 {
		l := newLog(t)
		appendN(t, l, 10)
		var calls atomic.Int64
		r := NewRegistry()
		_ = r.Register(countingUnit("n", &calls))
		const more = 200
		done := make(chan struct{})
		go func() {
			defer close(done)
			for range more {
				_, _ = l.Append(session.TypeTurnStart, session.TurnStart{Turn: 1})
			}
		}()
		p := r.Attach(l)
		<-done
		s, seq, _ := GetAs[seen](p, "n")
		if seq != 10+more-1 || len(s.seqs) != 10+more {
			t.Fatalf("folded %d events up to %d, want %d", len(s.seqs), seq, 10+more)
		}
		for i, q := range s.seqs {
			if q != int64(i) {
				t.Fatalf("event %d folded as seq %d", i, q)
			}
		}
	}
}

func TestConcurrentReadsAndAppends(t *testing.T) {
	l := newLog(t)
	var calls atomic.Int64
	r := NewRegistry()
	_ = r.Register(countingUnit("n", &calls))
	_ = r.Register(TodosUnit())
	p := r.Attach(l)
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for range 50 {
				if w%2 == 0 {
					_, _ = l.Append(session.TypeTodoWrite, TodoWrite{Todos: []Todo{{Content: "x", Status: TodoPending}}})
				} else {
					snap := p.Snapshot()
					if s, ok := snap["n"].(seen); ok {
						_ = len(s.seqs)
					}
					_, _, _ = GetAs[[]Todo](p, KeyTodos)
				}
			}
		})
	}
	wg.Wait()
	if got := calls.Load(); got != 100 {
		t.Fatalf("%d applies, want 100", got)
	}
	if keys := p.Keys(); len(keys) != 2 || keys[0] != "n" || keys[1] != KeyTodos {
		t.Fatalf("keys %v", keys)
	}
	cps := p.Checkpoints()
	if cps["n"].Seq != 99 {
		t.Fatalf("checkpoint %+v", cps["n"])
	}
}
