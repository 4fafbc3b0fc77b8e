//go:build linux

package sandbox

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// The helper is a per-command supervisor rather than a confine-and-exec
// shim: it stays alive next to the command so that nothing the command
// starts can outlive it, and so that a goroutine of the helper can serve
// the command while it runs (see startCommand).
//
// In a PID namespace (spec.NS != "") the helper is its pid 1: when it
// exits, the kernel kills everything left in the namespace, and it dies
// with the spawner through the Pdeathsig the spawner set (a signal from
// an ancestor namespace reaches a namespace init). Without one it is a
// child subreaper: orphans of the command are re-parented to it, and it
// kills them all (sweep) when the command exits, when the spawner dies
// (parentDeathSignal) or when a stop signal is not obeyed in time.

// parentDeathSignal is the helper's Pdeathsig without a namespace: a
// signal it handles, so that it can sweep its subtree before exiting.
const parentDeathSignal = syscall.SIGUSR1

// stopGrace is how long the command gets after a forwarded stop signal
// before the helper without a namespace sweeps it: shorter than the
// spawner's kill grace (proc.DefaultKillGrace, 2s), because the
// spawner's SIGKILL would end the helper before it could sweep the
// processes that left the command's group. In a namespace the spawner's
// SIGKILL is enough (the namespace dies with the helper).
const stopGrace = time.Second

// supervisable: the helper can supervise commands on this platform.
const supervisable = true

// maxSweeps bounds the kill rounds of a sweep: each round kills the
// helper's children, whose own children are then re-parented to it.
const maxSweeps = 10000

// forwarded are the signals the helper passes on to the command's
// process group.
var forwarded = []os.Signal{syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT}

// init keeps a helper's main goroutine on the main thread, where supervise
// must replace the parent-death signal the spawner left (see there).
// Package initialisation runs on the main thread, so this is the earliest
// and only reliable place to lock it.
func init() {
	if len(os.Args) > 1 && os.Args[1] == HelperArg {
		runtime.LockOSThread()
	}
}

// supervise runs argv under spec and returns the exit code for the
// helper: the command's, 128+signal when it was killed, or helperExit*
// when it could not be started (the error says why).
func supervise(spec helperSpec, path string, argv, env []string) (int, error) {
	// Nothing the helper holds may reach the command: not an inherited
	// fd, not its memory and environment through /proc (non-dumpable).
	if err := cloexecFrom(3); err != nil {
		return helperExitSetup, fmt.Errorf("close-on-exec: %w", err)
	}
	// A user namespace is entered in two steps (see startInner): this
	// outer helper, which stays outside, and an inner one, pid 1 inside.
	outer := nsMode(spec.NS) == nsUser && !spec.Inner
	inNS := spec.NS != "" && !outer
	if !outer {
		if err := nonDumpable(); err != nil {
			return helperExitSetup, err
		}
	}
	if inNS {
		if err := enterNamespace(spec.Parent); err != nil {
			return helperExitSetup, err
		}
	} else {
		if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
			return helperExitSetup, fmt.Errorf("subreaper: %w", err)
		}
		// The kernel keeps a parent-death signal per thread and sends
		// every one that is set. The spawner's (SIGKILL, kept across
		// exec) is on the thread that exec'd, the main thread, which
		// init locked this goroutine to: replacing it there is the only
		// way to be sure no SIGKILL pre-empts the sweep.
		if unix.Gettid() != os.Getpid() {
			return helperExitSetup, errors.New("the helper is not on its main thread; its parent-death signal cannot be replaced")
		}
		if err := unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(parentDeathSignal), 0, 0, 0); err != nil {
			return helperExitSetup, fmt.Errorf("pdeathsig: %w", err)
		}
	}
	// One channel per kind, so that a burst of one cannot crowd out
	// another: signal.Notify drops what does not fit. One pending
	// SIGCHLD is enough (each reaps every exited child), and so is one
	// parent death.
	chld, death, stop := make(chan os.Signal, 1), make(chan os.Signal, 1), make(chan os.Signal, 8)
	signal.Notify(chld, syscall.SIGCHLD)
	signal.Notify(death, parentDeathSignal)
	signal.Notify(stop, forwarded...)
	// A refusal written to a stderr nobody reads any more must not kill
	// the helper (the write just fails). A handler, unlike ignoring the
	// signal, is not inherited by the command.
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
	// Checked after the handler is in place: a spawner that died before
	// the Pdeathsig above could not signal it.
	if !inNS && spec.Parent > 0 && os.Getppid() != spec.Parent {
		return helperExitSetup, errors.New("the spawner exited before the command started")
	}

	if spec.Server && !outer {
		return serve(inNS || spec.SweepNS, chld, death, stop)
	}
	started := make(chan startResult, 1)
	if outer {
		go startInner(spec, argv, env, started)
	} else {
		go startCommand(spec, path, argv, env, started)
	}
	r := <-started
	if outer {
		if err := nonDumpable(); err != nil && r.err == nil {
			r.err = err
		}
	}
	if r.err != nil {
		code := helperExitSetup
		if errors.Is(r.err, errNotFound) {
			code = helperExitNotFound
		}
		sweep()
		return code, r.err
	}

	var stopTimer <-chan time.Time
	for {
		select {
		case <-chld:
			if status, done, none := reap(r.pid); done {
				// In a namespace its end would kill what is left too, but
				// what the kernel reaps then never reaches the helper's
				// own accounting: bubblewrap's monitor exits as soon as
				// its init reports the command's end, orphaning the init,
				// which holds the CPU time of everything it reaped.
				if !none {
					sweep()
				}
				return exitCode(status), nil
			}
		case <-death:
			// In a namespace the spawner's Pdeathsig is SIGKILL: nothing
			// to do here (a stray SIGUSR1 is ignored).
			if !inNS {
				sweep()
				return 128 + int(syscall.SIGKILL), nil
			}
		case s := <-stop:
			// The command runs in its own process group, so that the
			// spawner's group signal reaches it only through here, once.
			_ = syscall.Kill(-r.pid, s.(syscall.Signal))
			if !inNS && stopTimer == nil {
				stopTimer = time.After(stopGrace)
			}
		case <-stopTimer:
			sweep()
			// The sweep reaped the command too; its status is lost with
			// the reaping, but it was killed.
			return 128 + int(syscall.SIGKILL), nil
		}
	}
}

// startResult is the command's pid, or why it could not be started.
type startResult struct {
	pid int
	err error
}

var errNotFound = errors.New("command not found")

// startCommand confines the calling goroutine's thread (unless spec is
// lifetime-only) and starts the command from it: Landlock, seccomp,
// no_new_privs and capabilities are per thread and a forked child
// inherits those of the thread that forked it. The thread is never
// released: the command's Pdeathsig fires when the thread that forked it
// ends, and a confined thread must not run other goroutines.
//
// A supervisor goroutine that must serve the command (a listener created
// here on the confined thread, say) is started from here, after the
// fork, and lives as long as the helper.
func startCommand(spec helperSpec, path string, argv, env []string, started chan<- startResult) {
	runtime.LockOSThread()
	if !spec.Lifetime {
		if err := restrictSelf(spec); err != nil {
			started <- startResult{err: fmt.Errorf("cannot confine %s: %w", argv[0], err)}
			return
		}
	} else if spec.Inner {
		// Lifetime-only (bwrap) in a user namespace: the ambient
		// CAP_SYS_ADMIN was the helper's, for /proc; the command (bwrap
		// refuses capabilities it did not get from setuid) runs as the
		// caller would. Outside one, it keeps the caller's.
		if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil && !errors.Is(err, unix.EINVAL) {
			started <- startResult{err: fmt.Errorf("clear ambient capabilities: %w", err)}
			return
		}
	}
	if spec.Lifetime && spec.Scope {
		if err := scopeSelf(); err != nil {
			started <- startResult{err: fmt.Errorf("cannot scope %s: %w", argv[0], err)}
			return
		}
	}
	var gate *threadGate
	if spec.Gate != nil {
		// After the confinement: the gate's filter stacks on the
		// thread's, and the calls it runs on this thread for the command
		// are made inside the command's Landlock domain.
		g, err := installThreadGate(*spec.Gate)
		if err != nil {
			started <- startResult{err: fmt.Errorf("cannot start the UNIX socket gate for %s: %w", argv[0], err)}
			return
		}
		gate = g
	}
	wd, err := os.Getwd()
	if err != nil {
		wd = ""
	}
	// Its own group, so that signals are forwarded exactly once.
	sys := &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if spec.TTY {
		// A session of its own, still one group to forward to, with the
		// terminal on fd 0 as its controlling terminal: the line
		// discipline's ^C and TIOCSIG then reach its foreground job.
		sys = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0, Pdeathsig: syscall.SIGKILL}
	}
	pid, err := syscall.ForkExec(path, argv, &syscall.ProcAttr{
		Dir:   wd,
		Env:   env,
		Files: []uintptr{0, 1, 2},
		Sys:   sys,
	})
	if err != nil {
		if errors.Is(err, syscall.ENOENT) {
			err = fmt.Errorf("%w: %s: %v", errNotFound, path, err)
		}
		if gate != nil {
			gate.abort()
		}
		started <- startResult{err: fmt.Errorf("exec %s: %w", path, err)}
		return
	}
	started <- startResult{pid: pid}
	if gate != nil {
		gate.serve(reportSocketDenied) // keeps the thread too
	}
	select {} // keep the thread, and with it the command's Pdeathsig
}

// reportSocketDenied tells the command's stderr (the helper's) that the
// gate refused a socket, on one line whatever the command named.
func reportSocketDenied(p string) { writeSocketDenied(os.Stderr, p) }

// writeSocketDenied writes the line that reports a refused socket at p.
func writeSocketDenied(w io.Writer, p string) {
	if strings.ContainsAny(p, "\n\r") {
		p = strconv.Quote(p)
	}
	fmt.Fprintf(w, "%s%s\n", SocketDeniedPrefix, p)
}

// startInner starts the inner helper of a user namespace: this binary
// again, in a new user, PID and mount namespace mapping only the
// caller's ids. The spawner cannot create it directly: writing the
// child's uid_map needs the parent to be dumpable, and dsh is not
// (Harden). This outer helper is dumpable until the inner one runs; it
// then supervises it as it would a command without a namespace, and the
// inner one confines and runs the command as pid 1.
func startInner(spec helperSpec, argv, env []string, started chan<- startResult) {
	runtime.LockOSThread() // the inner helper's Pdeathsig is this thread's
	self, err := selfExecutable()
	if err != nil {
		started <- startResult{err: fmt.Errorf("find own executable: %w", err)}
		return
	}
	inner := spec
	inner.Inner, inner.Parent = true, os.Getpid()
	wd, err := os.Getwd()
	if err != nil {
		wd = ""
	}
	sys := &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	userNamespace(sys)
	pid, err := syscall.ForkExec(self, helperArgv(self, inner, argv), &syscall.ProcAttr{
		Dir: wd, Env: env, Files: []uintptr{0, 1, 2}, Sys: sys,
	})
	if err != nil {
		started <- startResult{err: fmt.Errorf("start in a user namespace: %w", err)}
		return
	}
	started <- startResult{pid: pid}
	select {}
}

// reap collects every exited child without blocking and reports the
// command's status once it is among them. none: the helper has no child
// left at all. A process's children are re-parented before it can be
// reaped, so every living descendant of the helper has an ancestor
// among its children: with none, a sweep has nothing to find.
func reap(cmd int) (status syscall.WaitStatus, found, none bool) {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil || pid <= 0 {
			return status, found, errors.Is(err, syscall.ECHILD)
		}
		if pid == cmd {
			status, found = ws, true
		}
	}
}

// exitCode turns a wait status into the shell's convention.
func exitCode(ws syscall.WaitStatus) int {
	if ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ws.ExitStatus()
}

// sweep kills everything below the helper: each round SIGKILLs the
// helper's children and reaps them, which re-parents their children to
// the helper (a subreaper), until none is left. Only children are
// signalled, and they are reaped in this goroutine only, so a pid cannot
// be reused between reading it and signalling it.
func sweep() {
	for range maxSweeps {
		kids := children()
		if len(kids) == 0 {
			return
		}
		for _, k := range kids {
			_ = syscall.Kill(k, syscall.SIGKILL)
		}
		for _, k := range kids {
			var ws syscall.WaitStatus
			for {
				_, err := syscall.Wait4(k, &ws, 0, nil)
				if !errors.Is(err, syscall.EINTR) {
					break
				}
			}
		}
	}
}

// children lists the helper's children, from every thread's children
// file (a re-parented orphan may hang below any thread), or by scanning
// /proc where that file is missing (CONFIG_PROC_CHILDREN off).
func children() []int {
	self := os.Getpid()
	tasks, err := os.ReadDir("/proc/self/task")
	var kids []int
	if err == nil {
		ok := true
		for _, t := range tasks {
			b, err := os.ReadFile("/proc/self/task/" + t.Name() + "/children")
			if err != nil {
				ok = false
				break
			}
			for f := range strings.FieldsSeq(string(b)) {
				if n, err := strconv.Atoi(f); err == nil {
					kids = append(kids, n)
				}
			}
		}
		if ok {
			return kids
		}
	}
	kids = kids[:0]
	procs, _ := os.ReadDir("/proc")
	for _, p := range procs {
		pid, err := strconv.Atoi(p.Name())
		if err != nil {
			continue
		}
		if ppid, err := parentOf(pid); err == nil && ppid == self {
			kids = append(kids, pid)
		}
	}
	return kids
}

// parentOf reads a process's parent pid from /proc/<pid>/stat, whose
// second field (the command name, in parentheses) may hold anything.
func parentOf(pid int) (int, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, errors.New("bad stat")
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 2 {
		return 0, errors.New("bad stat")
	}
	return strconv.Atoi(f[1])
}

// enterNamespace finishes the namespace the spawner created: the helper
// must be its pid 1; mounts stop propagating out of it and /proc is
// mounted afresh, so the command sees the namespace's processes only, not the
// host's (dsh, its ancestors, other sessions).
func enterNamespace(parent int) error {
	if os.Getpid() != 1 {
		return fmt.Errorf("expected to be pid 1 of a new PID namespace, am %d", os.Getpid())
	}
	// Go's post-Pdeathsig check cannot see a parent in another namespace
	// (getppid is 0), so the helper checks here, through the host /proc
	// still mounted, whether its parent is still the spawner. Pdeathsig
	// is already set, so a later death is signalled.
	if parent > 0 {
		ppid, err := parentOf(hostPID())
		if err != nil {
			return fmt.Errorf("check parent: %w", err)
		}
		if ppid != parent {
			return errors.New("the spawner exited before the command started")
		}
	}
	// Slave rather than private: mounts the host makes later still show
	// up inside, and none made inside (the /proc below) leaks out.
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_SLAVE, ""); err != nil {
		return fmt.Errorf("make mounts slave: %w", err)
	}
	if err := unix.Mount("proc", "/proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return fmt.Errorf("mount /proc: %w", err)
	}
	return nil
}

// hostPID is this process's pid as the still-mounted host /proc knows
// it (/proc/self resolves in the mount's namespace).
func hostPID() int {
	s, err := os.Readlink("/proc/self")
	if err != nil {
		return -1
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		return -1
	}
	return n
}
