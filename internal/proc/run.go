package proc

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"
)

// Outcome is how a Run ended.
type Outcome struct {
	// ExitCode is the exit status, or 128+signal when the child was
	// killed by a signal (the shell convention, which models know).
	ExitCode int
	// Signaled reports that the child was killed by a signal.
	Signaled bool
	// Output is the captured stdout and stderr, interleaved in write
	// order. When more than OutputLimit bytes were written it holds the
	// head, a marker line "[… N bytes elided …]", then the tail.
	Output []byte
	// Elided is the number of bytes dropped from the middle.
	Elided int64
	// TotalBytes is the number of bytes the process group wrote.
	TotalBytes int64
	// TimedOut and Cancelled report that the context ended (deadline or
	// cancel) while the child was running and the group was killed.
	TimedOut, Cancelled bool
	// Duration is the child's wall-clock lifetime.
	Duration time.Duration
	// Teardown reports the end of the group: the signals sent (SIGKILL to
	// leftovers after a normal exit, SIGTERM then maybe SIGKILL on
	// cancellation) and whether it was confirmed empty.
	Teardown TeardownResult
}

// Run runs spec.Argv to completion. stdout and stderr share one pipe so
// their interleaving is preserved. When ctx ends first, the group gets
// SIGTERM, then SIGKILL after KillGrace, and Run still waits until the
// child is reaped. When the child exits, whatever it left running in its
// group is killed, so a backgrounded "sleep 100 &" neither survives nor
// holds the call open.
//
// The error is non-nil only when the process could not be started (bad
// argv, missing directory, ctx already done); every way a started process
// can end is described by the Outcome.
func Run(ctx context.Context, spec Spec) (Outcome, error) {
	if err := ctx.Err(); err != nil {
		return Outcome{}, fmt.Errorf("proc: not started: %w", err)
	}
	if spec.ControlChannel {
		return Outcome{}, errors.New("proc: Spec.ControlChannel is for Start; Run has no channel to hand back")
	}
	limit, grace := spec.limits()
	pr, pw, err := os.Pipe()
	if err != nil {
		return Outcome{}, fmt.Errorf("proc: %w", err)
	}
	// Passing the *os.File makes exec hand the fd to the child directly:
	// no copying goroutine that Wait would block on.
	g, err := spawn(spec, spec.Stdin, pw, pw, nil)
	pw.Close() // the children hold the write end now; EOF comes when they all close it
	if err != nil {
		pr.Close()
		return Outcome{}, err
	}

	c := startCapture(pr, limit)
	signals, cause := awaitOrStop(ctx, g.exited, g.signal, grace)
	// Kill what the leader left behind at once: nobody is left to clean
	// it up, and on the cancel path this cuts the grace short for members
	// that ignored SIGTERM.
	res := g.terminate(0)
	res.Signals = append(signals, res.Signals...)
	g.release(res.Confirmed)
	// Group members are dead and their pipe ends closed, so EOF comes
	// almost at once; the deadline only matters for escaped processes.
	c.drain()
	// g.exitErr is not reachable in practice: waitid on our own child
	// does not fail. Reported as a failure rather than success.
	return c.outcome(cause, g.duration, res, g.exit, g.exitErr != nil), nil
}
