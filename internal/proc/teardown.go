package proc

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// pollInterval is how often the bounded teardown waits re-read /proc.
const pollInterval = 10 * time.Millisecond

// ErrCleanupUnconfirmed is wrapped by errors reporting that members of a
// child's process group were still alive after teardown.
var ErrCleanupUnconfirmed = errors.New("proc: cleanup not confirmed")

// TeardownResult reports one teardown sequence.
type TeardownResult struct {
	// Confirmed is true when no member of the process group was left.
	Confirmed bool
	// Signals lists the signals sent to the group, in order ("SIGTERM",
	// "SIGKILL"); empty when the group was already gone.
	Signals []string
	// Remaining lists the pids still in the group when the sequence
	// gave up (or when the caller's ctx ended first).
	Remaining []int
}

// Err returns nil when cleanup was confirmed, else an error wrapping
// ErrCleanupUnconfirmed that names the remaining pids.
func (r TeardownResult) Err() error {
	if r.Confirmed {
		return nil
	}
	return fmt.Errorf("%w: pids %v still alive", ErrCleanupUnconfirmed, r.Remaining)
}

// Teardown ends the process group (see the package comment) and reports
// whether it is confirmed gone. The sequence runs once: concurrent and
// later calls wait for the same sequence and get the same result. ctx only
// bounds this caller's wait; when it ends first the sequence carries on
// and the returned result is unconfirmed, with the current members.
func (p *Process) Teardown(ctx context.Context) TeardownResult {
	p.teardownOnce.Do(func() {
		if p.stopCtx != nil {
			p.stopCtx()
		}
		go p.teardown()
	})
	select {
	case <-p.teardownDone:
		return p.result
	case <-ctx.Done():
		return TeardownResult{Remaining: p.g.members()}
	}
}

func (p *Process) teardown() {
	defer close(p.teardownDone)
	res := p.g.terminate(p.grace)
	p.g.release(res.Confirmed)
	p.stdin.Close()
	p.stdout.Close()
	if p.ctlW != nil {
		p.ctlW.Close()
		p.ctlR.Close()
	}
	// The group is gone, so stderr's EOF comes at once unless a process
	// that left the group holds the pipe.
	_ = p.stderrR.SetReadDeadline(time.Now().Add(drainDelay))
	<-p.stderrDone
	p.stderrR.Close()
	p.result = res
}

// waitEmpty polls list until it returns nothing or d has passed, and
// reports whether it became empty.
func waitEmpty(list func() []int, d time.Duration) bool {
	if len(list()) == 0 {
		return true
	}
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
			if len(list()) == 0 {
				return true
			}
		case <-deadline.C:
			return len(list()) == 0
		}
	}
}

// Handle is the run handle a provider publishes for an out-of-process
// child: Dispose cancels the run locally without assuming the child
// cooperates, then awaits the teardown of its whole process group.
type Handle struct {
	proc   *Process
	cancel func()
	once   sync.Once
	done   chan struct{}
	result TeardownResult
	err    error
}

// NewHandle wraps p. cancel, when not nil, is called once at the start of
// Dispose to settle the run's local cancellation (stop readers, mark the
// result aborted) before the process group is torn down.
func NewHandle(p *Process, cancel func()) *Handle {
	return &Handle{proc: p, cancel: cancel, done: make(chan struct{})}
}

// Process returns the wrapped process.
func (h *Handle) Process() *Process { return h.proc }

// Dispose cancels the run and awaits its teardown. It is idempotent:
// concurrent and later calls share one teardown and return the same
// error, which is non-nil (wrapping ErrCleanupUnconfirmed) when members of
// the group survived; the run must then be reported as failed.
func (h *Handle) Dispose() error {
	h.once.Do(func() {
		defer close(h.done)
		if h.cancel != nil {
			h.cancel()
		}
		h.result = h.proc.Teardown(context.Background())
		h.err = h.result.Err()
	})
	<-h.done
	return h.err
}

// Result returns the teardown result once Dispose has finished, and false
// before.
func (h *Handle) Result() (TeardownResult, bool) {
	select {
	case <-h.done:
		return h.result, true
	default:
		return TeardownResult{}, false
	}
}
