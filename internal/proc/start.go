package proc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"
)

// Process is a long-lived child started by Start, and its process group.
type Process struct {
	g     *group
	grace time.Duration

	stdin  *os.File
	stdout *os.File
	ctlW   *os.File
	ctlR   *os.File

	stderr       *headTail
	stderrR      *os.File
	stderrDone   chan struct{}
	stderrSettle sync.Once // the wait for stderr's drain after exit

	stopCtx      func() bool
	teardownOnce sync.Once
	teardownDone chan struct{}
	result       TeardownResult
}

// Start starts spec.Argv as a peer that talks over pipes: Stdin, Stdout,
// optionally Control, with stderr kept in a bounded buffer (see the
// package comment for the process layout). When ctx ends before Teardown,
// Teardown starts by itself; ctx ending later has no effect. On error
// nothing is left running.
func Start(ctx context.Context, spec Spec) (*Process, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("proc: not started: %w", err)
	}
	// A socket (or any file) may be the child's stdin instead of a pipe:
	// a peer that passes descriptors over it.
	stdinFile, _ := spec.Stdin.(*os.File)
	if spec.Stdin != nil && stdinFile == nil {
		return nil, errors.New("proc: Start takes only an *os.File as Spec.Stdin; a started process is otherwise fed through Process.Stdin")
	}
	limit := spec.StderrLimit
	if limit <= 0 {
		limit = DefaultStderrLimit
	}
	p := &Process{
		grace:        spec.KillGrace,
		stderr:       newHeadTail(limit),
		stderrDone:   make(chan struct{}),
		teardownDone: make(chan struct{}),
	}
	if p.grace <= 0 {
		p.grace = DefaultKillGrace
	}

	// childEnds are closed in dsh once the command started (or failed to).
	var childEnds, parentEnds []*os.File
	var err error
	pipe := func() (r, w *os.File) {
		if err != nil {
			return nil, nil
		}
		r, w, err = os.Pipe()
		return r, w
	}
	var inR, inW *os.File
	if stdinFile == nil {
		inR, inW = pipe()
	}
	outR, outW := pipe()
	errR, errW := pipe()
	var ctl3R, ctl3W, ctl4R, ctl4W *os.File
	if spec.ControlChannel {
		ctl3R, ctl3W = pipe()
		ctl4R, ctl4W = pipe()
	}
	for _, f := range []*os.File{inR, outW, errW, ctl3R, ctl4W} {
		if f != nil {
			childEnds = append(childEnds, f)
		}
	}
	for _, f := range []*os.File{inW, outR, errR, ctl3W, ctl4R} {
		if f != nil {
			parentEnds = append(parentEnds, f)
		}
	}
	closeAll := func(fs []*os.File) {
		for _, f := range fs {
			f.Close()
		}
	}
	if err != nil {
		closeAll(childEnds)
		closeAll(parentEnds)
		return nil, fmt.Errorf("proc: %w", err)
	}
	var extra []*os.File
	if spec.ControlChannel {
		extra = []*os.File{ctl3R, ctl4W}
	}
	var stdin io.Reader = inR
	if stdinFile != nil {
		stdin = stdinFile
	}
	g, err := spawn(spec, stdin, outW, errW, extra)
	closeAll(childEnds)
	if err != nil {
		closeAll(parentEnds)
		return nil, err
	}
	p.g = g
	p.stdin, p.stdout, p.stderrR = inW, outR, errR
	p.ctlW, p.ctlR = ctl3W, ctl4R

	go func() {
		defer close(p.stderrDone)
		_, _ = io.Copy(p.stderr, errR)
	}()
	// ready orders the stopCtx assignment before a teardown the callback
	// may start at once (ctx already done).
	ready := make(chan struct{})
	p.stopCtx = context.AfterFunc(ctx, func() {
		<-ready
		p.Teardown(context.Background())
	})
	close(ready)
	return p, nil
}

// Pid is the command's process id.
func (p *Process) Pid() int { return p.g.pid }

// Pgid is the process group id, the command's pid: it leads its own
// session and group.
func (p *Process) Pgid() int { return p.g.pid }

// Stdin is the write end of the command's standard input. Closing it sends
// EOF. It is a nil *os.File when Spec.Stdin gave the child its stdin.
func (p *Process) Stdin() io.WriteCloser { return p.stdin }

// Stdout is the read end of the command's standard output. Teardown closes
// it, which ends a pending Read.
func (p *Process) Stdout() io.Reader { return p.stdout }

// Control returns dsh's ends of the control channel: the writer feeds the
// child's fd 3, the reader reads the child's fd 4. Both are nil unless
// Spec.ControlChannel was set. Closing the writer sends EOF.
func (p *Process) Control() (io.WriteCloser, io.Reader) {
	if p.ctlW == nil {
		return nil, nil
	}
	return p.ctlW, p.ctlR
}

// Stderr returns the stderr captured so far: head and tail, with a marker
// line where bytes were dropped. Once the command has exited it includes
// everything the command wrote: the first call after the exit waits for
// the pipe to drain (EOF, immediate unless a descendant still holds the
// pipe, and then bounded by drainDelay).
func (p *Process) Stderr() []byte {
	select {
	case <-p.g.exited:
		p.stderrSettle.Do(func() {
			t := time.NewTimer(drainDelay)
			defer t.Stop()
			select {
			case <-p.stderrDone:
			case <-t.C:
			}
		})
	default:
	}
	return p.stderr.Bytes()
}

// Exited is closed when the command has exited (the rest of its group
// may live on until Teardown).
func (p *Process) Exited() <-chan struct{} { return p.g.exited }

// Wait waits for the command to exit and reports how. It does not wait
// for the rest of the group; Teardown must still be called. The error is
// non-nil only when the exit status could not be obtained.
func (p *Process) Wait() (ExitInfo, error) {
	<-p.g.exited
	return p.g.exit, p.g.exitErr
}

// StderrTail returns the last n bytes of the kept stderr, trimmed, with
// "…" in front when it was cut (never splitting a UTF-8 sequence); "" when
// the child wrote nothing. Diagnostics quote it.
func (p *Process) StderrTail(n int) string {
	s := strings.TrimSpace(string(p.Stderr()))
	if len(s) <= n {
		return s
	}
	cut := len(s) - n
	for cut < len(s) && s[cut]&0xC0 == 0x80 {
		cut++
	}
	return "…" + s[cut:]
}
