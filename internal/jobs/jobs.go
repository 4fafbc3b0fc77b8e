// Package jobs is the background-job registry: long-running work (a bash
// command started with run_in_background, a background subagent) that
// outlives the tool call that started it, is read, listed and killed
// through the job_* tools, and announces its end to its owner.
//
// A [Registry] owns every job's goroutine: [Registry.Close] cancels them
// all and returns only when they have returned, so no job outlives the
// process's orderly shutdown. Jobs are identified as "<kind>-N" with a
// counter per kind. Ids are predictable, so the owner check the tools
// make on every access is a security boundary, not a courtesy.
//
// Output goes into a bounded ring per job (the last [DefaultOutputLimit]
// bytes by default) addressed by absolute byte offsets, so readers can
// resume where they stopped and learn how much scrolled out meanwhile.
//
// Completion is announced once per job to [Registry.OnDone] listeners;
// the [Notifier] turns that into the owner-facing notice.
package jobs

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/dsh-dev/dsh/internal/ring"
)

// DefaultOutputLimit is the default size of a job's output ring.
const DefaultOutputLimit = 1 << 20

// Errors returned by the registry. The cancel causes (ErrKilled,
// ErrOwnerGone, ErrClosed) are also what context.Cause reports on a
// job's context once it is stopped.
var (
	ErrNotFound  = errors.New("jobs: no such job")
	ErrClosed    = errors.New("jobs: registry closed")
	ErrKilled    = errors.New("jobs: job killed")
	ErrOwnerGone = errors.New("jobs: job owner disposed")
)

// Status is where a job is in its life.
type Status string

// Job statuses. running → stopping → killed when the job is stopped;
// running → completed or failed when it ends on its own.
const (
	Running   Status = "running"
	Stopping  Status = "stopping"
	Completed Status = "completed"
	Killed    Status = "killed"
	Failed    Status = "failed"
)

// Terminal reports whether the job has ended (its goroutine returned).
func (s Status) Terminal() bool { return s == Completed || s == Killed || s == Failed }

// Outcome is what a producer reports when its work ends.
type Outcome struct {
	// ExitCode is the process exit status (128+signal for a signal), nil
	// for work that has none (a subagent).
	ExitCode *int
	// Failed marks an unsuccessful end that is not a Go error, such as a
	// non-zero exit status or the producer's own timeout.
	Failed bool
	// Note is a short remark for status lines ("timed out after 5s").
	Note string
}

// Exited is the outcome of a process that exited with code: failed unless
// the code is 0, because a non-zero status is what "the job did not
// succeed" means for commands.
func Exited(code int) Outcome { return Outcome{ExitCode: &code, Failed: code != 0} }

// Spec describes a job to start.
type Spec struct {
	// Kind names the producer ("bash", "subagent"); it prefixes the id and
	// must match [a-z0-9_]+ so ids stay unambiguous.
	Kind string
	// Owner is the session or agent id that may read and kill the job;
	// "" makes it visible to everyone.
	Owner string
	// Description is a short human label ("Run dev server").
	Description string
	// Run does the work. It must return soon after ctx is done, and must
	// not use out after it returned. out never fails. A returned error
	// makes the job failed; a panic is recovered and does the same.
	Run func(ctx context.Context, out io.Writer) (Outcome, error)
}

// Job is a snapshot of a job; it never changes after it was taken.
type Job struct {
	ID          string
	Kind        string
	Owner       string
	Description string
	Status      Status
	Started     time.Time
	// Ended is zero while the job runs.
	Ended time.Time
	// ExitCode is the producer's exit status, if it has one.
	ExitCode *int
	// Error is the producer's error text (status failed).
	Error string
	// Note is the producer's remark (status line detail).
	Note string
	// OutputBytes is how much output the job has written in all;
	// DroppedBytes how much of it the ring no longer keeps.
	OutputBytes, DroppedBytes int64
	// Reported means the owner already learned how the job ended (it
	// killed it, or was waiting for it when it ended), so no completion
	// notice is due.
	Reported bool
}

// Summary is the status with its details, as status lines show it:
// "running", "completed, exit code 0", "failed, exit code 143, timed out
// after 5s", "failed, error: …", "killed".
func (j Job) Summary() string {
	parts := []string{string(j.Status)}
	if j.ExitCode != nil {
		parts = append(parts, "exit code "+strconv.Itoa(*j.ExitCode))
	}
	if j.Note != "" {
		parts = append(parts, j.Note)
	}
	if j.Error != "" {
		parts = append(parts, "error: "+j.Error)
	}
	return strings.Join(parts, ", ")
}

// Options configures a registry.
type Options struct {
	// OutputLimit is the size of each job's output ring; <= 0 means
	// DefaultOutputLimit.
	OutputLimit int
}

// Registry holds jobs. It is safe for concurrent use.
type Registry struct {
	limit int

	mu        sync.Mutex
	jobs      map[string]*entry // guarded by mu
	seq       int               // guarded by mu; start order, for List
	counters  map[string]int    // guarded by mu; last number per kind
	listeners []*listener       // guarded by mu
	closed    bool              // guarded by mu

	wg sync.WaitGroup // one per job goroutine
}

// entry is the live state of one job; all fields are guarded by
// Registry.mu.
type entry struct {
	job    Job
	seq    int
	out    *ring.Buffer
	cancel context.CancelCauseFunc
	// done is closed when the job ended.
	done chan struct{}
	// changed is closed and replaced on every write and at the end, to
	// wake WaitOutput callers without polling.
	changed chan struct{}
	// waiters counts Wait callers; a job that ends while one waits is
	// reported by it.
	waiters int
	// cursor is where the last Read stopped.
	cursor int64
	// forget drops the entry once it ended (its owner is gone).
	forget bool
}

type listener struct{ fn func(Job) }

// New returns an empty registry.
func New(opts Options) *Registry {
	if opts.OutputLimit <= 0 {
		opts.OutputLimit = DefaultOutputLimit
	}
	return &Registry{limit: opts.OutputLimit, jobs: map[string]*entry{}, counters: map[string]int{}}
}

var validKind = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z0-9_]+$`) })

// Start registers a job and runs spec.Run in a goroutine the registry
// owns. The job's context keeps ctx's values but not its cancellation or
// deadline: a job outlives the call that started it and is stopped only
// by [Registry.Kill], [Registry.CancelOwner] or [Registry.Close]. Start
// fails, starting nothing, when the registry is closed, ctx is already
// done or the spec is invalid.
func (r *Registry) Start(ctx context.Context, spec Spec) (Job, error) {
	if spec.Run == nil {
		return Job{}, errors.New("jobs: spec has no Run")
	}
	if !validKind().MatchString(spec.Kind) {
		return Job{}, fmt.Errorf("jobs: invalid kind %q", spec.Kind)
	}
	if err := ctx.Err(); err != nil {
		return Job{}, fmt.Errorf("jobs: not started: %w", err)
	}
	jctx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		cancel(ErrClosed)
		return Job{}, ErrClosed
	}
	r.counters[spec.Kind]++
	r.seq++
	e := &entry{
		job: Job{
			ID:          spec.Kind + "-" + strconv.Itoa(r.counters[spec.Kind]),
			Kind:        spec.Kind,
			Owner:       spec.Owner,
			Description: spec.Description,
			Status:      Running,
			Started:     time.Now(),
		},
		seq:     r.seq,
		out:     ring.New(r.limit),
		cancel:  cancel,
		done:    make(chan struct{}),
		changed: make(chan struct{}),
	}
	r.jobs[e.job.ID] = e
	// Added under mu, so Close (which sets closed under mu before it
	// waits) never waits while a job is still being added.
	r.wg.Go(func() { r.run(jctx, e, spec.Run) })
	return r.snapshot(e), nil
}

// run executes one job and records how it ended.
func (r *Registry) run(ctx context.Context, e *entry, fn func(context.Context, io.Writer) (Outcome, error)) {
	out, err := safeRun(ctx, fn, &writer{r: r, e: e})
	e.cancel(nil) // releases the context's resources; a no-op after a kill

	r.mu.Lock()
	j := &e.job
	j.Ended = time.Now()
	j.ExitCode, j.Note = out.ExitCode, out.Note
	if err != nil {
		j.Error = err.Error()
	}
	switch {
	case j.Status == Stopping:
		// Stopping was requested first; how the work then ended does not
		// change that it was killed.
		j.Status = Killed
	case err != nil || out.Failed:
		j.Status = Failed
	default:
		j.Status = Completed
	}
	if e.waiters > 0 {
		j.Reported = true
	}
	close(e.done)
	e.wake()
	snap := r.snapshot(e)
	if e.forget {
		delete(r.jobs, j.ID)
	}
	ls := slices.Clone(r.listeners)
	r.mu.Unlock()

	for _, l := range ls {
		notify(l.fn, snap)
	}
}

// safeRun turns a producer panic into a failed job instead of a crashed
// process.
func safeRun(ctx context.Context, fn func(context.Context, io.Writer) (Outcome, error), w io.Writer) (out Outcome, err error) {
	defer func() {
		if v := recover(); v != nil {
			out, err = Outcome{}, fmt.Errorf("job panicked: %v", v)
		}
	}()
	return fn(ctx, w)
}

// notify calls one listener, isolating the others from its panic.
func notify(fn func(Job), j Job) {
	defer func() { _ = recover() }()
	fn(j)
}

// writer feeds a job's ring.
type writer struct {
	r *Registry
	e *entry
}

func (w *writer) Write(p []byte) (int, error) {
	w.r.mu.Lock()
	defer w.r.mu.Unlock()
	// Late writes from a producer that broke its contract are dropped:
	// an ended job's output is final.
	if !w.e.job.Status.Terminal() && len(p) > 0 {
		w.e.out.Write(p)
		w.e.wake()
	}
	return len(p), nil
}

// wake releases WaitOutput callers; call with Registry.mu held.
func (e *entry) wake() {
	close(e.changed)
	e.changed = make(chan struct{})
}

// snapshot copies e's job; call with r.mu held.
func (r *Registry) snapshot(e *entry) Job {
	j := e.job
	if j.ExitCode != nil {
		c := *j.ExitCode
		j.ExitCode = &c
	}
	j.OutputBytes, j.DroppedBytes = e.out.Total(), e.out.First()
	return j
}

// OnDone registers fn to be called once for every job that ends from now
// on, with its final snapshot. Calls happen on the job's goroutine after
// waiters were released and outside the registry's lock, so fn may call
// back into the registry; a panic in fn is recovered. Close waits for
// running calls. The returned function unregisters fn.
func (r *Registry) OnDone(fn func(Job)) (remove func()) {
	l := &listener{fn: fn}
	r.mu.Lock()
	r.listeners = append(r.listeners, l)
	r.mu.Unlock()
	return func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.listeners = slices.DeleteFunc(r.listeners, func(x *listener) bool { return x == l })
	}
}

// Get returns a snapshot of job id.
func (r *Registry) Get(id string) (Job, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.jobs[id]
	if !ok {
		return Job{}, false
	}
	return r.snapshot(e), true
}

// List returns the jobs of owner ("" = every job) in start order.
func (r *Registry) List(owner string) []Job {
	r.mu.Lock()
	defer r.mu.Unlock()
	es := make([]*entry, 0, len(r.jobs))
	for _, e := range r.jobs {
		if owner == "" || e.job.Owner == owner {
			es = append(es, e)
		}
	}
	slices.SortFunc(es, func(a, b *entry) int { return cmp.Compare(a.seq, b.seq) })
	out := make([]Job, len(es))
	for i, e := range es {
		out[i] = r.snapshot(e)
	}
	return out
}

// Output returns the kept output of job id from byte offset since (0 is
// the job's first byte), the offset just past it, and how many bytes
// after since the ring no longer keeps. since is clamped to what was
// written. It does not move the read cursor.
func (r *Registry) Output(id string, since int64) (chunk []byte, next, dropped int64, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.jobs[id]
	if !ok {
		return nil, 0, 0, ErrNotFound
	}
	chunk, _, dropped = e.out.Read(since, 0)
	next = e.out.Total()
	return chunk, next, dropped, nil
}

// Read is Output for the owner's reader: since < 0 reads from where the
// previous Read stopped, and every Read moves that cursor to next, so
// consecutive reads see each byte once.
func (r *Registry) Read(id string, since int64) (chunk []byte, next, dropped int64, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.jobs[id]
	if !ok {
		return nil, 0, 0, ErrNotFound
	}
	if since < 0 {
		since = e.cursor
	}
	chunk, _, dropped = e.out.Read(since, 0)
	next = e.out.Total()
	e.cursor = next
	return chunk, next, dropped, nil
}

// Tail returns up to the last n kept bytes of job id's output.
func (r *Registry) Tail(id string, n int) ([]byte, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.jobs[id]
	if !ok {
		return nil, ErrNotFound
	}
	chunk, _, _ := e.out.Read(e.out.Total()-int64(n), 0)
	return chunk, nil
}

// Wait blocks until job id ended or ctx is done, and returns its snapshot
// (with ctx's error in the second case). It is meant for the owner's
// reader: a job that ends while someone waits for it, or that Wait finds
// ended, is marked Reported, since the waiter hands its end to the owner.
func (r *Registry) Wait(ctx context.Context, id string) (Job, error) {
	r.mu.Lock()
	e, ok := r.jobs[id]
	if !ok {
		r.mu.Unlock()
		return Job{}, ErrNotFound
	}
	e.waiters++
	r.mu.Unlock()

	select {
	case <-e.done:
	case <-ctx.Done():
	}

	r.mu.Lock()
	defer r.mu.Unlock()
	e.waiters--
	// The end wins over a simultaneous cancel: it may already have been
	// marked as reported on this waiter's behalf.
	if e.job.Status.Terminal() {
		e.job.Reported = true
		return r.snapshot(e), nil
	}
	return r.snapshot(e), ctx.Err()
}

// WaitOutput blocks until job id has written more than offset bytes, has
// ended, or ctx is done, and returns its snapshot (with ctx's error in
// the last case). A live tail uses it instead of polling.
func (r *Registry) WaitOutput(ctx context.Context, id string, offset int64) (Job, error) {
	for {
		r.mu.Lock()
		e, ok := r.jobs[id]
		if !ok {
			r.mu.Unlock()
			return Job{}, ErrNotFound
		}
		snap, changed := r.snapshot(e), e.changed
		r.mu.Unlock()
		if snap.OutputBytes > offset || snap.Status.Terminal() {
			return snap, nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return snap, ctx.Err()
		}
	}
}

// Kill stops job id: it becomes stopping, its context is cancelled with
// ErrKilled, and Kill waits until the job ended (then killed) or ctx is
// done (then it returns the stopping snapshot and ctx's error). A job
// that already ended is returned as it is. The killer knows how the job
// ended, so no completion notice is due.
func (r *Registry) Kill(ctx context.Context, id string) (Job, error) {
	r.mu.Lock()
	e, ok := r.jobs[id]
	if !ok {
		r.mu.Unlock()
		return Job{}, ErrNotFound
	}
	r.stopLocked(e, ErrKilled)
	r.mu.Unlock()

	select {
	case <-e.done:
	case <-ctx.Done():
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if e.job.Status.Terminal() {
		return r.snapshot(e), nil
	}
	return r.snapshot(e), ctx.Err()
}

// stopLocked moves a running job to stopping and cancels it; call with
// r.mu held.
func (r *Registry) stopLocked(e *entry, cause error) {
	if e.job.Status != Running {
		return
	}
	e.job.Status = Stopping
	e.job.Reported = true
	e.cancel(cause)
}

// CancelOwner is the owner's disposal: it stops every running job of
// owner (context cause ErrOwnerGone) without waiting for them, and
// forgets the owner's jobs (at once if ended, else when they end), since
// nobody is left to read them. It returns the ids of the jobs it stopped.
// Owner "" (ownerless jobs) is left to Close.
func (r *Registry) CancelOwner(owner string) []string {
	if owner == "" {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	var stopped []string
	for id, e := range r.jobs {
		if e.job.Owner != owner {
			continue
		}
		if e.job.Status.Terminal() {
			delete(r.jobs, id)
			continue
		}
		e.forget = true
		if e.job.Status == Running {
			stopped = append(stopped, id)
		}
		r.stopLocked(e, ErrOwnerGone)
	}
	slices.Sort(stopped)
	return stopped
}

// Close stops every running job (context cause ErrClosed), waits until
// all job goroutines and their OnDone calls have returned, and makes
// Start fail from then on. It blocks as long as a producer ignores its
// context. Calling it again only waits.
func (r *Registry) Close() error {
	r.mu.Lock()
	r.closed = true
	for _, e := range r.jobs {
		r.stopLocked(e, ErrClosed)
	}
	r.mu.Unlock()
	r.wg.Wait()
	return nil
}
