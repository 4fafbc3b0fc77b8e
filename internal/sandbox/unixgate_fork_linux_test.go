//go:build linux && (amd64 || arm64 || riscv64 || loong64)

package sandbox

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// forkGated and gatedStart test the gate on its own, without the
// helper's supervisor: the command is forked from a new locked thread
// that confines itself and installs the gate, as the supervisor's
// startCommand does.

// gatedStart says how forkGated starts the command.
type gatedStart struct {
	path string
	argv []string
	env  []string
	dir  string
	// files are the child's descriptors 0, 1, 2…; nil is ours.
	files []uintptr
	// confine runs on the locked thread before the gate is installed
	// (the Landlock restrictions); nil for none.
	confine func() error
}

// forkGated starts the command from a new locked thread that confines
// itself, installs the gate and forks; seccomp filters and Landlock
// domains are per thread and inherited by the child. That thread then
// only serves confinedThread calls until the command has been reaped,
// and its goroutine ends while locked, so the runtime retires it: the
// command gets Pdeathsig from a thread that lives as long as it, and the
// threads that serve the gate stay outside its confinement.
func forkGated(s gatedStart) (gatedChild, error) {
	// Non-dumpable: a command of the same user cannot ptrace the helper
	// or open its /proc files (exec makes the command dumpable again).
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return gatedChild{}, fmt.Errorf("PR_SET_DUMPABLE: %w", err)
	}
	type started struct {
		pid, fd, tid int
		err          error
	}
	ch := make(chan started, 1)
	done := make(chan syscall.WaitStatus, 1)
	ct := &confinedThread{calls: make(chan confinedCall), gone: make(chan struct{})}
	reaped := make(chan struct{})
	gateRoutines.Go(func() {
		runtime.LockOSThread() // never unlocked: the thread dies with the goroutine
		defer close(ct.gone)
		fail := func(err error) { ch <- started{err: err} }
		if s.confine != nil {
			if err := s.confine(); err != nil {
				fail(err)
				return
			}
		}
		if err := dropCaps(); err != nil {
			fail(err)
			return
		}
		fd, err := installUnixGate()
		if err != nil {
			fail(err)
			return
		}
		files := s.files
		if files == nil {
			files = inheritedFiles()
		}
		pid, err := syscall.ForkExec(s.path, s.argv, &syscall.ProcAttr{
			Dir: s.dir, Env: s.env, Files: files,
			Sys: &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL},
		})
		if err != nil {
			unix.Close(fd)
			fail(fmt.Errorf("exec %s: %w", s.path, err))
			return
		}
		ch <- started{pid: pid, fd: fd, tid: unix.Gettid()}
		for {
			select {
			case c := <-ct.calls:
				r, _, e := unix.Syscall(c.nr, uintptr(c.fd), uintptr(c.p), c.n)
				c.res <- confinedResult{r, e}
			case <-reaped:
				return
			}
		}
	})
	r := <-ch
	if r.err != nil {
		return gatedChild{}, r.err
	}
	ct.tid = r.tid
	gateRoutines.Go(func() {
		// Any thread of the process may reap the child.
		var ws syscall.WaitStatus
		for {
			_, err := syscall.Wait4(r.pid, &ws, 0, nil)
			if !errors.Is(err, syscall.EINTR) {
				break
			}
		}
		close(reaped)
		done <- ws
	})
	return gatedChild{pid: r.pid, listener: r.fd, done: done, confined: ct}, nil
}

// inheritedFiles lists the descriptors the helper would have handed to
// the command by exec'ing it: 0, 1, 2 and every other one without
// FD_CLOEXEC (the runtime's own are all close-on-exec), in place.
func inheritedFiles() []uintptr {
	files := []uintptr{0, 1, 2}
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return files
	}
	for _, e := range entries {
		fd, err := strconv.Atoi(e.Name())
		if err != nil || fd < 3 {
			continue
		}
		flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0)
		if err != nil || flags&unix.FD_CLOEXEC != 0 {
			continue
		}
		for len(files) <= fd {
			files = append(files, ^uintptr(0)) // -1: closed in the child
		}
		files[fd] = uintptr(fd)
	}
	return files
}
