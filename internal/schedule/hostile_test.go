package schedule

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/dsh-dev/dsh/internal/store"
)

// TestCronHugeStep: a step too large for an int's headroom names only
// the range's first value. Before, v += step wrapped around and set every
// other minute below 59.
func TestCronHugeStep(t *testing.T) {
	s := Spec{Kind: KindCron, Cron: "59/9223372036854775807 * * * *"}
	if err := s.Compile(); err != nil {
		t.Fatal(err)
	}
	from := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	next, ok, _ := s.Next(from, time.Time{})
	if !ok || !next.Equal(from.Add(59*time.Minute)) {
		t.Fatalf("next %v, want 00:59", next)
	}
	for _, bad := range []string{
		"*/0 * * * *", "*/-1 * * * *", "0-99999999999999999999 * * * *", "1-5/99999999999999999999 * * * *",
		"5-1 * * * *", "* * * * 8", "\x1b[2J * * * *", "* * * *", "* * * * * *", "", "0 0 31 2 *x",
	} {
		s := Spec{Kind: KindCron, Cron: bad}
		if err := s.Compile(); err == nil {
			t.Errorf("%q compiled", bad)
		}
	}
	// Never: 31 February. Next says so without walking for ever.
	s = Spec{Kind: KindCron, Cron: "0 0 31 2 *"}
	if err := s.Compile(); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := s.Next(from, time.Time{}); ok {
		t.Fatal("31 February fired")
	}
}

// TestBadRowDoesNotStopOthers: a stored row that cannot be read (damaged,
// or from another version) is reported by id, never fired, and does not
// hide or stop the other schedules; Get finds it by its id so it can be
// removed. Before, List failed as a whole: no schedule fired and none
// could be listed or removed.
func TestBadRowDoesNotStopOthers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &memStore{recs: map[string]store.ScheduleRecord{}}
		good := &Schedule{Spec: Spec{Kind: KindEvery, Every: Duration(10 * time.Second)}, Cwd: "/", Prompt: "p", Approval: "never"}
		if err := Add(t.Context(), st, good, time.Now()); err != nil {
			t.Fatal(err)
		}
		for id, data := range map[string]string{
			"bad-json":  `{"spec":`,
			"bad-kind":  `{"id":"bad-kind","spec":{"kind":"sunrise"},"cwd":"/","prompt":"p","approval":"never"}`,
			"bad-cron":  `{"id":"bad-cron","spec":{"kind":"cron","cron":"99 * * * *"},"cwd":"/","prompt":"p","approval":"never"}`,
			"bad-every": `{"id":"bad-every","spec":{"kind":"every","every":"0s"},"cwd":"/","prompt":"p","approval":"never"}`,
		} {
			if err := st.PutSchedule(t.Context(), store.ScheduleRecord{ID: id, Data: []byte(data), CreatedAt: 1}); err != nil {
				t.Fatal(err)
			}
		}
		all, err := List(t.Context(), st)
		var be *BadRecordError
		if len(all) != 1 || all[0].ID != good.ID || !errors.As(err, &be) || strings.Count(err.Error(), "cannot be read") != 4 {
			t.Fatalf("List: %d schedules, %v", len(all), err)
		}
		if s, err := Get(t.Context(), st, "bad-kind"); s.ID != "bad-kind" || !errors.As(err, &be) {
			t.Fatalf("Get of the bad row: %+v %v", s, err)
		}
		if s, err := Get(t.Context(), st, "bad-k"); s.ID != "" || !errors.As(err, &be) || !strings.Contains(err.Error(), "whole id") {
			t.Fatalf("Get of the bad row by prefix: %+v %v", s, err)
		}
		if s, err := Get(t.Context(), st, good.ID[:8]); err != nil || s.ID != good.ID {
			t.Fatalf("Get of the good row: %+v %v", s, err)
		}

		release := make(chan struct{})
		close(release)
		fs := &fakeStarter{release: release}
		var mu sync.Mutex
		var logs []string
		logf := func(f string, a ...any) { mu.Lock(); logs = append(logs, fmt.Sprintf(f, a...)); mu.Unlock() }
		ctx, cancel := context.WithCancel(t.Context())
		r := &Runner{Store: st, Starter: fs, Logf: logf, Reload: time.Hour}
		done := make(chan struct{})
		go func() { defer close(done); _ = r.Run(ctx) }()
		time.Sleep(25 * time.Second)
		synctest.Wait()
		cancel()
		<-done
		if n := fs.count(); n != 2 {
			t.Fatalf("%d firings in 25 s, want 2", n)
		}
		mu.Lock()
		defer mu.Unlock()
		if all := strings.Join(logs, "\n"); !strings.Contains(all, "schedule bad-kind cannot be read") {
			t.Errorf("log:\n%s", all)
		}
	})
}

// TestEverySecondMissedForWeeks: an every-second schedule not run for 30
// days fires once, at the last missed second, and is then on time. Before,
// the walk over missed times stopped after 2^20 of them (12 days), fired
// at that time, and the next tick found it due again.
func TestEverySecondMissedForWeeks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &memStore{recs: map[string]store.ScheduleRecord{}}
		s := &Schedule{Spec: Spec{Kind: KindEvery, Every: Duration(time.Second)}, Cwd: "/", Prompt: "p", Approval: "never"}
		if err := Add(t.Context(), st, s, time.Now()); err != nil {
			t.Fatal(err)
		}
		time.Sleep(30 * 24 * time.Hour)
		hold := make(chan struct{})
		fs := &fakeStarter{release: hold}
		r := &Runner{Store: st, Starter: fs, Reload: time.Hour}
		r.running, r.skips = map[string]chan struct{}{}, map[Skip]bool{}
		all, err := List(t.Context(), st)
		if err != nil || len(all) != 1 {
			t.Fatal(len(all), err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		defer func() { cancel(); close(hold); r.wg.Wait() }()
		next, ok := r.tick(ctx, all[0])
		synctest.Wait()
		if !ok || fs.count() != 1 || !fs.fires[0].Equal(time.Now()) {
			t.Fatalf("fired %v, want once now (%v)", fs.fires, time.Now())
		}
		if !next.Equal(time.Now().Add(time.Second)) {
			t.Fatalf("next %v, want in a second", next)
		}
	})
}
