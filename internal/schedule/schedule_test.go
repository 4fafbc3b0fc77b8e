package schedule

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/dsh-dev/dsh/internal/store"
)

func paris(t *testing.T) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation("Europe/Paris")
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

func cronSpec(t *testing.T, expr string) Spec {
	t.Helper()
	s := Spec{Kind: KindCron, Cron: expr, TZ: "Europe/Paris"}
	if err := s.Compile(); err != nil {
		t.Fatal(err)
	}
	return s
}

// Spring forward (2026-03-29, 02:00 → 03:00 in Paris): 02:30 does not
// exist and is skipped; fall back (2026-10-25, 03:00 → 02:00): 02:30
// happens twice and fires once, at the first (summer-time) instant.
func TestNextAcrossParisDST(t *testing.T) {
	loc := paris(t)
	s := cronSpec(t, "30 2 * * *")
	at := func(y int, m time.Month, d, h, mi int) time.Time { return time.Date(y, m, d, h, mi, 0, 0, loc) }

	next, ok, skipped := s.Next(at(2026, 3, 28, 12, 0), time.Time{})
	if !ok || !next.Equal(at(2026, 3, 30, 2, 30)) || len(skipped) != 1 || skipped[0].Local != "2026-03-29 02:30" {
		t.Fatalf("spring: next %v skipped %+v", next, skipped)
	}
	next, _, _ = s.Next(at(2026, 10, 24, 12, 0), time.Time{})
	want := time.Date(2026, 10, 25, 0, 30, 0, 0, time.UTC) // 02:30 CEST
	if !next.Equal(want) {
		t.Fatalf("fall: next %v, want %v", next.UTC(), want)
	}
	after, _, _ := s.Next(next, time.Time{})
	if !after.Equal(at(2026, 10, 26, 2, 30)) {
		t.Fatalf("the repeated 02:30 fired twice: then %v", after)
	}
	// Weekdays at 09:00 across the spring change: Friday 27th, then Monday
	// 30th at 09:00 local (UTC+2 now).
	w := cronSpec(t, "0 9 * * 1-5")
	n1, _, _ := w.Next(at(2026, 3, 26, 10, 0), time.Time{})
	n2, _, _ := w.Next(n1, time.Time{})
	if !n1.Equal(at(2026, 3, 27, 9, 0)) || !n2.Equal(time.Date(2026, 3, 30, 7, 0, 0, 0, time.UTC)) {
		t.Fatalf("weekdays: %v %v", n1, n2.UTC())
	}
	// Every counts from its anchor; at fires once.
	e := Spec{Kind: KindEvery, Every: Duration(30 * time.Minute)}
	anchor := at(2026, 1, 1, 0, 0)
	if n, _, _ := e.Next(anchor.Add(45*time.Minute), anchor); !n.Equal(anchor.Add(time.Hour)) {
		t.Errorf("every: %v", n)
	}
	one := Spec{Kind: KindAt, At: anchor}
	if _, ok, _ := one.Next(anchor, time.Time{}); ok {
		t.Error("at fired after its time")
	}
}

func TestValidate(t *testing.T) {
	for _, c := range []struct {
		s    Schedule
		want string
	}{
		{Schedule{Spec: Spec{Kind: KindCron, Cron: "0 9 * *"}, Cwd: "/", Prompt: "p", Approval: "never"}, "five fields"},
		{Schedule{Spec: Spec{Kind: KindCron, Cron: "61 9 * * *"}, Cwd: "/", Prompt: "p", Approval: "never"}, "outside"},
		{Schedule{Spec: Spec{Kind: KindCron, Cron: "0 9 * * *", TZ: "Mars/Base"}, Cwd: "/", Prompt: "p", Approval: "never"}, "time zone"},
		{Schedule{Spec: Spec{Kind: KindEvery, Every: Duration(time.Millisecond)}, Cwd: "/", Prompt: "p", Approval: "never"}, "shorter"},
		{Schedule{Spec: Spec{Kind: KindEvery, Every: Duration(time.Hour)}, Cwd: "/", Prompt: "p", Approval: "ask"}, "nobody is there"},
		{Schedule{Spec: Spec{Kind: KindEvery, Every: Duration(time.Hour)}, Cwd: "rel", Prompt: "p", Approval: "never"}, "absolute"},
	} {
		if err := c.s.Validate(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.s, err, c.want)
		}
	}
}

// memStore is an in-memory store.Schedules.
type memStore struct {
	mu   sync.Mutex
	recs map[string]store.ScheduleRecord
}

func (m *memStore) PutSchedule(_ context.Context, r store.ScheduleRecord) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.recs[r.ID] = r
	return nil
}
func (m *memStore) ListSchedules(context.Context) ([]store.ScheduleRecord, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []store.ScheduleRecord
	for _, r := range m.recs {
		out = append(out, r)
	}
	return out, nil
}
func (m *memStore) DeleteSchedule(_ context.Context, id string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.recs, id)
	return nil
}
func (m *memStore) MarkFired(_ context.Context, id string, ft int64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	r := m.recs[id]
	r.LastFire = max(r.LastFire, ft)
	m.recs[id] = r
	return nil
}

// fakeStarter records firings; a run lasts until release is closed.
type fakeStarter struct {
	mu      sync.Mutex
	fires   []time.Time
	release chan struct{}
}

func (f *fakeStarter) Start(_ context.Context, _ Schedule, fire time.Time) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fires = append(f.fires, fire)
	return fmt.Sprint("session-", len(f.fires)), nil
}
func (f *fakeStarter) Wait(ctx context.Context, _ string) error {
	select {
	case <-f.release:
	case <-ctx.Done():
	}
	return nil
}
func (f *fakeStarter) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.fires)
}

// With the fake clock of synctest: an every-10s schedule fires each 10 s;
// while its run is still going a firing is skipped and logged; fires missed
// while no runner ran coalesce into one at start-up.
func TestRunnerOverlapAndCoalesce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &memStore{recs: map[string]store.ScheduleRecord{}}
		s := &Schedule{Spec: Spec{Kind: KindEvery, Every: Duration(10 * time.Second)}, Cwd: "/", Prompt: "p", Approval: "never"}
		if err := Add(t.Context(), st, s, time.Now()); err != nil {
			t.Fatal(err)
		}
		release := make(chan struct{})
		close(release) // runs end at once
		fs := &fakeStarter{release: release}
		var mu sync.Mutex
		var logs []string
		logf := func(f string, a ...any) { mu.Lock(); logs = append(logs, fmt.Sprintf(f, a...)); mu.Unlock() }
		ctx, cancel := context.WithCancel(t.Context())
		r := &Runner{Store: st, Starter: fs, Logf: logf, Reload: time.Hour}
		done := make(chan struct{})
		go func() { defer close(done); _ = r.Run(ctx) }()
		time.Sleep(35 * time.Second) // fake time: 3 firings (10, 20, 30 s)
		synctest.Wait()
		if n := fs.count(); n != 3 {
			t.Fatalf("%d firings in 35 s, want 3", n)
		}
		cancel()
		<-done

		// Down for 100 s: one coalesced firing at start-up.
		time.Sleep(100 * time.Second)
		ctx, cancel = context.WithCancel(t.Context())
		hold := make(chan struct{})
		fs2 := &fakeStarter{release: hold}
		r = &Runner{Store: st, Starter: fs2, Logf: logf, Reload: time.Hour}
		done = make(chan struct{})
		go func() { defer close(done); _ = r.Run(ctx) }()
		synctest.Wait()
		if n := fs2.count(); n != 1 {
			t.Fatalf("%d firings at start-up, want 1 (coalesced)", n)
		}
		// The run is held: the next two firings are skipped.
		time.Sleep(21 * time.Second)
		synctest.Wait()
		if n := fs2.count(); n != 1 {
			t.Fatalf("overlapping firings started: %d", n)
		}
		close(hold)
		time.Sleep(10 * time.Second)
		synctest.Wait()
		if n := fs2.count(); n != 2 {
			t.Fatalf("after the run ended: %d firings, want 2", n)
		}
		cancel()
		<-done
		mu.Lock()
		all := strings.Join(logs, "\n")
		mu.Unlock()
		if !strings.Contains(all, "missed firing(s) coalesced into one") || strings.Count(all, "still running") != 2 {
			t.Errorf("log:\n%s", all)
		}
	})
}

// A daily 02:30 in Paris through 2000 (synctest's clock starts on
// 2000-01-01 UTC): 304 firings by November, the nonexistent 02:30 of
// 26 March skipped with one log line, the repeated one of 29 October
// fired once.
func TestRunnerAcrossDST(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &memStore{recs: map[string]store.ScheduleRecord{}}
		s := &Schedule{Spec: Spec{Kind: KindCron, Cron: "30 2 * * *", TZ: "Europe/Paris"}, Cwd: "/", Prompt: "p", Approval: "never"}
		if err := Add(t.Context(), st, s, time.Now()); err != nil {
			t.Fatal(err)
		}
		release := make(chan struct{})
		close(release)
		fs := &fakeStarter{release: release}
		var mu sync.Mutex
		var logs []string
		ctx, cancel := context.WithCancel(t.Context())
		r := &Runner{Store: st, Starter: fs, Reload: time.Hour, Logf: func(f string, a ...any) {
			mu.Lock()
			logs = append(logs, fmt.Sprintf(f, a...))
			mu.Unlock()
		}}
		done := make(chan struct{})
		go func() { defer close(done); _ = r.Run(ctx) }()
		time.Sleep(time.Until(time.Date(2000, 11, 1, 0, 0, 0, 0, time.UTC)))
		synctest.Wait()
		cancel()
		<-done
		if n := fs.count(); n != 304 {
			t.Errorf("%d firings, want 304", n)
		}
		paris := paris(t)
		fs.mu.Lock()
		oct := 0
		for _, f := range fs.fires {
			if l := f.In(paris); l.Month() == 10 && l.Day() == 29 {
				oct++
			}
		}
		fs.mu.Unlock()
		mu.Lock()
		gap := 0
		for _, l := range logs {
			if strings.Contains(l, "local time 2000-03-26 02:30 does not exist in Europe/Paris") {
				gap++
			}
		}
		mu.Unlock()
		if oct != 1 || gap != 1 {
			t.Errorf("29 October fired %d times; %d gap log lines", oct, gap)
		}
	})
}
