package sqlite

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/dsh-dev/dsh/internal/session"
	"github.com/dsh-dev/dsh/internal/session/sessiontest"
)

// checkClosers checks the closers of crashedLog (seqs 5..9): call-a was
// logged, so its outcome is unknown; call-b never started, so it gets a
// tool/call and then its result, the pairing the live path logs.
func checkClosers(t *testing.T, events []session.Event) {
	t.Helper()
	if len(events) != 10 {
		t.Fatalf("balanced log has %d events, want 10", len(events))
	}
	sessiontest.CheckBalanced(t, events)
	want := []string{
		session.TypeToolResult + ":call-a:" + session.CodeToolOutcomeUnknown,
		session.TypeToolCall + ":call-b",
		session.TypeToolResult + ":call-b:" + session.CodeToolNotStarted,
		session.TypeStepEnd, session.TypeTurnEnd,
	}
	for i, e := range events[5:] {
		got := e.Type
		switch e.Type {
		case session.TypeToolCall:
			var c session.ToolCall
			if err := e.Decode(&c); err != nil {
				t.Fatal(err)
			}
			got += ":" + c.CallID
		case session.TypeToolResult:
			var r session.ToolResult
			if err := e.Decode(&r); err != nil || !r.IsError || r.Error == nil {
				t.Fatalf("closer %d = %+v, %v", i, r, err)
			}
			got += ":" + r.CallID + ":" + r.Error.Code
		}
		if got != want[i] || e.Seq != int64(5+i) {
			t.Fatalf("closer %d = %s@%d, want %s", i, got, e.Seq, want[i])
		}
	}
	var end session.TurnEnd
	if err := events[9].Decode(&end); err != nil || end.Reason.Kind != session.EndInterrupted {
		t.Fatalf("turn/end = %+v, %v", end, err)
	}
	if _, err := session.DeriveMessages(events); err != nil {
		t.Fatalf("balanced log does not derive: %v", err)
	}
}

func TestLoadRepairsCrashedLogDurably(t *testing.T) {
	ctx := context.Background()
	s, path := newStore(t)
	mustCreate(t, s, "s")
	mustAppend(t, s, "s", crashedLog(t)...)

	_, events, err := s.Load(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	checkClosers(t, events)
	if n := rowCount(t, s, "s"); n != 10 {
		t.Fatalf("rows = %d after repair, want 10", n)
	}
	// The repair is durable: a fresh Store (a new process) reads the same
	// balanced log, and loading again adds nothing.
	s2 := openAt(t, path)
	_, again, err := s2.Load(ctx, "s")
	if err != nil || !reflect.DeepEqual(again, events) {
		t.Fatalf("second Load = %d events, %v", len(again), err)
	}
	if n := rowCount(t, s, "s"); n != 10 {
		t.Fatalf("rows = %d after second Load", n)
	}
	// The repaired log continues normally.
	mustAppend(t, s2, "s", ev(t, 10, session.TypeEndSeed, struct{}{}))
}

// TestConcurrentRepair loads one crashed session from two Stores at once:
// both get the same balanced log and the closers are written once.
func TestConcurrentRepair(t *testing.T) {
	ctx := context.Background()
	s1, path := newStore(t)
	s2 := openAt(t, path)
	mustCreate(t, s1, "s")
	mustAppend(t, s1, "s", crashedLog(t)...)
	var wg sync.WaitGroup
	got := make([][]session.Event, 4)
	for i := range got {
		s := []*Store{s1, s2}[i%2]
		wg.Go(func() {
			var err error
			if _, got[i], err = s.Load(ctx, "s"); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	for _, events := range got {
		checkClosers(t, events)
	}
	if n := rowCount(t, s1, "s"); n != 10 {
		t.Fatalf("rows = %d, want 10", n)
	}
}

func TestInspectDoesNotWrite(t *testing.T) {
	ctx := context.Background()
	s, _ := newStore(t)
	mustCreate(t, s, "s")
	mustAppend(t, s, "s", crashedLog(t)...)
	list0, _ := s.List(ctx, ListFilter{})

	_, events, err := s.Inspect(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	checkClosers(t, events)
	if n := rowCount(t, s, "s"); n != 5 {
		t.Fatalf("Inspect wrote: rows = %d", n)
	}
	list1, _ := s.List(ctx, ListFilter{})
	if !reflect.DeepEqual(list0, list1) {
		t.Fatalf("Inspect touched the session: %+v vs %+v", list0, list1)
	}
	// Stored events without the closers.
	if stored, err := s.ReadFrom(ctx, "s", 0); err != nil || len(stored) != 5 {
		t.Fatalf("ReadFrom = %d, %v", len(stored), err)
	}
}

// TestCorruptionIsIsolated damages one session several ways: its Load
// fails with a FormatError naming it and the seq, while List and the
// other sessions keep working, and nothing is deleted.
func TestCorruptionIsIsolated(t *testing.T) {
	cases := []struct {
		name   string
		damage func(t *testing.T, s *Store)
		seq    int64
	}{
		{"garbage body", func(t *testing.T, s *Store) {
			rawExec(t, s, `UPDATE events SET body = 'garbage{' WHERE session_id = 'bad' AND seq = 3`)
		}, 3},
		{"unknown non-ignorable type", func(t *testing.T, s *Store) {
			rawExec(t, s, `UPDATE events SET type = 'future/x', body = '{"type":"future/x","seq":2,"time":1,"data":{}}'
				WHERE session_id = 'bad' AND seq = 2`)
		}, 2},
		{"lossy data", func(t *testing.T, s *Store) {
			rawExec(t, s, `UPDATE events SET body = '{"type":"turn/start","seq":1,"time":1,"data":{"turn":0,"turn":1}}'
				WHERE session_id = 'bad' AND seq = 1`)
		}, 1},
		{"envelope seq differs from row", func(t *testing.T, s *Store) {
			rawExec(t, s, `UPDATE events SET body = replace(body, '"seq":4', '"seq":40') WHERE session_id = 'bad' AND seq = 4`)
		}, 4},
		{"seq gap", func(t *testing.T, s *Store) {
			rawExec(t, s, `DELETE FROM events WHERE session_id = 'bad' AND seq = 2`)
		}, 2},
		{"lost tail", func(t *testing.T, s *Store) {
			rawExec(t, s, `DELETE FROM events WHERE session_id = 'bad' AND seq = 6`)
		}, 6},
		{"bad header version", func(t *testing.T, s *Store) {
			rawExec(t, s, `UPDATE sessions SET header = '{"version":3,"id":"bad"}' WHERE id = 'bad'`)
		}, -1},
		{"undecodable header", func(t *testing.T, s *Store) {
			rawExec(t, s, `UPDATE sessions SET header = x'00ff' WHERE id = 'bad'`)
		}, -1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			s, _ := newStore(t)
			for _, id := range []string{"good", "bad"} {
				mustCreate(t, s, id)
				mustAppend(t, s, id, simpleLog(t)...)
			}
			c.damage(t, s)

			var fe *session.FormatError
			for _, err := range []error{
				func() error { _, _, err := s.Load(ctx, "bad"); return err }(),
				func() error { _, _, err := s.Inspect(ctx, "bad"); return err }(),
				func() error { _, err := s.ReadFrom(ctx, "bad", 0); return err }(),
				s.Export(ctx, "bad", new(discard)),
			} {
				if !errors.Is(err, ErrCorrupt) || !errors.As(err, &fe) || fe.SessionID != "bad" || fe.Seq != c.seq {
					t.Fatalf("error = %v (FormatError %+v), want corrupt at seq %d", err, fe, c.seq)
				}
			}
			if _, _, err := s.Load(ctx, "good"); err != nil {
				t.Fatalf("good session: %v", err)
			}
			list, err := s.List(ctx, ListFilter{})
			if err != nil || len(list) != 2 {
				t.Fatalf("List = %+v, %v", list, err)
			}
			for _, e := range list {
				if (e.Err != nil) != (e.Header.ID == "bad" && c.seq < 0) {
					t.Fatalf("entry %s: Err = %v", e.Header.ID, e.Err)
				}
			}
			if c.seq < 0 {
				if _, err := s.Header(ctx, "bad"); !errors.Is(err, ErrCorrupt) {
					t.Fatalf("Header = %v", err)
				}
			}
		})
	}
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

func TestIgnorableUnknownTypeLoads(t *testing.T) {
	ctx := context.Background()
	s, _ := newStore(t)
	mustCreate(t, s, "s")
	log := simpleLog(t)
	future := session.Event{Type: "plugin/from-the-future", Seq: 7, Time: 5, Ignorable: true, Data: json.RawMessage(`{"x":[1,2,{"y":null}]}`)}
	mustAppend(t, s, "s", append(log, future)...)
	_, events, err := s.Load(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	if got := events[7]; !reflect.DeepEqual(got, future) {
		t.Fatalf("ignorable event = %+v", got)
	}
}

// TestLargeLogReportsFirstCorruptSeq covers the decode that runs beside
// the scan (decoder): a long log loads, with damage in several batches
// the error names the lowest damaged seq, as a sequential read would,
// and a row missing after the damage is reported as the gap it is.
func TestLargeLogReportsFirstCorruptSeq(t *testing.T) {
	ctx := context.Background()
	s, _ := newStore(t)
	mustCreate(t, s, "s")
	b := int64(decodeBatchRows)
	events := make([]session.Event, 3*b+100)
	for i := range events {
		events[i] = ev(t, int64(i), session.TypeEndSeed, struct{}{})
	}
	mustAppend(t, s, "s", events...)
	if suffix, err := s.ReadFrom(ctx, "s", 10); err != nil || int64(len(suffix)) != 3*b+90 || suffix[0].Seq != 10 {
		t.Fatalf("ReadFrom(10) = %d events, %v", len(suffix), err)
	}
	for _, prealloc := range []int64{maxPrealloc, b + 5} {
		// The second: a log longer than the preallocation.
		defer func(old int64) { maxPrealloc = old }(maxPrealloc)
		maxPrealloc = prealloc
		_, all, err := s.Load(ctx, "s")
		if err != nil || len(all) != len(events) {
			t.Fatalf("Load with %d preallocated = %d events, %v", prealloc, len(all), err)
		}
		for i, e := range all {
			if e.Seq != int64(i) || e.Type != session.TypeEndSeed {
				t.Fatalf("Load with %d preallocated: event %d is %+v", prealloc, i, e)
			}
		}
	}
	var fe *session.FormatError
	for _, seq := range []int64{3*b + 50, 2*b + 1, b + 700, 300} {
		rawExec(t, s, `UPDATE events SET body = '{' WHERE session_id = 's' AND seq = ?`, seq)
		_, _, err := s.Load(ctx, "s")
		if !errors.As(err, &fe) || fe.Seq != seq {
			t.Fatalf("damage down to seq %d: Load = %v", seq, err)
		}
	}
	rawExec(t, s, `DELETE FROM events WHERE session_id = 's' AND seq = ?`, 3*b+10)
	if _, _, err := s.Load(ctx, "s"); !errors.As(err, &fe) || fe.Seq != 3*b+10 || !strings.Contains(err.Error(), "seq gap") {
		t.Fatalf("a missing row: Load = %v", err)
	}
}
