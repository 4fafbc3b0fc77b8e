//go:build linux

package sandbox

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// runGated is the helper's path when its spec carries a gate: instead of
// exec'ing the command it starts it from a confined thread (Landlock
// restrictions unless GateOnly, where bubblewrap already confines) and
// stays to serve the gate until the command exits, then exits the same
// way. It returns only the exit code to use.
//
// The command shares the helper's process group and session, so the
// group signals that end a tool call reach it directly; the helper only
// catches them so that it outlives the command and reports its status.
func runGated(spec helperSpec, path string, argv, env []string) int {
	sigs := make(chan os.Signal, 1)
	// SIGPIPE too: a refusal written to a closed stderr must not kill
	// the helper (the write just fails).
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGPIPE)
	defer signal.Stop(sigs)
	go func() {
		for range sigs {
		}
	}()

	// Orphans of the command (double forks) are reparented here rather
	// than to init, so they stay this process's descendants: under Yama
	// ptrace_scope 1, pidfd_getfd on a non-descendant fails, and their
	// sockets could not be served.
	_ = unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
	start := gatedStart{path: path, argv: argv, env: env}
	if !spec.GateOnly {
		start.confine = func() error { return restrictSelf(spec) }
	}
	child, err := forkGated(start)
	if err != nil {
		fmt.Fprintf(os.Stderr, helperErrPrefix+"cannot confine %s: %v\n", argv[0], err)
		return helperExitSetup
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		// Not waited for at the end: a call blocked on its peer may hold
		// it up, and exiting ends it.
		err := serveUnixGate(ctx, child, *spec.Gate, func(p string) {
			if strings.ContainsAny(p, "\n\r") {
				p = strconv.Quote(p) // one line, whatever the command named
			}
			fmt.Fprintf(os.Stderr, "%s%s\n", SocketDeniedPrefix, p)
		})
		if err != nil {
			fmt.Fprintf(os.Stderr, helperErrPrefix+"%v\n", err)
		}
	}()
	ws := <-child.done
	if ws.Signaled() {
		// Die the same way, so the caller sees the signal; a signal the
		// runtime does not let kill us falls back to the shell's code.
		sig := ws.Signal()
		signal.Reset(sig)
		_ = syscall.Kill(os.Getpid(), sig)
		return 128 + int(sig)
	}
	return ws.ExitStatus()
}
