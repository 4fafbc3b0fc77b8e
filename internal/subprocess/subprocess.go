// Package subprocess runs one child process the way an agent tool needs
// it: in its own session and process group, with interleaved stdout and
// stderr captured into a bounded head-and-tail buffer, and with the whole
// group (grandchildren included) terminated on cancellation and cleaned up
// after the child exits.
//
// Linux only: it relies on Pdeathsig and waitid(2).
package subprocess

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"
	"unsafe"
)

// Defaults for zero Spec fields.
const (
	DefaultKillGrace   = 2 * time.Second
	DefaultOutputLimit = 1 << 20
)

// drainDelay bounds how long Run keeps reading output after the child
// exited and its process group was killed. Output still arriving then can
// only come from a process that left the group (setsid, double fork into
// another session); waiting for it would hang the call for as long as
// that process lives.
const drainDelay = 250 * time.Millisecond

// Spec describes one process to run.
type Spec struct {
	// Argv is the program and its arguments; Argv[0] is looked up in PATH.
	Argv []string
	// Dir is the working directory; "" is the current one.
	Dir string
	// Env is the environment; nil inherits this process's environment.
	Env []string
	// Stdin feeds standard input; nil is /dev/null.
	Stdin io.Reader
	// OutputLimit is how many bytes of combined output are kept (the
	// elision marker comes on top); <= 0 means DefaultOutputLimit.
	OutputLimit int
	// KillGrace is how long the group gets between SIGTERM and SIGKILL on
	// cancellation; <= 0 means DefaultKillGrace.
	KillGrace time.Duration
	// ProcAttr, when set, adjusts the child's SysProcAttr after Run has
	// filled it in (a sandbox's namespaces: sandbox.Confined.ProcAttr).
	ProcAttr func(*syscall.SysProcAttr)
}

// Outcome is how a run ended.
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
}

// Run starts spec.Argv and waits for it. The child gets its own session
// (and so its own process group with no controlling terminal); stdout and
// stderr share one pipe so their interleaving is preserved. When ctx ends
// first, the group gets SIGTERM, then SIGKILL after KillGrace, and Run
// still waits until the child is reaped. When the child exits, whatever it
// left running in its group is killed, so a backgrounded "sleep 100 &"
// neither survives nor holds the call open.
//
// The error is non-nil only when the process could not be started (bad
// argv, missing directory, ctx already done); every way a started process
// can end is described by the Outcome.
func Run(ctx context.Context, spec Spec) (Outcome, error) {
	if len(spec.Argv) == 0 || spec.Argv[0] == "" {
		return Outcome{}, errors.New("subprocess: empty argv")
	}
	if err := ctx.Err(); err != nil {
		return Outcome{}, fmt.Errorf("subprocess: not started: %w", err)
	}
	limit := spec.OutputLimit
	if limit <= 0 {
		limit = DefaultOutputLimit
	}
	grace := spec.KillGrace
	if grace <= 0 {
		grace = DefaultKillGrace
	}

	pr, pw, err := os.Pipe()
	if err != nil {
		return Outcome{}, fmt.Errorf("subprocess: %w", err)
	}
	cmd := exec.Command(spec.Argv[0], spec.Argv[1:]...)
	cmd.Dir = spec.Dir
	cmd.Env = spec.Env
	cmd.Stdin = spec.Stdin
	// Passing the *os.File makes exec hand the fd to the child directly:
	// no copying goroutine that Wait would block on.
	cmd.Stdout = pw
	cmd.Stderr = pw
	// Bounds Wait's wait for a non-file Stdin copier that is stuck
	// because a leftover process never reads.
	cmd.WaitDelay = drainDelay
	cmd.SysProcAttr = &syscall.SysProcAttr{
		// A new session rather than only a new process group: the child
		// has no controlling terminal, so programs that would prompt on
		// /dev/tty (ssh, git credentials, sudo) fail at once instead of
		// being stopped by SIGTTIN as a background group until the
		// timeout. The session leader's pid is also the group id.
		Setsid: true,
		// If dsh dies, the child dies with it. Only the direct child:
		// grandchildren need the group kill below.
		Pdeathsig: syscall.SIGKILL,
	}
	if spec.ProcAttr != nil {
		spec.ProcAttr(cmd.SysProcAttr)
	}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		pr.Close()
		pw.Close()
		return Outcome{}, fmt.Errorf("subprocess: start %s: %w", spec.Argv[0], err)
	}
	pw.Close() // the children hold the write end now; EOF comes when they all close it
	pgid := cmd.Process.Pid

	buf := newHeadTail(limit)
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		b := make([]byte, 32<<10)
		for {
			n, err := pr.Read(b)
			buf.Write(b[:n])
			if err != nil {
				return
			}
		}
	}()

	// The watcher signals the group when ctx ends. mu orders its kills
	// against the leader's reaping: once exited is set no more signals
	// are sent, because after reaping the group id may be reused.
	var (
		mu     sync.Mutex
		exited bool
		killed error // ctx.Err() when the watcher signalled the group
	)
	signal := func(sig syscall.Signal, cause error) {
		mu.Lock()
		defer mu.Unlock()
		if exited {
			return
		}
		if killed == nil {
			killed = cause
		}
		_ = syscall.Kill(-pgid, sig)
	}
	leaderGone := make(chan struct{})
	watcherDone := make(chan struct{})
	go func() {
		defer close(watcherDone)
		select {
		case <-leaderGone:
			return
		case <-ctx.Done():
		}
		signal(syscall.SIGTERM, ctx.Err())
		t := time.NewTimer(grace)
		defer t.Stop()
		select {
		case <-leaderGone:
		case <-t.C:
			signal(syscall.SIGKILL, ctx.Err())
		}
	}()

	// Wait for the leader to exit without reaping it: while it is a
	// zombie its pid, and so the group id, cannot be reused, which makes
	// the group kill below safe.
	waitExited(pgid)
	duration := time.Since(start)
	mu.Lock()
	exited = true
	// Kill what the leader left behind in its group. On the cancel path
	// this also cuts the grace short for members that ignored SIGTERM:
	// once the leader is gone nobody is left to clean them up.
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	cause := killed
	mu.Unlock()
	close(leaderGone)
	<-watcherDone

	waitErr := cmd.Wait()
	// Group members are dead and their pipe ends closed, so EOF comes
	// almost at once; the deadline only matters for escaped processes.
	_ = pr.SetReadDeadline(time.Now().Add(drainDelay))
	<-readDone
	pr.Close()

	out := Outcome{
		Output:     buf.Bytes(),
		Elided:     buf.elided(),
		TotalBytes: buf.total,
		Duration:   duration,
		TimedOut:   errors.Is(cause, context.DeadlineExceeded),
		Cancelled:  cause != nil && !errors.Is(cause, context.DeadlineExceeded),
	}
	if ps := cmd.ProcessState; ps != nil {
		out.ExitCode = ps.ExitCode()
		if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			out.Signaled = true
			out.ExitCode = 128 + int(ws.Signal())
		}
	} else if waitErr != nil {
		// Not reachable in practice: Wait always records the state of a
		// started process. Report it as a failure rather than success.
		out.ExitCode = -1
	}
	return out, nil
}

// waitExited blocks until pid has exited, leaving it unreaped
// (waitid(P_PID, pid, WEXITED|WNOWAIT)). Errors other than EINTR (such as
// ECHILD should something else reap it) return at once; the caller's Wait
// then reports the real state.
func waitExited(pid int) {
	const (
		pPID    = 1          // P_PID
		wExited = 0x4        // WEXITED
		wNoWait = 0x01000000 // WNOWAIT
	)
	// siginfo_t is 128 bytes on Linux; the kernel fills it, we ignore it.
	var info [128]byte
	for {
		_, _, errno := syscall.Syscall6(syscall.SYS_WAITID, pPID, uintptr(pid),
			uintptr(unsafe.Pointer(&info)), wExited|wNoWait, 0, 0)
		if errno != syscall.EINTR {
			return
		}
	}
}
