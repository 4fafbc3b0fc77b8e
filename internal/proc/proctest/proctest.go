// Package proctest has helpers for tests that run processes: waiting for
// an arbitrary (non-child) pid to exit without polling, and a FIFO that a
// child writes to so a test can react at a known point of the child's
// run instead of sleeping.
package proctest

import (
	"bufio"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// Alive reports whether pid is running right now (not exited, not a
// zombie).
func Alive(pid int) bool { return !WaitExit(pid, 0) }

// Fifo creates a named pipe in a temporary directory and returns its path
// and a channel of the lines written to it. The test keeps the read side
// open (O_RDWR, so the child's open for writing never blocks), and closes
// it at cleanup, which ends the channel.
func Fifo(t testing.TB) (string, <-chan string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Fatalf("mkfifo: %v", err)
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatalf("open fifo: %v", err)
	}
	lines := make(chan string, 16)
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer close(lines)
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	t.Cleanup(func() {
		f.Close() // unblocks the scanner: FIFOs use the poller
		<-done
	})
	return path, lines
}

// Pid parses a pid line written by a child, failing the test otherwise.
func Pid(t testing.TB, line string) int {
	t.Helper()
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil || pid <= 0 {
		t.Fatalf("bad pid line %q", line)
	}
	return pid
}
