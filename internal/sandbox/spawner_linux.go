//go:build linux

package sandbox

import (
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"sync/atomic"
	"syscall"
)

// A spawner is the session server's confined thread: locked, confined as
// a command's spec asks (Landlock, seccomp, no_new_privs, the capability
// drop, the socket gate: all per thread, and inherited by what the thread
// forks), and kept to fork every later command whose spec asks for the
// same confinement. Setting a thread up costs more than the command's
// fork (a thread made and ended, a seccomp filter compiled, the gate's
// listener and goroutines started), and the specs of a session's
// commands rarely change.
//
// Reuse keeps each command's isolation (and is limited to specs whose
// confinement does not depend on when it is set up, spawnerKey): every command is forked from a
// thread confined exactly as its spec asks, and the server kills what a
// command left before it reports the exit, so a command never shares the
// thread's Landlock domain or the gate's listener with another one's
// processes. A command that asks for something else retires the spawner:
// its goroutine returns still locked, so its thread ends and takes the
// confinement with it.
type spawner struct {
	key  string
	reqs chan spawnReq
	quit chan struct{}
	// out is the running command's output, where the gate reports a
	// refused socket; nil between commands.
	out atomic.Pointer[os.File]
}

// spawnReq asks the spawner to fork one command.
type spawnReq struct {
	path string
	argv []string
	attr *syscall.ProcAttr
	res  chan<- startResult
}

// spawnerKey is what a spawner's confinement depends on: the spec but
// TmpDir, which only sets the command's environment. "" when a thread
// confined for spec cannot serve a later command: Landlock's rules are
// taken from the filesystem as it is when the thread is confined (around
// a protected path, its siblings are granted one by one), so only the
// lifetime-only spec (inside bubblewrap, with at most the socket gate,
// whose rules are paths compared at each call) is kept.
func spawnerKey(spec helperSpec) string {
	if !spec.Lifetime {
		return ""
	}
	spec.TmpDir = ""
	b, err := json.Marshal(spec)
	if err != nil {
		return ""
	}
	return string(b)
}

// startSpawner confines a new thread as spec says; the error says why it
// could not be, for a command named name.
func startSpawner(spec helperSpec, name string) (*spawner, error) {
	sp := &spawner{key: spawnerKey(spec), reqs: make(chan spawnReq), quit: make(chan struct{})}
	ready := make(chan error, 1)
	go sp.run(spec, name, ready)
	if err := <-ready; err != nil {
		return nil, err
	}
	return sp, nil
}

// run is the spawner's goroutine. Never unlocked: the thread ends with
// it, and its confinement with it; the commands' Pdeathsig is this
// thread's, and it lives until the server retires it or ends.
func (sp *spawner) run(spec helperSpec, name string, ready chan<- error) {
	runtime.LockOSThread()
	if !spec.Lifetime {
		if err := restrictSelf(spec); err != nil {
			ready <- fmt.Errorf("cannot confine %s: %w", name, err)
			return
		}
	} else if spec.Scope {
		if err := scopeSelf(); err != nil {
			ready <- fmt.Errorf("cannot scope %s: %w", name, err)
			return
		}
	}
	var (
		gate  *threadGate
		calls <-chan confinedCall
	)
	if spec.Gate != nil {
		g, err := installThreadGate(*spec.Gate)
		if err != nil {
			ready <- fmt.Errorf("cannot start the UNIX socket gate for %s: %w", name, err)
			return
		}
		gate, calls = g, g.calls()
		gate.start(sp.report)
		defer gate.stop()
	}
	ready <- nil
	for {
		select {
		case r := <-sp.reqs:
			pid, err := syscall.ForkExec(r.path, r.argv, r.attr)
			if err != nil {
				err = fmt.Errorf("exec %s: %w", r.path, err)
			}
			r.res <- startResult{pid: pid, err: err}
		case c := <-calls:
			gate.call(c)
		case <-sp.quit:
			return
		}
	}
}

// reusable reports whether the spawner may fork a later command.
func (sp *spawner) reusable() bool { return sp.key != "" }

// spawn forks a command from the spawner's thread, out being the
// command's output.
func (sp *spawner) spawn(path string, argv []string, attr *syscall.ProcAttr, out *os.File) (int, error) {
	sp.out.Store(out)
	res := make(chan startResult, 1)
	sp.reqs <- spawnReq{path: path, argv: argv, attr: attr, res: res}
	r := <-res
	if r.err != nil {
		sp.out.Store(nil)
	}
	return r.pid, r.err
}

// report writes a refused socket's line on the running command's output.
func (sp *spawner) report(p string) {
	if out := sp.out.Load(); out != nil {
		writeSocketDenied(out, p)
	}
}

// retire ends the spawner's thread.
func (sp *spawner) retire() { close(sp.quit) }
