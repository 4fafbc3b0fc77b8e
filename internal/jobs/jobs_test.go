package jobs

import (
	"context"
	"errors"
	"io"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// bound limits waits that only a bug would make long.
const bound = 10 * time.Second

// done returns at once with out.
func done(out Outcome, err error) func(context.Context, io.Writer) (Outcome, error) {
	return func(context.Context, io.Writer) (Outcome, error) { return out, err }
}

// held writes text and then holds the job until release is closed or the
// job is stopped; after a stop it closes stopped (if not nil) and still
// waits for release, so a test can look at the stopping state.
func held(text string, release <-chan struct{}, stopped chan<- error) func(context.Context, io.Writer) (Outcome, error) {
	return func(ctx context.Context, out io.Writer) (Outcome, error) {
		_, _ = io.WriteString(out, text)
		select {
		case <-release:
			return Exited(0), nil
		case <-ctx.Done():
		}
		if stopped != nil {
			stopped <- context.Cause(ctx)
			<-release
		}
		return Exited(143), nil
	}
}

func start(t *testing.T, r *Registry, spec Spec) Job {
	t.Helper()
	j, err := r.Start(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	return j
}

func wait(t *testing.T, r *Registry, id string) Job {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	j, err := r.Wait(ctx, id)
	if err != nil {
		t.Fatalf("wait %s: %v", id, err)
	}
	return j
}

func TestIDsPerKind(t *testing.T) {
	r := New(Options{})
	defer r.Close()
	var got []string
	for _, kind := range []string{"bash", "bash", "subagent", "bash"} {
		got = append(got, start(t, r, Spec{Kind: kind, Run: done(Exited(0), nil)}).ID)
	}
	if want := []string{"bash-1", "bash-2", "subagent-1", "bash-3"}; !slices.Equal(got, want) {
		t.Fatalf("ids %v, want %v", got, want)
	}
}

func TestStartRejects(t *testing.T) {
	closed := New(Options{})
	closed.Close()
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	run := done(Exited(0), nil)
	tests := []struct {
		name string
		r    *Registry
		ctx  context.Context
		spec Spec
		want string
	}{
		{"no run", New(Options{}), context.Background(), Spec{Kind: "bash"}, "no Run"},
		{"empty kind", New(Options{}), context.Background(), Spec{Run: run}, "invalid kind"},
		{"kind with a dash", New(Options{}), context.Background(), Spec{Kind: "my-kind", Run: run}, "invalid kind"},
		{"upper-case kind", New(Options{}), context.Background(), Spec{Kind: "Bash", Run: run}, "invalid kind"},
		{"ctx done", New(Options{}), cancelled, Spec{Kind: "bash", Run: run}, "not started"},
		{"closed", closed, context.Background(), Spec{Kind: "bash", Run: run}, ErrClosed.Error()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			defer tt.r.Close()
			if _, err := tt.r.Start(tt.ctx, tt.spec); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err %v, want %q", err, tt.want)
			}
			if n := len(tt.r.List("")); n != 0 {
				t.Fatalf("%d jobs registered", n)
			}
		})
	}
}

func TestEnd(t *testing.T) {
	tests := []struct {
		name        string
		run         func(context.Context, io.Writer) (Outcome, error)
		wantStatus  Status
		wantSummary string
	}{
		{"exit 0", done(Exited(0), nil), Completed, "completed, exit code 0"},
		{"exit 2", done(Exited(2), nil), Failed, "failed, exit code 2"},
		{"no exit code", done(Outcome{}, nil), Completed, "completed"},
		{"producer failure with a note", done(Outcome{ExitCode: Exited(143).ExitCode, Failed: true, Note: "timed out after 1s"}, nil),
			Failed, "failed, exit code 143, timed out after 1s"},
		{"error", done(Outcome{}, errors.New("boom")), Failed, "failed, error: boom"},
		{"panic", func(context.Context, io.Writer) (Outcome, error) { panic("oops") }, Failed, "failed, error: job panicked: oops"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := New(Options{})
			defer r.Close()
			j := start(t, r, Spec{Kind: "bash", Owner: "s1", Description: "d", Run: tt.run})
			if j.Status != Running || j.Owner != "s1" || j.Description != "d" || j.Started.IsZero() || !j.Ended.IsZero() {
				t.Fatalf("started %+v", j)
			}
			j = wait(t, r, j.ID)
			if j.Status != tt.wantStatus || j.Summary() != tt.wantSummary || j.Ended.Before(j.Started) {
				t.Fatalf("ended %+v (%q)", j, j.Summary())
			}
		})
	}
}

func TestKill(t *testing.T) {
	r := New(Options{})
	defer r.Close()
	release, stopped := make(chan struct{}), make(chan error, 1)
	j := start(t, r, Spec{Kind: "bash", Run: held("x", release, stopped)})

	killed := make(chan Job, 1)
	go func() {
		k, err := r.Kill(context.Background(), j.ID)
		if err != nil {
			t.Error(err)
		}
		killed <- k
	}()
	if cause := <-stopped; !errors.Is(cause, ErrKilled) {
		t.Fatalf("cause %v", cause)
	}
	// The producer is still tearing down: the job is stopping.
	if g, _ := r.Get(j.ID); g.Status != Stopping || !g.Reported {
		t.Fatalf("while stopping: %+v", g)
	}
	close(release)
	if k := <-killed; k.Status != Killed || k.Summary() != "killed, exit code 143" || !k.Reported {
		t.Fatalf("killed: %+v", k)
	}

	// An ended job is returned as it ended.
	e := start(t, r, Spec{Kind: "bash", Run: done(Exited(0), nil)})
	wait(t, r, e.ID)
	if k, err := r.Kill(context.Background(), e.ID); err != nil || k.Status != Completed {
		t.Fatalf("kill after end: %+v %v", k, err)
	}
	if _, err := r.Kill(context.Background(), "bash-99"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown: %v", err)
	}
}

func TestKillGivesUpWithCtx(t *testing.T) {
	r := New(Options{})
	defer r.Close()
	release, stopped := make(chan struct{}), make(chan error, 1)
	j := start(t, r, Spec{Kind: "bash", Run: held("", release, stopped)})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	k, err := r.Kill(ctx, j.ID)
	if !errors.Is(err, context.Canceled) || k.Status != Stopping {
		t.Fatalf("kill with done ctx: %+v %v", k, err)
	}
	<-stopped // the stop was still requested
	close(release)
	if j = wait(t, r, j.ID); j.Status != Killed {
		t.Fatalf("after release: %+v", j)
	}
}

func TestWait(t *testing.T) {
	r := New(Options{})
	defer r.Close()
	release := make(chan struct{})
	j := start(t, r, Spec{Kind: "bash", Run: held("", release, nil)})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if w, err := r.Wait(ctx, j.ID); !errors.Is(err, context.Canceled) || w.Status != Running {
		t.Fatalf("wait with done ctx: %+v %v", w, err)
	}
	close(release)
	if w := wait(t, r, j.ID); w.Status != Completed || !w.Reported {
		t.Fatalf("wait: %+v", w)
	}
	if _, err := r.Wait(context.Background(), "nope-1"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown: %v", err)
	}
}

// TestReported checks when a completion notice is due: not when the
// owner killed the job or was waiting for it as it ended.
func TestReported(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := New(Options{})
		defer r.Close()
		got := map[string]bool{}
		var mu sync.Mutex
		r.OnDone(func(j Job) {
			mu.Lock()
			got[j.ID] = j.Reported
			mu.Unlock()
		})

		alone := make(chan struct{})
		a := start(t, r, Spec{Kind: "bash", Run: held("", alone, nil)})
		close(alone)

		watched := make(chan struct{})
		w := start(t, r, Spec{Kind: "bash", Run: held("", watched, nil)})
		waited := make(chan Job, 1)
		go func() {
			j, _ := r.Wait(context.Background(), w.ID)
			waited <- j
		}()
		synctest.Wait() // the waiter is blocked in Wait
		close(watched)
		if j := <-waited; !j.Reported || j.Status != Completed {
			t.Errorf("waited: %+v", j)
		}

		k := start(t, r, Spec{Kind: "bash", Run: held("", make(chan struct{}), nil)})
		if _, err := r.Kill(context.Background(), k.ID); err != nil {
			t.Fatal(err)
		}
		synctest.Wait() // every OnDone call has returned
		mu.Lock()
		defer mu.Unlock()
		if want := map[string]bool{a.ID: false, w.ID: true, k.ID: true}; !mapsEqual(got, want) {
			t.Errorf("reported %v, want %v", got, want)
		}
	})
}

func mapsEqual(a, b map[string]bool) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// steps writes each piece of text when told to, then ends.
func steps(pieces <-chan string) func(context.Context, io.Writer) (Outcome, error) {
	return func(ctx context.Context, out io.Writer) (Outcome, error) {
		for {
			select {
			case p, ok := <-pieces:
				if !ok {
					return Exited(0), nil
				}
				_, _ = io.WriteString(out, p)
			case <-ctx.Done():
				return Outcome{}, nil
			}
		}
	}
}

func TestReadAndWaitOutput(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := New(Options{OutputLimit: 8})
		defer r.Close()
		pieces := make(chan string)
		j := start(t, r, Spec{Kind: "bash", Run: steps(pieces)})

		got := make(chan Job, 1)
		go func() {
			w, _ := r.WaitOutput(context.Background(), j.ID, 0)
			got <- w
		}()
		synctest.Wait()
		select {
		case w := <-got:
			t.Fatalf("WaitOutput returned before any output: %+v", w)
		default:
		}
		pieces <- "abc"
		if w := <-got; w.OutputBytes != 3 || w.Status != Running {
			t.Fatalf("WaitOutput: %+v", w)
		}

		type read struct {
			since         int64
			chunk         string
			next, dropped int64
			output        bool
		}
		check := func(rd read) {
			t.Helper()
			var (
				c       []byte
				n, d    int64
				err     error
				call    = "Read"
				sinceOf = rd.since
			)
			if rd.output {
				call = "Output"
				c, n, d, err = r.Output(j.ID, sinceOf)
			} else {
				c, n, d, err = r.Read(j.ID, sinceOf)
			}
			if err != nil || string(c) != rd.chunk || n != rd.next || d != rd.dropped {
				t.Fatalf("%s(%d) = %q %d %d %v, want %q %d %d", call, rd.since, c, n, d, err, rd.chunk, rd.next, rd.dropped)
			}
		}
		check(read{since: -1, chunk: "abc", next: 3})
		check(read{since: -1, chunk: "", next: 3})
		pieces <- "defghijk" // 11 bytes in all; the ring keeps the last 8
		synctest.Wait()
		check(read{since: 0, output: true, chunk: "defghijk", next: 11, dropped: 3}) // Output leaves the cursor
		check(read{since: -1, chunk: "defghijk", next: 11})                          // from the cursor (3)
		check(read{since: 1, chunk: "defghijk", next: 11, dropped: 2})               // explicit offset
		check(read{since: 9, chunk: "jk", next: 11})                                 // inside the ring
		check(read{since: 50, chunk: "", next: 11})                                  // past the end
		check(read{since: -1, chunk: "", next: 11})                                  // the cursor moved
		if tail, _ := r.Tail(j.ID, 4); string(tail) != "hijk" {
			t.Fatalf("tail %q", tail)
		}
		close(pieces)
		if w, err := r.WaitOutput(context.Background(), j.ID, 11); err != nil || !w.Status.Terminal() {
			t.Fatalf("WaitOutput at the end: %+v %v", w, err)
		}
		if j := wait(t, r, j.ID); j.OutputBytes != 11 || j.DroppedBytes != 3 {
			t.Fatalf("counts %+v", j)
		}
	})
}

func TestUnknownJob(t *testing.T) {
	r := New(Options{})
	defer r.Close()
	if _, ok := r.Get("bash-1"); ok {
		t.Fatal("Get found a job")
	}
	if _, _, _, err := r.Output("bash-1", 0); !errors.Is(err, ErrNotFound) {
		t.Fatal(err)
	}
	if _, _, _, err := r.Read("bash-1", 0); !errors.Is(err, ErrNotFound) {
		t.Fatal(err)
	}
	if _, err := r.Tail("bash-1", 1); !errors.Is(err, ErrNotFound) {
		t.Fatal(err)
	}
	if _, err := r.WaitOutput(context.Background(), "bash-1", 0); !errors.Is(err, ErrNotFound) {
		t.Fatal(err)
	}
}

func TestListAndCancelOwner(t *testing.T) {
	r := New(Options{})
	defer r.Close()
	ended := make(chan Job, 8)
	r.OnDone(func(j Job) { ended <- j })

	a0 := start(t, r, Spec{Kind: "bash", Owner: "a", Run: done(Exited(0), nil)})
	<-ended
	causes := make(chan error, 2)
	holdA, holdB := make(chan struct{}), make(chan struct{})
	defer close(holdB)
	a1 := start(t, r, Spec{Kind: "bash", Owner: "a", Run: held("", holdA, causes)})
	b1 := start(t, r, Spec{Kind: "subagent", Owner: "b", Run: held("", holdB, causes)})
	ids := func(js []Job) []string {
		var out []string
		for _, j := range js {
			out = append(out, j.ID)
		}
		return out
	}
	if got := ids(r.List("a")); !slices.Equal(got, []string{a0.ID, a1.ID}) {
		t.Fatalf("List(a) = %v", got)
	}
	if got := ids(r.List("")); !slices.Equal(got, []string{a0.ID, a1.ID, b1.ID}) {
		t.Fatalf("List() = %v", got)
	}

	if got := r.CancelOwner("a"); !slices.Equal(got, []string{a1.ID}) {
		t.Fatalf("CancelOwner stopped %v", got)
	}
	if _, ok := r.Get(a0.ID); ok {
		t.Fatal("the owner's ended job is still listed")
	}
	if cause := <-causes; !errors.Is(cause, ErrOwnerGone) {
		t.Fatalf("cause %v", cause)
	}
	close(holdA) // let a1's producer return
	if j := <-ended; j.ID != a1.ID || j.Status != Killed || !j.Reported {
		t.Fatalf("ended %+v", j)
	}
	if _, ok := r.Get(a1.ID); ok {
		t.Fatal("the owner's stopped job is still listed after it ended")
	}
	if b, _ := r.Get(b1.ID); b.Status != Running {
		t.Fatalf("another owner's job: %+v", b)
	}
	if got := r.CancelOwner(""); got != nil {
		t.Fatalf("CancelOwner(\"\") stopped %v", got)
	}
}

func TestCloseWaitsForEveryJob(t *testing.T) {
	r := New(Options{})
	var cleaned, notified atomic.Int32
	r.OnDone(func(Job) { notified.Add(1) })
	const n = 5
	for range n {
		start(t, r, Spec{Kind: "bash", Run: func(ctx context.Context, _ io.Writer) (Outcome, error) {
			<-ctx.Done()
			if errors.Is(context.Cause(ctx), ErrClosed) {
				cleaned.Add(1)
			}
			return Outcome{}, nil
		}})
	}
	finished := start(t, r, Spec{Kind: "bash", Run: done(Exited(0), nil)})
	wait(t, r, finished.ID)
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if cleaned.Load() != n || notified.Load() != n+1 {
		t.Fatalf("after Close: %d cleaned up, %d notified", cleaned.Load(), notified.Load())
	}
	for _, j := range r.List("") {
		if !j.Status.Terminal() {
			t.Fatalf("job still %s after Close", j.Status)
		}
	}
	if _, err := r.Start(context.Background(), Spec{Kind: "bash", Run: done(Exited(0), nil)}); !errors.Is(err, ErrClosed) {
		t.Fatalf("Start after Close: %v", err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestOnDoneOncePerJob(t *testing.T) {
	r := New(Options{})
	var mu sync.Mutex
	counts := map[string]int{}
	r.OnDone(func(Job) { panic("a broken listener must not stop the others") })
	r.OnDone(func(j Job) {
		mu.Lock()
		counts[j.ID]++
		mu.Unlock()
	})
	removed := r.OnDone(func(Job) { t.Error("a removed listener was called") })
	removed()

	// Kill races natural completion on every job; exactly one end wins.
	const n = 20
	var wg sync.WaitGroup
	for range n {
		release := make(chan struct{})
		j := start(t, r, Spec{Kind: "bash", Run: held("", release, nil)})
		wg.Go(func() { close(release) })
		wg.Go(func() { _, _ = r.Kill(context.Background(), j.ID) })
	}
	wg.Wait()
	r.Close()
	if len(counts) != n {
		t.Fatalf("%d jobs notified, want %d", len(counts), n)
	}
	for id, c := range counts {
		if c != 1 {
			t.Fatalf("%s notified %d times", id, c)
		}
	}
}
