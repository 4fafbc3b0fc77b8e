package proc

import (
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"
)

// StartTTY starts spec.Argv like Start, but with tty (a terminal: the
// slave side of a PTY the caller holds the master of) as its standard
// input, output and error instead of pipes. The process layout and the
// guarantees are Start's: its own session and process group, Pdeathsig,
// the guardian, Teardown. The kit never makes tty the controlling
// terminal (the command leads a session without one); a program that
// needs one acquires it itself (sandbox.ControllingTTY). The caller may
// close its tty once StartTTY returned: the child keeps its own copies,
// and the master reads EIO once every copy is closed. The Process's Stdin,
// Stdout and Control must not be used and Stderr is empty: everything
// goes through the terminal. On error nothing is left running.
func StartTTY(ctx context.Context, spec Spec, tty *os.File) (*Process, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("proc: not started: %w", err)
	}
	if tty == nil {
		return nil, errors.New("proc: StartTTY needs a terminal")
	}
	if spec.Stdin != nil || spec.ControlChannel {
		return nil, errors.New("proc: a terminal command is fed through its terminal (no Spec.Stdin, no control channel)")
	}
	p := &Process{
		grace:        spec.KillGrace,
		stderr:       newHeadTail(1),
		stderrDone:   make(chan struct{}),
		teardownDone: make(chan struct{}),
	}
	close(p.stderrDone) // no stderr pipe to drain
	if p.grace <= 0 {
		p.grace = DefaultKillGrace
	}
	g, err := spawn(spec, tty, tty, tty, nil)
	if err != nil {
		return nil, err
	}
	p.g = g
	ready := make(chan struct{})
	p.stopCtx = context.AfterFunc(ctx, func() {
		<-ready
		p.Teardown(context.Background())
	})
	close(ready)
	return p, nil
}

// Signal sends sig to the command's process group, unless the command
// was already reaped.
func (p *Process) Signal(sig syscall.Signal) error {
	p.g.mu.Lock()
	defer p.g.mu.Unlock()
	if p.g.reaped {
		return errors.New("proc: the command has been reaped")
	}
	return syscall.Kill(-p.g.pid, sig)
}
