// Package proc is dsh's one process kit. Every child dsh runs (the bash
// tool's commands, foreground and background, rg, and long-lived external
// agents such as codex or an ACP server) is started here, with the same
// guarantees: the child and everything it spawned are gone when the run
// ends or is torn down, and when dsh itself dies, SIGKILL included.
//
// Two entry points share one implementation: Run runs a command to
// completion and captures its combined output (bounded, head and tail);
// Start starts a long-lived peer that speaks a protocol over stdin/stdout
// (and optionally a control channel), capturing bounded stderr, and hands
// back a Process whose Teardown ends the group.
//
// # Process layout
//
// The command runs as a session leader (setsid): its pid is its process
// group id, and it has no controlling terminal, so a program that would
// prompt on /dev/tty (ssh, git credentials, sudo) fails at once instead of
// being stopped as a background job. It has Pdeathsig SIGKILL.
//
// Beside it runs dsh's guardian, one tiny "/bin/sh" script shared by all
// groups, in a session of its own, ignoring SIGTERM, SIGINT and SIGHUP.
// dsh tells it each group's id as the group starts and again as it is
// released, on a pipe whose write end only dsh holds (close-on-exec, so
// no child inherits it). When dsh dies for any reason the kernel closes
// the pipe, the guardian's read returns EOF, and it runs
// "kill -KILL -<pgid>" for every group it still holds: grandchildren that
// Pdeathsig cannot reach die too, even after the command itself has
// exited, because a process group outlives its leader while any member
// remains (and its id cannot be reused meanwhile). Should the guardian
// itself be killed, the next start brings up a new one and hands it every
// live group. The command starts as a two-line shell gate that execs the
// program only once the guardian knows the group, so nothing it spawns
// can slip out before the guardian is armed. A process that leaves the
// group (setsid, setpgid) escapes both the guardian and teardown; Run
// still returns promptly (see drainDelay).
//
// While dsh lives, it learns of the command's exit without reaping it
// (waitid WNOWAIT), and reaps it only once the group is confirmed empty
// and released from the guardian: until then the zombie keeps the group
// id from being reused under dsh's or the guardian's signals.
//
// # Teardown
//
// Ending a group is one awaited sequence: SIGTERM to the group, a bounded
// wait (KillGrace) until every member is gone, SIGKILL to the group if any
// remain, then a final bounded wait (KillWait) until none is left.
// Membership is read from /proc (zombies count as gone: reaping orphans is
// init's business). The TeardownResult says whether cleanup was
// confirmed; Handle.Dispose turns an unconfirmed cleanup into an error.
//
// Written for Linux: it relies on setsid, Pdeathsig, waitid(2) and /proc.
// It also builds for macOS (proc_darwin.go), where there is no parent-death
// signal (the guardian alone ends groups when dsh dies) and membership is
// read from the kernel's process table (sysctl kern.proc.pgrp) instead of
// /proc; that port is compiled and vetted but not tested on a Mac.
package proc

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unsafe"
)

// Defaults for zero Spec fields, and fixed bounds.
const (
	// DefaultKillGrace is the SIGTERM→SIGKILL grace when Spec.KillGrace <= 0.
	DefaultKillGrace = 2 * time.Second
	// DefaultOutputLimit is Run's output capture size when
	// Spec.OutputLimit <= 0.
	DefaultOutputLimit = 1 << 20
	// DefaultStderrLimit is Start's stderr capture size when
	// Spec.StderrLimit <= 0.
	DefaultStderrLimit = 64 << 10
	// KillWait bounds the wait for the group to vanish after SIGKILL.
	KillWait = 5 * time.Second
)

// drainDelay bounds how long output is still read after the group is
// gone. Output arriving then can only come from a process that left the
// group (setsid, double fork into another session); waiting for it would
// hang the caller for as long as that process lives.
const drainDelay = 250 * time.Millisecond

// Spec describes one child process. Fields marked Run or Start apply only
// to that entry point.
type Spec struct {
	// Argv is the program and its arguments; Argv[0] is looked up in dsh's
	// PATH.
	Argv []string
	// Dir is the child's working directory. Required: the child never
	// silently inherits dsh's own cwd (ResolveDir picks one for peers).
	Dir string
	// Env is the child's environment policy; the zero value gives only the
	// BaseEnv variables.
	Env EnvPolicy
	// Stdin feeds standard input; nil is /dev/null. For Start it may only
	// be an *os.File (a socket to a peer that passes descriptors), which
	// the child reads directly instead of Process.Stdin's pipe.
	Stdin io.Reader
	// OutputLimit is how many bytes of combined output Run keeps (head and
	// tail; the elision marker comes on top); <= 0 means
	// DefaultOutputLimit. Run only.
	OutputLimit int
	// ControlChannel adds a second channel beside stdin/stdout: the child
	// reads fd 3 and writes fd 4 (see Process.Control). Start only.
	ControlChannel bool
	// StderrLimit is how many bytes of stderr Start keeps (head and tail);
	// <= 0 means DefaultStderrLimit. Start only.
	StderrLimit int
	// KillGrace is how long the group gets between SIGTERM and SIGKILL;
	// <= 0 means DefaultKillGrace.
	KillGrace time.Duration
	// SysProcAttr, when set, adjusts the command's attributes before it
	// starts: a sandbox adds Cloneflags (CLONE_NEWPID, CLONE_NEWUSER),
	// UidMappings, GidMappings and the like here. The kit's own guarantees
	// are re-applied afterwards and cannot be turned off: Setsid and
	// Pdeathsig SIGKILL are set, Setpgid, Setctty and Foreground cleared.
	SysProcAttr func(*syscall.SysProcAttr)
}

// ExitInfo is how the command (not its group) ended.
type ExitInfo struct {
	// Code is the exit status, or 128+signal when killed by a signal (the
	// shell convention, which models know).
	Code int
	// Signaled reports that the command was killed by a signal.
	Signaled bool
	// Signal is that signal, when Signaled.
	Signal syscall.Signal
}

// group is one started command in its own session and process group,
// registered with the guardian.
type group struct {
	cmd   *exec.Cmd
	pid   int // the command's pid, also its session and group id
	start time.Time

	// mu orders signals against the reaping of the command: once reaped
	// is set no signal is sent, since the group id may then be reused.
	mu     sync.Mutex
	reaped bool

	exited   chan struct{} // closed once the command has exited (unreaped)
	exit     ExitInfo
	exitErr  error
	duration time.Duration
}

// spawn validates spec, starts the command and registers its group with
// the guardian. extra become the command's fds 3 and up. On error nothing
// is left running.
func spawn(spec Spec, stdin io.Reader, stdout, stderr io.Writer, extra []*os.File) (*group, error) {
	if len(spec.Argv) == 0 || spec.Argv[0] == "" {
		return nil, errors.New("proc: empty argv")
	}
	if spec.Dir == "" {
		return nil, errors.New("proc: no working directory for the child")
	}
	env, err := spec.Env.Build(os.Environ())
	if err != nil {
		return nil, err
	}
	// The command waits at a gate until the guardian knows its group: a
	// child it spawned before that would escape the guardian should dsh
	// die in between. The gate is a shell that reads a pipe, closes it,
	// and execs the program, so the pid (and group) stay the program's.
	// A bare name is looked up in dsh's PATH, a name with a slash taken
	// relative to Dir, as os/exec does; checking here makes a missing
	// program an error from spawn rather than the gate's exit 127.
	path := spec.Argv[0]
	check := path
	if strings.Contains(path, "/") && !filepath.IsAbs(path) {
		check = filepath.Join(spec.Dir, path)
	}
	if check, err = exec.LookPath(check); err != nil {
		return nil, fmt.Errorf("proc: start %s: %w", spec.Argv[0], err)
	}
	if !strings.Contains(path, "/") {
		path = check
	}
	gateR, gateW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("proc: %w", err)
	}
	gateFd := strconv.Itoa(3 + len(extra))
	cmd := exec.Command("/bin/sh", append([]string{"-c",
		`read _ <&` + gateFd + ` || exit 126; exec ` + gateFd + `<&-; exec "$@"`,
		spec.Argv[0], path}, spec.Argv[1:]...)...)
	cmd.Dir = spec.Dir
	cmd.Env = env
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, stdout, stderr
	cmd.ExtraFiles = append(append([]*os.File(nil), extra...), gateR)
	// Bounds Wait's wait for a non-file Stdin copier stuck because a
	// leftover process never reads.
	cmd.WaitDelay = drainDelay
	attr := &syscall.SysProcAttr{}
	if spec.SysProcAttr != nil {
		spec.SysProcAttr(attr)
	}
	attr.Setsid = true
	attr.Setpgid, attr.Pgid = false, 0
	attr.Setctty, attr.Foreground = false, false
	// If dsh dies, the command dies with it (where the platform has a
	// parent-death signal); its descendants are the guardian's business.
	setPdeathsig(attr)
	cmd.SysProcAttr = attr
	g := &group{cmd: cmd, exited: make(chan struct{})}
	g.start = time.Now()
	err = startCmd(cmd)
	gateR.Close()
	if err != nil {
		gateW.Close()
		return nil, fmt.Errorf("proc: start %s: %w", spec.Argv[0], err)
	}
	g.pid = cmd.Process.Pid
	if err := theGuardian.add(g.pid); err != nil {
		// Without a guardian the guarantee is gone: do not run at all.
		gateW.Close() // EOF: the gate exits without running the program
		_ = syscall.Kill(-g.pid, syscall.SIGKILL)
		_ = cmd.Wait()
		return nil, err
	}
	_, err = gateW.Write([]byte("\n"))
	gateW.Close()
	if err != nil {
		_ = syscall.Kill(-g.pid, syscall.SIGKILL)
		theGuardian.remove(g.pid)
		_ = cmd.Wait()
		return nil, fmt.Errorf("proc: open gate: %w", err)
	}
	go g.watchExit()
	return g, nil
}

// watchExit waits for the command to exit, without reaping it, and
// records how it ended.
func (g *group) watchExit() {
	defer close(g.exited)
	code, status, err := waitExited(g.pid)
	g.duration = time.Since(g.start)
	switch {
	case err != nil:
		g.exitErr = fmt.Errorf("proc: wait for %d: %w", g.pid, err)
	case code == cldExited:
		g.exit = ExitInfo{Code: status}
	default: // killed or dumped core
		sig := syscall.Signal(status)
		g.exit = ExitInfo{Code: 128 + status, Signaled: true, Signal: sig}
	}
}

// signal sends sig to the group unless the command was already reaped.
func (g *group) signal(sig syscall.Signal) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.reaped {
		_ = syscall.Kill(-g.pid, sig)
	}
}

// members lists the live pids in the group.
func (g *group) members() []int { return groupMembers(g.pid) }

// terminate runs the teardown signals: SIGTERM when any member is alive,
// SIGKILL once grace has passed with members left (or at once when grace
// is 0), and a bounded wait until none is left. It returns the
// unreleased result; release must follow.
func (g *group) terminate(grace time.Duration) TeardownResult {
	var res TeardownResult
	if len(g.members()) == 0 {
		// The common case after a normal exit: one scan of /proc, no
		// signal, nothing to wait for.
		res.Confirmed = true
		return res
	}
	if grace > 0 {
		g.signal(syscall.SIGTERM)
		res.Signals = append(res.Signals, "SIGTERM")
	}
	if grace == 0 || !waitEmpty(g.members, grace) {
		g.signal(syscall.SIGKILL)
		res.Signals = append(res.Signals, "SIGKILL")
	}
	if waitEmpty(g.members, KillWait) {
		res.Confirmed = true
	} else {
		res.Remaining = g.members()
	}
	return res
}

// release unregisters the group from the guardian and reaps the command.
// The guardian forgets the group first so that it never signals a group
// id that reaping may free. When the group is not confirmed gone, the
// command may not have exited either; it is reaped in the background so
// that the caller is not held.
func (g *group) release(confirmed bool) {
	theGuardian.remove(g.pid)
	g.mu.Lock()
	g.reaped = true
	g.mu.Unlock()
	if !confirmed {
		go func() { _ = g.cmd.Wait() }()
		return
	}
	// With the group gone the command has exited.
	<-g.exited
	_ = g.cmd.Wait()
}

// Values of siginfo_t.si_code for SIGCHLD.
const cldExited = 1 // CLD_EXITED; CLD_KILLED and CLD_DUMPED carry a signal

// waitExited blocks until pid has exited, leaving it unreaped
// (waitid(P_PID, pid, WEXITED|WNOWAIT)), and returns siginfo's si_code
// and si_status.
func waitExited(pid int) (code, status int, err error) {
	const (
		pPID    = 1   // P_PID
		wExited = 0x4 // WEXITED
	)
	// siginfo_t is at most 128 bytes; si_signo, si_errno, si_code are
	// three int32, and where si_status lies is the platform's business
	// (siginfoStatus).
	var info [128]byte
	for {
		_, _, errno := syscall.Syscall6(syscall.SYS_WAITID, pPID, uintptr(pid),
			uintptr(unsafe.Pointer(&info)), wExited|waitNoWait, 0, 0)
		if errno == syscall.EINTR {
			continue
		}
		if errno != 0 {
			return 0, 0, errno
		}
		break
	}
	code = int(int32(binary.NativeEndian.Uint32(info[8:])))
	status = int(int32(binary.NativeEndian.Uint32(info[siginfoStatus():])))
	return code, status, nil
}
