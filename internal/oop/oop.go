// Package oop is the out-of-process kit: it runs a long-lived peer (an
// agent backend such as codex or an ACP server) as a child process that
// speaks a protocol over stdin/stdout, and guarantees that the child and
// everything it spawned are gone when the run is disposed, or when dsh
// itself dies.
//
// # Process layout
//
// Start creates a process group per child. Its first member is a guardian,
// a tiny "/bin/sh" script that ignores SIGTERM and blocks reading a pipe
// whose write end only dsh holds (close-on-exec, so no child inherits it).
// The real command is started as a second child of dsh, joining the
// guardian's group, with Pdeathsig SIGKILL. When dsh dies for any reason,
// SIGKILL included, the kernel closes the pipe, the guardian's read returns
// EOF and it runs "kill -KILL 0", killing the whole group: grandchildren
// that Pdeathsig cannot reach die too. A process that leaves the group
// (setsid, setpgid) escapes both the guardian and Teardown.
//
// The guardian is the group leader and dsh reaps it only after the group
// is confirmed empty, so the group id cannot be reused while dsh still
// signals it.
//
// # Teardown
//
// Teardown is one awaited sequence: SIGTERM to the group, a bounded wait
// (KillGrace) until every member other than the guardian is gone, SIGKILL
// to the group if any remain, then the guardian is released, and a final
// bounded wait until no member at all is left. Membership is read from
// /proc (zombies count as gone: reaping orphans is init's business). The
// result says whether cleanup was confirmed; Handle.Dispose turns an
// unconfirmed cleanup into an error.
//
// Linux only.
package oop

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Defaults for zero Spec fields and fixed bounds.
const (
	// DefaultStderrLimit is the stderr capture size when Spec.StderrLimit <= 0.
	DefaultStderrLimit = 64 << 10
	// DefaultKillGrace is the SIGTERM→SIGKILL grace when Spec.KillGrace <= 0.
	DefaultKillGrace = 2 * time.Second
	// KillWait bounds the wait for the group to vanish after SIGKILL.
	KillWait = 5 * time.Second
)

// guardianScript is the guardian's program; see the package comment.
const guardianScript = `trap '' TERM INT HUP; read _; kill -KILL 0`

// Spec describes one child process.
type Spec struct {
	// Argv is the program and its arguments; Argv[0] is looked up in dsh's
	// PATH.
	Argv []string
	// Dir is the child's working directory. Required: use ResolveDir; the
	// child never silently inherits dsh's own cwd.
	Dir string
	// Env is the child's environment policy.
	Env EnvPolicy
	// ControlChannel adds a second channel beside stdin/stdout: the child
	// reads fd 3 and writes fd 4 (see Process.Control).
	ControlChannel bool
	// StderrLimit is how many bytes of stderr are kept (head and tail);
	// <= 0 means DefaultStderrLimit.
	StderrLimit int
	// KillGrace is how long the group gets between SIGTERM and SIGKILL;
	// <= 0 means DefaultKillGrace.
	KillGrace time.Duration
}

// ExitInfo is how the command (not its group) ended.
type ExitInfo struct {
	// Code is the exit status, or 128+signal when killed by a signal.
	Code int
	// Signaled reports that the command was killed by a signal.
	Signaled bool
	// Signal is that signal, when Signaled.
	Signal syscall.Signal
}

// Process is a started child and its process group.
type Process struct {
	pid, pgid int
	grace     time.Duration

	cmd      *exec.Cmd
	guardian *exec.Cmd
	guardW   *os.File // the only write end of the guardian's pipe

	stdin  *os.File
	stdout *os.File
	ctlW   *os.File
	ctlR   *os.File

	stderr     *boundedBuf
	stderrR    *os.File
	stderrDone chan struct{}

	exited  chan struct{}
	exit    ExitInfo
	exitErr error

	stopCtx      func() bool
	teardownOnce sync.Once
	teardownDone chan struct{}
	result       TeardownResult
}

// Start starts spec.Argv in a new process group behind a guardian (see
// the package comment). When ctx ends before Teardown, Teardown starts by
// itself; ctx ending later has no effect. On error nothing is left
// running.
func Start(ctx context.Context, spec Spec) (*Process, error) {
	if len(spec.Argv) == 0 || spec.Argv[0] == "" {
		return nil, errors.New("oop: empty argv")
	}
	if spec.Dir == "" {
		return nil, errors.New("oop: no working directory for the child (use ResolveDir)")
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("oop: not started: %w", err)
	}
	env, err := spec.Env.Build(os.Environ())
	if err != nil {
		return nil, err
	}
	p := &Process{
		grace:        spec.KillGrace,
		stderr:       newBoundedBuf(spec.StderrLimit),
		stderrDone:   make(chan struct{}),
		exited:       make(chan struct{}),
		teardownDone: make(chan struct{}),
	}
	if p.grace <= 0 {
		p.grace = DefaultKillGrace
	}
	if spec.StderrLimit <= 0 {
		p.stderr = newBoundedBuf(DefaultStderrLimit)
	}

	// childEnds are closed in dsh once the command started (or failed to).
	var childEnds, parentEnds []*os.File
	closeAll := func(fs []*os.File) {
		for _, f := range fs {
			f.Close()
		}
	}
	pipe := func() (r, w *os.File) {
		if err != nil {
			return nil, nil
		}
		r, w, err = os.Pipe()
		return r, w
	}
	guardR, guardW := pipe()
	inR, inW := pipe()
	outR, outW := pipe()
	errR, errW := pipe()
	var ctl3R, ctl3W, ctl4R, ctl4W *os.File
	if spec.ControlChannel {
		ctl3R, ctl3W = pipe()
		ctl4R, ctl4W = pipe()
	}
	for _, f := range []*os.File{guardR, inR, outW, errW, ctl3R, ctl4W} {
		if f != nil {
			childEnds = append(childEnds, f)
		}
	}
	for _, f := range []*os.File{guardW, inW, outR, errR, ctl3W, ctl4R} {
		if f != nil {
			parentEnds = append(parentEnds, f)
		}
	}
	if err != nil {
		closeAll(childEnds)
		closeAll(parentEnds)
		return nil, fmt.Errorf("oop: %w", err)
	}

	// The guardian: no Pdeathsig (it must outlive dsh to do its job), its
	// own new group, cwd "/" so it pins no directory.
	g := exec.Command("/bin/sh", "-c", guardianScript)
	g.Dir = "/"
	g.Env = []string{}
	g.Stdin = guardR
	g.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := g.Start(); err != nil {
		closeAll(childEnds)
		closeAll(parentEnds)
		return nil, fmt.Errorf("oop: start guardian: %w", err)
	}
	p.guardian, p.guardW, p.pgid = g, guardW, g.Process.Pid

	cmd := exec.Command(spec.Argv[0], spec.Argv[1:]...)
	cmd.Dir = spec.Dir
	cmd.Env = env
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, errW
	if spec.ControlChannel {
		cmd.ExtraFiles = []*os.File{ctl3R, ctl4W}
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Setpgid:   true,
		Pgid:      p.pgid,
		Pdeathsig: syscall.SIGKILL,
	}
	err = cmd.Start()
	closeAll(childEnds)
	if err != nil {
		closeAll(parentEnds)
		_ = syscall.Kill(p.pgid, syscall.SIGKILL)
		_ = g.Wait()
		return nil, fmt.Errorf("oop: start %s: %w", spec.Argv[0], err)
	}
	p.cmd, p.pid = cmd, cmd.Process.Pid
	p.stdin, p.stdout, p.stderrR = inW, outR, errR
	p.ctlW, p.ctlR = ctl3W, ctl4R

	go func() {
		defer close(p.stderrDone)
		_, _ = io.Copy(p.stderr, errR)
	}()
	go func() {
		defer close(p.exited)
		p.exitErr = cmd.Wait()
		ps := cmd.ProcessState
		if ps == nil {
			return
		}
		p.exitErr = nil
		p.exit.Code = ps.ExitCode()
		if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			p.exit = ExitInfo{Code: 128 + int(ws.Signal()), Signaled: true, Signal: ws.Signal()}
		}
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
func (p *Process) Pid() int { return p.pid }

// Pgid is the process group id (the guardian's pid).
func (p *Process) Pgid() int { return p.pgid }

// Stdin is the write end of the command's standard input. Closing it sends
// EOF.
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
// line where bytes were dropped.
func (p *Process) Stderr() []byte { return p.stderr.Bytes() }

// Exited is closed when the command has exited and been reaped.
func (p *Process) Exited() <-chan struct{} { return p.exited }

// Wait waits for the command to exit and reports how. It does not wait
// for the rest of the group; Teardown must still be called. The error is
// non-nil only when the exit status could not be obtained.
func (p *Process) Wait() (ExitInfo, error) {
	<-p.exited
	return p.exit, p.exitErr
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
