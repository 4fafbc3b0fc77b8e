package schedule

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/dsh-dev/dsh/internal/store"
)

// Starter runs one firing: Start creates its session and hands it the
// prompt; Wait returns when that session is idle again (or ctx ends).
type Starter interface {
	Start(ctx context.Context, s Schedule, fire time.Time) (sessionID string, err error)
	Wait(ctx context.Context, sessionID string) error
}

// DefaultReload is how often the runner rereads the store, so schedules
// added or removed while dsh serve runs are picked up.
const DefaultReload = 2 * time.Second

// maxCoalesce bounds the walk over missed fire times of one schedule.
const maxCoalesce = 1 << 20

// Runner fires due schedules. Its state (which firing is still running)
// lives only as long as it does; the fire times are in the store.
type Runner struct {
	Store   store.Schedules
	Starter Starter
	// Logf reports firings, skips and failures.
	Logf func(format string, args ...any)
	// Reload overrides DefaultReload.
	Reload time.Duration

	mu      sync.Mutex
	running map[string]chan struct{} // schedule id → closed when its run ended
	skips   map[Skip]bool            // DST gaps already reported
	wg      sync.WaitGroup
}

func (r *Runner) logf(format string, args ...any) {
	if r.Logf != nil {
		r.Logf(format, args...)
	}
}

// Run fires schedules until ctx ends, then waits for the runs it started
// (which end with ctx).
func (r *Runner) Run(ctx context.Context) error {
	r.mu.Lock()
	r.running = map[string]chan struct{}{}
	r.skips = map[Skip]bool{}
	r.mu.Unlock()
	defer r.wg.Wait()
	reload := r.Reload
	if reload <= 0 {
		reload = DefaultReload
	}
	for {
		wake := time.Now().Add(reload)
		all, err := List(ctx, r.Store)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			r.logf("schedules: %v", err)
		}
		for _, s := range all {
			if next, ok := r.tick(ctx, s); ok && next.Before(wake) {
				wake = next
			}
		}
		t := time.NewTimer(time.Until(wake))
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
	}
}

// tick fires s when it is due and returns its next fire time.
func (r *Runner) tick(ctx context.Context, s Schedule) (time.Time, bool) {
	now := time.Now()
	from := time.UnixMilli(s.CreatedAt).Add(-time.Millisecond)
	if s.LastFire > 0 {
		from = time.UnixMilli(s.LastFire)
	}
	next, ok, skipped := s.NextAfter(from)
	r.reportSkips(s, skipped)
	if !ok {
		return time.Time{}, false
	}
	if next.After(now) {
		return next, true
	}
	// Due. Fires missed while nobody ran them coalesce into one, at the
	// latest missed time.
	latest, missed := next, 0
	if s.Spec.Kind == KindEvery {
		// The last missed time is known without walking them: an interval
		// of a second missed for weeks is millions of them.
		d := time.Duration(s.Spec.Every)
		if n := now.Sub(next) / d; n > 0 {
			latest, missed = next.Add(n*d), int(n)
		}
	}
	for i := 0; i < maxCoalesce; i++ {
		n, ok, sk := s.NextAfter(latest)
		r.reportSkips(s, sk)
		if !ok || n.After(now) {
			break
		}
		latest, missed = n, missed+1
	}
	if missed > 0 {
		r.logf("schedule %s: %d missed firing(s) coalesced into one", s.ID, missed+1)
	}
	r.Fire(ctx, s, latest)
	n, ok, sk := s.NextAfter(latest)
	r.reportSkips(s, sk)
	return n, ok
}

func (r *Runner) reportSkips(s Schedule, skipped []Skip) {
	for _, k := range skipped {
		r.mu.Lock()
		said := r.skips[k]
		r.skips[k] = true
		r.mu.Unlock()
		if !said {
			r.logf("schedule %s: local time %s does not exist in %s (daylight saving); skipped", s.ID, k.Local, k.Zone)
		}
	}
}

// ErrOverlap reports a firing skipped because the previous run of the same
// schedule is still running.
var ErrOverlap = errors.New("the previous run of this schedule is still running")

// Fire records the firing at fire, then starts its run unless the
// previous run of the same schedule is still running (skipped and
// logged). It returns at once; the run is the runner's.
func (r *Runner) Fire(ctx context.Context, s Schedule, fire time.Time) {
	// Recorded first: a crash during the run does not fire it again.
	if err := r.Store.MarkFired(ctx, s.ID, fire.UnixMilli()); err != nil {
		r.logf("schedule %s: %v", s.ID, err)
		return
	}
	r.mu.Lock()
	if ch := r.running[s.ID]; ch != nil {
		select {
		case <-ch:
		default:
			r.mu.Unlock()
			r.logf("schedule %s: firing at %s skipped: %v", s.ID, fire.Format(time.RFC3339), ErrOverlap)
			return
		}
	}
	done := make(chan struct{})
	r.running[s.ID] = done
	r.wg.Add(1)
	r.mu.Unlock()
	go func() {
		defer r.wg.Done()
		defer close(done)
		id, err := r.Starter.Start(ctx, s, fire)
		if err != nil {
			r.logf("schedule %s: firing at %s failed: %v", s.ID, fire.Format(time.RFC3339), err)
			return
		}
		r.logf("schedule %s: fired at %s: session %s", s.ID, fire.Format(time.RFC3339), id)
		if err := r.Starter.Wait(ctx, id); err != nil && ctx.Err() == nil {
			r.logf("schedule %s: session %s: %v", s.ID, id, err)
		}
	}()
}
