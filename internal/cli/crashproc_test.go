//go:build linux

package cli_test

// Process plumbing for the crash test (crash_test.go): a subreaper
// wrapper around dsh, so that every process the killed run started stays
// findable after dsh is gone, and the scan that finds survivors.

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/dsh-dev/dsh/internal/proc/proctest"
)

// reaperEnv makes the test binary act as the subreaper wrapper (see
// reaperMain) instead of running tests.
const reaperEnv = "DSH_CRASH_REAPER"

func init() {
	if os.Getenv(reaperEnv) == "1" {
		os.Exit(reaperMain())
	}
}

// reaperMain runs os.Args[1:] (dsh) in its own process group as a child
// of a process that is a child subreaper (PR_SET_CHILD_SUBREAPER). A
// process orphaned anywhere below it (double fork, setsid, the death of
// dsh) is re-parented to the wrapper rather than to init, so the
// wrapper's descendants are exactly what the run started and is still
// alive, whatever the process did to hide. It reports "pid N" and then
// "exit STATUS" for dsh on fd 3, reaps everything else, and when its
// stdin closes kills whatever is left below it and exits.
func reaperMain() int {
	// fd 3 came without close-on-exec; dsh must not inherit it (nor
	// could the test see the wrapper's end of it otherwise).
	syscall.CloseOnExec(3)
	ctl := os.NewFile(3, "ctl")
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		fmt.Fprintf(ctl, "error subreaper: %v\n", err)
		return 1
	}
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		fmt.Fprintf(ctl, "error %v\n", err)
		return 1
	}
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, reaperEnv+"=") {
			env = append(env, kv)
		}
	}
	p, err := os.StartProcess(os.Args[1], os.Args[1:], &os.ProcAttr{
		Env:   env,
		Files: []*os.File{devnull, os.Stdout, os.Stderr},
		Sys:   &syscall.SysProcAttr{Setpgid: true},
	})
	if err != nil {
		fmt.Fprintf(ctl, "error start: %v\n", err)
		return 1
	}
	devnull.Close()
	os.Stdout.Close() // dsh's stdout ends when dsh and whatever inherited it end
	fmt.Fprintf(ctl, "pid %d\n", p.Pid)
	go func() {
		for {
			var ws syscall.WaitStatus
			pid, err := syscall.Wait4(-1, &ws, 0, nil)
			if err == syscall.EINTR {
				continue
			}
			if err != nil {
				return // ECHILD: nothing below us, and nothing can arrive
			}
			if pid == p.Pid {
				fmt.Fprintf(ctl, "exit %s\n", waitText(ws))
			}
		}
	}()
	_, _ = io.Copy(io.Discard, os.Stdin)
	for range 100 {
		left := descendants(readProcs(), os.Getpid())
		if len(left) == 0 {
			break
		}
		for _, pr := range left {
			_ = syscall.Kill(pr.pid, syscall.SIGKILL)
		}
		for _, pr := range left {
			proctest.WaitExit(pr.pid, time.Second)
		}
	}
	return 0
}

func waitText(ws syscall.WaitStatus) string {
	if ws.Signaled() {
		return "signal " + ws.Signal().String()
	}
	return "code " + strconv.Itoa(ws.ExitStatus())
}

// proc is one process as /proc describes it.
type proc struct {
	pid, ppid, pgid int
	state           byte
}

// readProcs reads pid, parent, group and state of every process.
func readProcs() map[int]proc {
	out := map[int]proc{}
	ents, _ := os.ReadDir("/proc")
	for _, en := range ents {
		pid, err := strconv.Atoi(en.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", en.Name(), "stat"))
		if err != nil {
			continue // gone meanwhile
		}
		// "pid (comm) state ppid pgrp ...": comm may hold anything, so
		// parse after the last ')'.
		i := bytes.LastIndexByte(b, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(b[i+1:]))
		if len(f) < 3 {
			continue
		}
		ppid, _ := strconv.Atoi(f[1])
		pgid, _ := strconv.Atoi(f[2])
		out[pid] = proc{pid: pid, ppid: ppid, pgid: pgid, state: f[0][0]}
	}
	return out
}

// live reports whether the process is running (not a zombie, not dead).
func (p proc) live() bool { return p.state != 'Z' && p.state != 'X' }

// descendants returns the live processes below root.
func descendants(procs map[int]proc, root int) []proc {
	kids := map[int][]int{}
	for _, p := range procs {
		kids[p.ppid] = append(kids[p.ppid], p.pid)
	}
	var out []proc
	queue := slices.Clone(kids[root])
	for len(queue) > 0 {
		pid := queue[0]
		queue = queue[1:]
		if p := procs[pid]; p.live() {
			out = append(out, p)
		}
		queue = append(queue, kids[pid]...)
	}
	return out
}

// survivors returns the live processes of a run: everything below the
// wrapper, everything in dsh's process group, and every process whose
// environment carries the run's marker (which each scripted command
// exports, so its children inherit it even inside a PID namespace).
func survivors(wrapper, dshPid int, marker string) []proc {
	procs := readProcs()
	seen := map[int]bool{}
	var out []proc
	add := func(p proc) {
		if !seen[p.pid] && p.live() && p.pid != wrapper {
			seen[p.pid] = true
			out = append(out, p)
		}
	}
	for _, p := range descendants(procs, wrapper) {
		add(p)
	}
	for _, p := range procs {
		if p.pgid == dshPid {
			add(p)
		}
	}
	needle := []byte(marker)
	for _, p := range procs {
		if seen[p.pid] || !p.live() {
			continue
		}
		if env, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(p.pid), "environ")); err == nil && bytes.Contains(env, needle) {
			add(p)
		}
	}
	return out
}

// awaitNoSurvivors waits until the run has no live process left, or the
// deadline passes, and returns what is still alive then. It blocks on
// each survivor's pidfd rather than sleeping, and rescans afterwards
// because a survivor may have started another process meanwhile.
func awaitNoSurvivors(wrapper, dshPid int, marker string, deadline time.Time) []proc {
	for {
		left := survivors(wrapper, dshPid, marker)
		if len(left) == 0 || time.Now().After(deadline) {
			return left
		}
		for _, p := range left {
			proctest.WaitExit(p.pid, time.Until(deadline))
		}
	}
}

// describe names processes for a failure message: pid, parent, group
// and command line.
func describe(ps []proc) string {
	var b strings.Builder
	for _, p := range ps {
		cmd, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(p.pid), "cmdline"))
		fmt.Fprintf(&b, "\n\tpid %d ppid %d pgid %d %c: %s", p.pid, p.ppid, p.pgid, p.state,
			strings.TrimSpace(string(bytes.ReplaceAll(cmd, []byte{0}, []byte{' '}))))
	}
	return b.String()
}

// killAll SIGKILLs the given processes (cleanup after a failed check).
func killAll(ps []proc) {
	for _, p := range ps {
		_ = syscall.Kill(p.pid, syscall.SIGKILL)
	}
	for _, p := range ps {
		proctest.WaitExit(p.pid, 5*time.Second)
	}
}

// markerFifo creates a named pipe at path and returns a channel of the
// lines written to it. The read side is opened O_RDWR, so a writer's
// open never blocks; close stops the reader.
func markerFifo(path string) (<-chan string, func(), error) {
	if err := syscall.Mkfifo(path, 0o666); err != nil {
		return nil, nil, fmt.Errorf("mkfifo: %w", err)
	}
	// mkfifo honours the umask; commands of a sandboxed run write here.
	if err := os.Chmod(path, 0o666); err != nil {
		return nil, nil, err
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, nil, err
	}
	lines := make(chan string, 64)
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer close(lines)
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			default: // nobody listens any more; keep draining the pipe
			}
		}
	}()
	return lines, func() { f.Close(); <-done }, nil
}

// wrapped is a dsh run under the subreaper wrapper.
type wrapped struct {
	cmd    *exec.Cmd
	pid    int // the wrapper
	dshPid int
	exited chan struct{} // closed when dsh has exited
	status string        // how dsh ended, valid after exited
	stdin  *os.File      // closing it releases the wrapper
	events chan int      // the count of streamed events so far
	outEOF chan struct{} // closed when dsh's stdout has ended
	mu     sync.Mutex
	out    []string
}

func startWrapped(t *testing.T, e *env, args []string) *wrapped {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	tmpl := e.cmd(context.Background(), args...)
	c := exec.Command(self, append([]string{dshBin}, args...)...)
	c.Dir = tmpl.Dir
	c.Env = append(tmpl.Env, reaperEnv+"=1")
	ctlR, ctlW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	inR, inW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr, err := os.Create(filepath.Join(t.TempDir(), "stderr"))
	if err != nil {
		t.Fatal(err)
	}
	c.Stdin, c.Stdout, c.Stderr = inR, outW, stderr
	c.ExtraFiles = []*os.File{ctlW}
	// The wrapper dies with the test binary, and it is its own group so
	// nothing of the run shares the test's group.
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	ctlW.Close()
	outW.Close()
	inR.Close()
	stderr.Close()
	w := &wrapped{cmd: c, pid: c.Process.Pid, exited: make(chan struct{}), stdin: inW, events: make(chan int, 1024), outEOF: make(chan struct{})}
	ctl := bufio.NewScanner(ctlR)
	if !ctl.Scan() || !strings.HasPrefix(ctl.Text(), "pid ") {
		inW.Close()
		_ = c.Wait()
		t.Fatalf("wrapper did not start dsh: %q", ctl.Text())
	}
	w.dshPid, _ = strconv.Atoi(strings.TrimPrefix(ctl.Text(), "pid "))
	go func() {
		defer ctlR.Close()
		w.status = "vanished"
		if ctl.Scan() {
			w.status = strings.TrimPrefix(ctl.Text(), "exit ")
		}
		close(w.exited)
	}()
	go func() {
		defer close(w.outEOF)
		defer outR.Close()
		sc := bufio.NewScanner(outR)
		sc.Buffer(nil, 1<<24)
		n := 0
		for sc.Scan() {
			n++
			w.mu.Lock()
			w.out = append(w.out, sc.Text())
			w.mu.Unlock()
			select {
			case w.events <- n:
			default:
			}
		}
		close(w.events)
	}()
	t.Cleanup(func() { w.release(t) })
	return w
}

// count returns how many lines dsh streamed so far.
func (w *wrapped) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.out)
}

// tail returns the last lines dsh streamed.
func (w *wrapped) tail() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return strings.Join(w.out[max(0, len(w.out)-5):], "\n")
}

// release lets the wrapper kill what is left below it and exit.
func (w *wrapped) release(t *testing.T) {
	if w.stdin == nil {
		return
	}
	w.stdin.Close()
	w.stdin = nil
	if err := w.cmd.Wait(); err != nil {
		t.Errorf("wrapper: %v", err)
	}
	// Everything below the wrapper is dead now, so the last holder of
	// dsh's stdout is gone; a pipe still open names a process that
	// escaped the wrapper.
	select {
	case <-w.outEOF:
	case <-time.After(survivorGrace):
		t.Errorf("dsh's stdout is still open after every process of the run was killed")
	}
}

// awaitKillPoint waits for the plan's kill point and reports whether dsh
// is to be killed (false: it ended by itself first) and why.
func (p *crashPlan) awaitKillPoint(w *wrapped, marks <-chan string) (bool, string) {
	hang := time.NewTimer(runDeadline)
	defer hang.Stop()
	var fire <-chan time.Time
	if p.kill == killAfterDelay {
		fire = time.After(p.killDelay)
	}
	events := w.events
	for {
		select {
		case <-w.exited:
			return false, "finished"
		case <-hang.C:
			return true, "hang"
		case <-fire:
			return true, p.kill
		case n, ok := <-events:
			if !ok {
				events = nil
			} else if p.kill == killAfterEvents && n >= p.killAt {
				return true, p.kill
			}
		case tag, ok := <-marks:
			if !ok {
				marks = nil
			} else if p.kill == killAfterMarker && tag == p.killTag && fire == nil {
				fire = time.After(p.killDelay)
			}
		}
	}
}
