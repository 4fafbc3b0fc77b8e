package proc

import (
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"
)

// Remote is a command that another process started on dsh's behalf (the
// sandbox's per-session server, which forks each command from inside
// its namespaces): dsh holds its output pipe but is not its parent, so
// it learns of its end and signals it through that process.
type Remote interface {
	// Done is closed once the command has exited and whatever it left
	// running is gone, or once the process running it failed.
	Done() <-chan struct{}
	// Result is how the command ended; after Done. The error is non-nil
	// when the process running it failed (died, broke its protocol)
	// before it could say: the command's end is then unknown.
	Result() (ExitInfo, error)
	// Signal asks for sig to be sent to the command's process group.
	Signal(sig syscall.Signal)
}

// RunRemote is Run for a command that start hands to another process:
// start gets the command's standard input (spec.Stdin when it is an
// *os.File, else /dev/null) and the write end of the output pipe, and
// must not keep them. Output capture, the ctx teardown sequence
// (SIGTERM, KillGrace, SIGKILL) and the Outcome are Run's; the group's
// teardown after the exit is the remote's (Done), so the Outcome's
// Teardown is confirmed when Result has no error. spec.Argv, Env and
// SysProcAttr are the caller's business (start knows the command). An
// error from start means nothing ran; an error after that comes with
// the Outcome collected so far.
func RunRemote(ctx context.Context, spec Spec, start func(stdin, output *os.File) (Remote, error)) (Outcome, error) {
	if err := ctx.Err(); err != nil {
		return Outcome{}, fmt.Errorf("proc: not started: %w", err)
	}
	limit, grace := spec.limits()
	stdin, ok := spec.Stdin.(*os.File)
	if !ok || stdin == nil {
		if spec.Stdin != nil {
			return Outcome{}, errors.New("proc: RunRemote takes only an *os.File as Stdin")
		}
		f, err := os.Open(os.DevNull)
		if err != nil {
			return Outcome{}, fmt.Errorf("proc: %w", err)
		}
		defer f.Close()
		stdin = f
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		return Outcome{}, fmt.Errorf("proc: %w", err)
	}
	begin := time.Now()
	r, err := start(stdin, pw)
	pw.Close() // the command holds the write end now; EOF comes when it and its group are gone
	if err != nil {
		pr.Close()
		return Outcome{}, err
	}
	c := startCapture(pr, limit)
	signals, cause := awaitOrStop(ctx, r.Done(), r.Signal, grace)
	duration := time.Since(begin)
	exit, rerr := r.Result()
	// The group is gone (or the process that ran it is), so EOF comes at
	// once unless a process that left it holds the pipe.
	c.drain()
	return c.outcome(cause, duration, TeardownResult{Confirmed: rerr == nil, Signals: signals}, exit, rerr != nil), rerr
}
