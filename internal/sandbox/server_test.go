//go:build linux

package sandbox

import (
	"bufio"
	"context"
	"errors"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dsh-dev/dsh/internal/proc"
	"github.com/dsh-dev/dsh/internal/proc/proctest"
	"golang.org/x/sys/unix"
)

// serverCase is a working backend's session for policy p in workspace
// dir, and a way to run bash commands through its server.
type serverCase struct {
	cfg sandboxConfig
	t   *testing.T
	ss  *Session
	p   Policy
	dir string
}

func newServerCase(t *testing.T, be Backend, p Policy, dir string) *serverCase {
	t.Helper()
	requireWorking(t, be)
	requireBash(t)
	ss := New(be).Session()
	t.Cleanup(func() { ss.Close() })
	return &serverCase{t: t, ss: ss, p: p, dir: dir}
}

// run runs script with bash through the session; served says it must
// go through the server (not the per-call fallback).
func (sc *serverCase) run(ctx context.Context, script string, timeout time.Duration) proc.Outcome {
	sc.t.Helper()
	out, err := sc.runErr(ctx, script, timeout)
	if err != nil {
		sc.t.Fatalf("run %q: %v", script, err)
	}
	return out
}

func (sc *serverCase) runErr(ctx context.Context, script string, timeout time.Duration) (proc.Outcome, error) {
	sc.t.Helper()
	c, err := sc.ss.Confine([]string{"bash", "-c", script}, sc.p)
	if err != nil {
		sc.t.Fatal(err)
	}
	if c.Run == nil {
		sc.t.Fatalf("%s: no server run", c.Backend)
	}
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	return c.Run(ctx, proc.Spec{Argv: c.Argv, Dir: sc.dir, Env: proc.EnvPolicy{Exact: os.Environ()}, SysProcAttr: c.ProcAttr, KillGrace: 500 * time.Millisecond})
}

// BenchmarkServerTrue is BenchmarkWrapTrue's bash case through a
// session's server, for each working backend and for danger-full-access
// (supervise). cpu-us/call is the server's and its commands' CPU (bash's
// own included), which reaches this process when the session closes and
// the server is waited for.
func BenchmarkServerTrue(b *testing.B) {
	argv := []string{"bash", "-c", "true"}
	for _, be := range realBackends() {
		b.Run(be.Name(), func(b *testing.B) {
			requireWorking(b, be)
			ws := b.TempDir()
			p := Policy{Mode: WorkspaceWrite, Workspace: ws}
			benchServer(b, New(be).Session(), ws, func(ss *Session) (Confined, error) { return ss.Confine(argv, p) })
		})
	}
	b.Run("supervise", func(b *testing.B) {
		benchServer(b, New().Session(), b.TempDir(), func(ss *Session) (Confined, error) { return ss.Supervise(argv), nil })
	})
}

func benchServer(b *testing.B, ss *Session, dir string, confine func(*Session) (Confined, error)) {
	defer ss.Close()
	var before unix.Rusage
	_ = unix.Getrusage(unix.RUSAGE_CHILDREN, &before)
	n := 0
	for b.Loop() {
		n++
		c, err := confine(ss)
		if err != nil {
			b.Fatal(err)
		}
		out, err := c.Run(b.Context(), proc.Spec{Argv: c.Argv, Dir: dir, Env: proc.EnvPolicy{Exact: os.Environ()}, SysProcAttr: c.ProcAttr})
		if err != nil || out.ExitCode != 0 {
			b.Fatalf("%v %d %s", err, out.ExitCode, out.Output)
		}
	}
	if ss.served.Load() == 0 {
		b.Fatal("not served")
	}
	b.StopTimer()
	ss.Close()
	var after unix.Rusage
	_ = unix.Getrusage(unix.RUSAGE_CHILDREN, &after)
	cpu := after.Utime.Nano() + after.Stime.Nano() - before.Utime.Nano() - before.Stime.Nano()
	b.ReportMetric(float64(cpu)/1e3/float64(n), "cpu-us/call")
}

func TestServerRunsCommands(t *testing.T) {
	for _, be := range realBackends() {
		t.Run(be.Name(), func(t *testing.T) {
			f := newFixture(t)
			sc := newServerCase(t, be, Policy{Mode: WorkspaceWrite, Workspace: f.ws}, f.ws)
			for i := range 3 {
				out := sc.run(t.Context(), "echo hi $$; pwd; exit 3", 0)
				if out.ExitCode != 3 || !strings.Contains(string(out.Output), "hi") || !strings.Contains(string(out.Output), f.ws) {
					t.Fatalf("round %d: exit %d %q", i, out.ExitCode, out.Output)
				}
			}
			if n := sc.ss.served.Load(); n != 3 {
				t.Fatalf("the server ran %d of 3 commands", n)
			}
		})
	}
}

// serverBackends runs f for every working backend and namespace mode
// (sandboxConfigs), in workspace-write on a fresh fixture, through one
// session.
func serverBackends(t *testing.T, f func(t *testing.T, sc *serverCase, fx fixture)) {
	for _, cfg := range sandboxConfigs(t) {
		t.Run(cfg.name, func(t *testing.T) {
			ns := cfg.ns
			var be Backend = &Landlock{ns: &ns}
			if cfg.backend == "bwrap" {
				be = &Bwrap{ns: &ns}
			}
			fx := newFixture(t)
			sc := newServerCase(t, be, Policy{Mode: WorkspaceWrite, Workspace: fx.ws}, fx.ws)
			sc.cfg = cfg
			f(t, sc, fx)
		})
	}
}

// confinedStill checks that a command through sc still cannot write
// outside the workspace nor into .git, and can write inside.
func confinedStill(t *testing.T, sc *serverCase, fx fixture) {
	t.Helper()
	name := "probe-" + newMarker()
	out := sc.run(t.Context(), "echo x > "+fx.outside+"/"+name+"; echo x > .git/"+name+"; echo x > src/"+name, 0)
	if _, err := os.Stat(fx.outside + "/" + name); err == nil {
		t.Fatalf("a write outside the workspace went through: %s", out.Output)
	}
	if _, err := os.Stat(fx.ws + "/.git/" + name); err == nil {
		t.Fatalf("a write into .git went through: %s", out.Output)
	}
	if _, err := os.Stat(fx.ws + "/src/" + name); err != nil {
		t.Fatalf("a write inside the workspace failed: %s", out.Output)
	}
}

// What a command leaves running is gone before its result comes back,
// and the next command sees none of it: no process, no environment.
func TestServerCommandsIsolated(t *testing.T) {
	serverBackends(t, func(t *testing.T, sc *serverCase, fx fixture) {
		m := newMarker()
		out := sc.run(t.Context(), "export SECRET_STATE=a1b2; cd src; "+escapeScript(m, ""), 0)
		if !strings.Contains(string(out.Output), "ready") {
			t.Fatalf("escapes did not start: %q", out.Output)
		}
		if pids := proctest.Marked(m); len(pids) > 0 {
			t.Fatalf("processes %v outlived the command's result", pids)
		}
		out = sc.run(t.Context(), `pgrep -fx "sleep `+m+`" || echo none; echo "state=$SECRET_STATE"; pwd; ls /proc | grep -c '^[0-9]'`, 0)
		s := string(out.Output)
		if !strings.Contains(s, "none") || !strings.Contains(s, "state=\n") || !strings.Contains(s, fx.ws+"\n") {
			t.Fatalf("the next command saw the previous one: %q", s)
		}
		confinedStill(t, sc, fx)
		if n := sc.ss.served.Load(); n != 3 {
			t.Fatalf("the server ran %d of 3 commands", n)
		}
	})
}

// A command that attacks the server (signals, ptrace-style reads of its
// memory and descriptors, writes to its socket) neither escapes nor
// loosens the next command's confinement.
func TestServerHostileCommand(t *testing.T) {
	serverBackends(t, func(t *testing.T, sc *serverCase, fx fixture) {
		attack := `
srv=$PPID
ls -l /proc/$srv/fd/ 2>&1 | head -5
for fd in 0 1 2 3 4 5 6 7 8 9; do echo '{"op":"run"}' > /proc/$srv/fd/$fd 2>/dev/null && echo "wrote fd $fd"; done
cat /proc/$srv/environ >/dev/null 2>&1 && echo read-environ
exec 9</proc/$srv/mem 2>/dev/null && echo opened-mem
kill -STOP $srv 2>/dev/null && echo stopped-server
kill -9 $srv 2>/dev/null && echo killed-server
$KILL_INIT
echo x > ` + fx.outside + `/hostile 2>/dev/null && echo escaped
true`
		// Pid 1 is the namespace's init (the server, or bwrap's), except
		// without a namespace, where it would be the host's.
		killInit := "kill -9 1 2>/dev/null && echo killed-init"
		if sc.cfg.backend == "landlock" && sc.cfg.ns == nsNone {
			killInit = ""
		}
		out, err := sc.runErr(t.Context(), strings.Replace(attack, "$KILL_INIT", killInit, 1), 30*time.Second)
		s := string(out.Output)
		t.Logf("attack (%v): %s", err, s)
		for _, bad := range []string{"read-environ", "opened-mem", "escaped"} {
			if strings.Contains(s, bad) {
				t.Fatalf("the attack got through (%s): %s", bad, s)
			}
		}
		if _, err := os.Stat(fx.outside + "/hostile"); err == nil {
			t.Fatal("a write outside the workspace went through")
		}
		// Whatever became of the server, the next commands are confined.
		confinedStill(t, sc, fx)
		confinedStill(t, sc, fx)
	})
}

// The timeout kills the command's whole group and everything it left.
func TestServerTimeoutKillsAll(t *testing.T) {
	serverBackends(t, func(t *testing.T, sc *serverCase, fx fixture) {
		m := newMarker()
		out := sc.run(t.Context(), escapeScript(m, "exec sleep "+m), 2*time.Second)
		if !out.TimedOut || !strings.Contains(string(out.Output), "ready") {
			t.Fatalf("timed out %v: %q", out.TimedOut, out.Output)
		}
		requireGone(t, m, 10*time.Second)
		confinedStill(t, sc, fx)
	})
}

// Cancelling mid-command stops it and everything it started.
func TestServerCancel(t *testing.T) {
	serverBackends(t, func(t *testing.T, sc *serverCase, fx fixture) {
		m := newMarker()
		fifo := fx.ws + "/ready.fifo"
		if err := unix.Mkfifo(fifo, 0o600); err != nil {
			t.Fatal(err)
		}
		f, err := os.OpenFile(fifo, os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		go func() {
			line, _ := bufio.NewReader(f).ReadString('\n')
			if line == "ready\n" {
				cancel()
			}
		}()
		out := sc.run(ctx, escapeScript(m, "echo ready > ready.fifo; exec sleep "+m), 0)
		if !out.Cancelled {
			t.Fatalf("not cancelled: %+v %q", out, out.Output)
		}
		requireGone(t, m, 10*time.Second)
		confinedStill(t, sc, fx)
	})
}

// A server that dies under a running command fails the call (the
// command dies with it), and the next command gets a new, confining one.
func TestServerDeathFailsClosed(t *testing.T) {
	serverBackends(t, func(t *testing.T, sc *serverCase, fx fixture) {
		confinedStill(t, sc, fx) // starts the server
		sc.ss.mu.Lock()
		srv := sc.ss.srv
		sc.ss.mu.Unlock()
		m := newMarker()
		fifo := fx.ws + "/ready.fifo"
		if err := unix.Mkfifo(fifo, 0o600); err != nil {
			t.Fatal(err)
		}
		f, err := os.OpenFile(fifo, os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		go func() {
			line, _ := bufio.NewReader(f).ReadString('\n')
			if line == "ready\n" {
				_ = unix.Kill(srv.p.Pid(), unix.SIGKILL)
			}
		}()
		out, err := sc.runErr(t.Context(), escapeScript(m, "echo ready > ready.fifo; exec sleep "+m), 30*time.Second)
		if !errors.Is(err, ErrUnavailable) || out.TimedOut {
			t.Fatalf("the call did not fail closed: %v %+v %q", err, out, out.Output)
		}
		if sc.cfg.backend == "landlock" && sc.cfg.ns == nsNone {
			// Without a namespace only the server could sweep what left
			// the command's group, and a SIGKILL from outside gives it no
			// chance (as for the per-call helper; dsh's own death gives
			// it its parent-death signal instead). Clean up.
			for _, pid := range proctest.Marked(m) {
				_ = unix.Kill(pid, unix.SIGKILL)
			}
		}
		requireGone(t, m, 10*time.Second)
		confinedStill(t, sc, fx)
		sc.ss.mu.Lock()
		again := sc.ss.srv
		sc.ss.mu.Unlock()
		if again == srv || again == nil {
			t.Fatal("no new server")
		}
	})
}

// A command whose policy differs from the server's gets exactly its own:
// read-only after workspace-write (and back), network on and off.
func TestServerPolicyChange(t *testing.T) {
	serverBackends(t, func(t *testing.T, sc *serverCase, fx fixture) {
		confinedStill(t, sc, fx)
		ww := sc.p
		sc.p = Policy{Mode: ReadOnly}
		out := sc.run(t.Context(), "echo x > src/ro; echo tmp > $TMPDIR/ro && echo tmp-ok", 0)
		if _, err := os.Stat(fx.ws + "/src/ro"); err == nil {
			t.Fatalf("read-only wrote into the workspace: %q", out.Output)
		}
		if !strings.Contains(string(out.Output), "tmp-ok") {
			t.Fatalf("read-only's TMPDIR is not writable: %q", out.Output)
		}
		sc.p = ww
		confinedStill(t, sc, fx)
		port := listen(t)
		net := "exec 3<>/dev/tcp/127.0.0.1/" + port + " && echo connected"
		if out := sc.run(t.Context(), net, 0); strings.Contains(string(out.Output), "connected") {
			t.Fatalf("network without the policy: %q", out.Output)
		}
		sc.p.Network = true
		if out := sc.run(t.Context(), net, 0); !strings.Contains(string(out.Output), "connected") {
			t.Fatalf("no network with the policy: %q", out.Output)
		}
		sc.p.Network = false
		if out := sc.run(t.Context(), net, 0); strings.Contains(string(out.Output), "connected") {
			t.Fatalf("network after the escalation: %q", out.Output)
		}
		confinedStill(t, sc, fx)
	})
}

// Close ends the server and everything in its namespaces.
func TestServerClose(t *testing.T) {
	serverBackends(t, func(t *testing.T, sc *serverCase, fx fixture) {
		confinedStill(t, sc, fx)
		marker := "dsh-sandbox-server\x00" + strconv.Itoa(os.Getpid())
		if len(proctest.Marked(marker)) == 0 {
			t.Fatal("no server process found")
		}
		sc.ss.Close()
		requireGone(t, marker, 10*time.Second)
		// After Close, commands run per call, still confined.
		confinedStill(t, sc, fx)
		if n := sc.ss.served.Load(); n != 1 {
			t.Fatalf("served %d", n)
		}
	})
}

// BenchmarkConfineThread is the per-command confinement the server
// applies: a fresh locked thread builds the Landlock rule set of a
// workspace-write policy (the .git carve included), drops capabilities,
// restricts itself and loads the seccomp filter, then ends.
func BenchmarkConfineThread(b *testing.B) {
	if landlockABI() < 1 {
		b.Skip("no Landlock")
	}
	f := newFixture(b)
	lay, err := newLayout(Policy{Mode: WorkspaceWrite, Workspace: f.ws})
	if err != nil {
		b.Fatal(err)
	}
	spec, _ := landlockSpec(lay, false, landlockABI(), seccompSupported(), false)
	for b.Loop() {
		done := make(chan error, 1)
		go func() {
			runtime.LockOSThread() // never unlocked: the thread ends confined
			done <- restrictSelf(spec)
		}()
		if err := <-done; err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSessionConfine is dsh's side of a served command before it
// starts: the policy's layout, the per-call command line (kept for the
// fallback) and the server plan.
func BenchmarkSessionConfine(b *testing.B) {
	for _, be := range realBackends() {
		b.Run(be.Name(), func(b *testing.B) {
			requireWorking(b, be)
			f := newFixture(b)
			ss := New(be).Session()
			p := Policy{Mode: WorkspaceWrite, Workspace: f.ws}
			for b.Loop() {
				if _, err := ss.Confine([]string{"bash", "-c", "true"}, p); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// A command cannot stop or trace its server (the helper it was forked
// from) nor the namespace's init, under either backend: its signals and
// ptrace are scoped to its own Landlock domain (bubblewrap's commands
// too) and the server is non-dumpable. A command that then outlives its
// timeout is reported timed out, not as a sandbox failure, and the next
// command runs normally.
func TestServerStoppedByCommand(t *testing.T) {
	if landlockABI() < 6 {
		t.Skip("no Landlock signal scope (ABI < 6): a command can stop its server here")
	}
	// The interpreter itself, not a version manager's shim script.
	python := ""
	if b, err := exec.Command("python3", "-c", "import sys; print(sys.executable)").Output(); err == nil {
		python = strings.TrimSpace(string(b))
	}
	serverBackends(t, func(t *testing.T, sc *serverCase, fx fixture) {
		m := newMarker()
		// Every process the command can see but itself, in a namespace;
		// without one (Landlock, nsNone) /proc is the host's, and only
		// the server is tried.
		targets := `$(ls /proc | grep '^[0-9]*$')`
		if sc.cfg.backend == "landlock" && sc.cfg.ns == nsNone {
			targets = `$PPID`
		}
		trace := ": <<'PY'"
		if python != "" {
			trace = python + " - $PPID 1 <<'PY'"
		}
		attack := `for p in ` + targets + `; do
  [ "$p" = $$ ] && continue
  kill -STOP "$p" 2>/dev/null && echo "stopped $p"
  kill -CONT "$p" 2>/dev/null
  kill -TERM "$p" 2>/dev/null && echo "signalled $p"
  cat /proc/$p/mem /proc/$p/environ >/dev/null 2>&1 && echo "read $p"
done
` + trace + `
import ctypes, sys
libc = ctypes.CDLL(None, use_errno=True)
for pid in map(int, sys.argv[1:]):
    if libc.ptrace(16, pid, 0, 0) == 0:  # PTRACE_ATTACH
        print("traced", pid)
        libc.ptrace(17, pid, 0, 0)  # PTRACE_DETACH
PY
echo attacked; sleep 0.1 & echo ` + m + ` >/dev/null; wait`
		// No timeout to wait for: a stopped server would leave this
		// command's result unanswered; the timeout's report with a
		// stopped server is TestServerStoppedReportsTimeout's.
		out, err := sc.runErr(t.Context(), attack, time.Minute)
		s := string(out.Output)
		if err != nil || out.TimedOut || out.ExitCode != 0 || !strings.Contains(s, "attacked") {
			t.Fatalf("want the attack to run to its end: %v %+v %q", err, out, s)
		}
		for _, bad := range []string{"stopped", "signalled", "read ", "traced"} {
			if strings.Contains(s, bad) {
				t.Fatalf("the command reached a process outside its domain (%s): %s", bad, s)
			}
		}
		requireGone(t, m, 10*time.Second)
		confinedStill(t, sc, fx)
		if n := sc.ss.served.Load(); n != 2 {
			t.Fatalf("the server ran %d of 2 commands", n)
		}
	})
}

// A server that was stopped (as a command could on a kernel without the
// signal scope) leaves the timeout's SIGKILL unanswered: it is killed
// with the command, which is reported killed for its timeout, not as a
// sandbox failure, and the next command gets a new server.
func TestServerStoppedReportsTimeout(t *testing.T) {
	serverBackends(t, func(t *testing.T, sc *serverCase, fx fixture) {
		if self, err := os.Executable(); err != nil || sc.cfg.ns != namespaceFor(self) {
			// The report is the client's; each backend's server in
			// its usual namespace is enough (each test waits KillWait).
			t.Skip("covered by the backend's usual configuration")
		}
		confinedStill(t, sc, fx) // starts the server
		sc.ss.mu.Lock()
		srv := sc.ss.srv
		sc.ss.mu.Unlock()
		m := newMarker()
		fifo := fx.ws + "/ready.fifo"
		if err := unix.Mkfifo(fifo, 0o600); err != nil {
			t.Fatal(err)
		}
		f, err := os.OpenFile(fifo, os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		stopped := make(chan struct{})
		go func() {
			defer close(stopped)
			line, _ := bufio.NewReader(f).ReadString('\n')
			if line == "ready\n" {
				stopServer(srv.p.Pid())
			}
		}()
		out, err := sc.runErr(t.Context(), escapeScript(m, "echo ready > ready.fifo; exec sleep "+m), time.Second)
		<-stopped
		if err != nil || !out.TimedOut || out.ExitCode != 128+int(unix.SIGKILL) {
			t.Fatalf("want a timeout and a kill: %v %+v %q", err, out, out.Output)
		}
		if sc.cfg.backend == "landlock" && sc.cfg.ns == nsNone {
			for _, pid := range proctest.Marked(m) {
				_ = unix.Kill(pid, unix.SIGKILL)
			}
		}
		requireGone(t, m, 10*time.Second)
		confinedStill(t, sc, fx)
	})
}

// stopServer stops the server process started as pid and every
// descendant that is a sandbox helper (the server itself inside
// bubblewrap, or an outer helper's inner one), leaving the commands
// running.
func stopServer(pid int) {
	_ = unix.Kill(pid, unix.SIGSTOP)
	for _, kid := range descendants(pid) {
		if b, err := os.ReadFile("/proc/" + strconv.Itoa(kid) + "/cmdline"); err == nil && strings.Contains(string(b), "dsh-sandbox-server") {
			_ = unix.Kill(kid, unix.SIGSTOP)
		}
	}
}

// descendants lists pid's descendants from /proc.
func descendants(pid int) []int {
	var out []int
	kids := []int{pid}
	for len(kids) > 0 {
		p := kids[0]
		kids = kids[1:]
		// Children hang below the thread that forked them.
		tasks, _ := os.ReadDir("/proc/" + strconv.Itoa(p) + "/task")
		for _, task := range tasks {
			b, err := os.ReadFile("/proc/" + strconv.Itoa(p) + "/task/" + task.Name() + "/children")
			if err != nil {
				continue
			}
			for f := range strings.FieldsSeq(string(b)) {
				if n, err := strconv.Atoi(f); err == nil {
					out = append(out, n)
					kids = append(kids, n)
				}
			}
		}
	}
	return out
}

// A command that arrives while the server runs another is confined per
// call instead.
func TestServerBusyFallsBack(t *testing.T) {
	serverBackends(t, func(t *testing.T, sc *serverCase, fx fixture) {
		fifo := fx.ws + "/ready.fifo"
		if err := unix.Mkfifo(fifo, 0o600); err != nil {
			t.Fatal(err)
		}
		f, err := os.OpenFile(fifo, os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		release := fx.ws + "/release.fifo"
		if err := unix.Mkfifo(release, 0o600); err != nil {
			t.Fatal(err)
		}
		rel, err := os.OpenFile(release, os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer rel.Close()
		first := make(chan proc.Outcome, 1)
		go func() {
			out, _ := sc.runErr(t.Context(), "echo ready > ready.fifo; read _ < release.fifo; echo first", 30*time.Second)
			first <- out
		}()
		if line, _ := bufio.NewReader(f).ReadString('\n'); line != "ready\n" {
			t.Fatalf("readiness %q", line)
		}
		confinedStill(t, sc, fx) // per call: the server is busy
		if _, err := rel.WriteString("go\n"); err != nil {
			t.Fatal(err)
		}
		if out := <-first; !strings.Contains(string(out.Output), "first") {
			t.Fatalf("first: %q", out.Output)
		}
		if n := sc.ss.served.Load(); n != 1 {
			t.Fatalf("served %d, want 1 (the second ran per call)", n)
		}
	})
}

// Under bubblewrap each per-call command got a fresh /dev (a tmpfs, with
// /dev/shm in it); the server's commands share one, so the server clears
// what a command left there before the next one runs.
func TestServerFreshDev(t *testing.T) {
	serverBackends(t, func(t *testing.T, sc *serverCase, fx fixture) {
		if be, _ := sc.ss.sb.Backend(); be.Name() != "bwrap" {
			t.Skip("only bubblewrap gives each command its own /dev")
		}
		sc.run(t.Context(), "echo x > /dev/shm/leftfile; mkdir -p /dev/shm/leftdir/sub; echo y > /dev/leftdev; true", 0)
		out := sc.run(t.Context(), "ls -A /dev/shm; [ -e /dev/leftdev ] && echo DEVLEFT; true", 0)
		if s := string(out.Output); strings.Contains(s, "leftfile") || strings.Contains(s, "leftdir") || strings.Contains(s, "DEVLEFT") {
			t.Fatalf("the next command saw the previous one's /dev: %q", s)
		}
		// A command that puts the directory's times back cannot hide what
		// it left from the server (which looks at the change time).
		sc.run(t.Context(), `t0=$(stat -c %y /dev/shm); echo z > /dev/shm/hidden; touch -d "$t0" /dev/shm; true`, 0)
		out = sc.run(t.Context(), "ls -A /dev/shm; true", 0)
		if s := string(out.Output); strings.Contains(s, "hidden") {
			t.Fatalf("a file left with the directory's times put back survived: %q", s)
		}
	})
}

// A spawner (dsh) killed with SIGKILL while its session's server runs a
// command leaves nothing behind: not the server, not the command, not
// what the command started; in every namespace mode, and for full
// access's lifetime-only server.
func TestServerSpawnerKilled(t *testing.T) {
	requireBash(t)
	cfgs := append(sandboxConfigs(t), sandboxConfig{"full-access", "none", nsNone})
	for _, cfg := range cfgs {
		t.Run(cfg.name, func(t *testing.T) {
			ws := workDir(t)
			fifo := ws + "/ready.fifo"
			if err := unix.Mkfifo(fifo, 0o600); err != nil {
				t.Fatal(err)
			}
			f, err := os.OpenFile(fifo, os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			m := newMarker()
			parent, _ := startRole(t, roleParent, roleConfig{
				Backend: cfg.backend, NS: cfg.ns, Harden: true, Mode: WorkspaceWrite, Dir: ws, Server: true,
				Script: escapeScript(m, "echo ready > "+fifo+"; exec sleep "+m),
			})
			if line, err := bufio.NewReader(f).ReadString('\n'); err != nil || line != "ready\n" {
				t.Fatalf("readiness %q %v", line, err)
			}
			server := "dsh-sandbox-server\x00" + strconv.Itoa(parent.Process.Pid)
			if len(proctest.Marked(server)) == 0 {
				t.Fatal("no server runs the command")
			}
			_ = parent.Process.Kill()
			_ = parent.Wait()
			requireGone(t, m, 10*time.Second)
			requireGone(t, server, 10*time.Second)
		})
	}
}

// childCPU is the user and system time of this process's waited-for
// descendants.
func childCPU(t *testing.T) time.Duration {
	t.Helper()
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_CHILDREN, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// TestServerCloseAccountsCPU: a session's server ends by itself when its
// session closes, so the CPU time of what it ran reaches dsh's own
// accounting up the chain of waits (time(1) on dsh, a parent's rusage),
// as a per-call command's does; a server torn down by signal took it
// along.
func TestServerCloseAccountsCPU(t *testing.T) {
	const burn = "i=0; while [ $i -lt 60000 ]; do i=$((i+1)); done"
	before := childCPU(t)
	if err := exec.Command("bash", "-c", burn).Run(); err != nil {
		t.Fatal(err)
	}
	direct := childCPU(t) - before
	for _, be := range realBackends() {
		t.Run(be.Name(), func(t *testing.T) {
			f := newFixture(t)
			sc := newServerCase(t, be, Policy{Mode: WorkspaceWrite, Workspace: f.ws}, f.ws)
			before := childCPU(t)
			if out := sc.run(t.Context(), burn, 0); out.ExitCode != 0 {
				t.Fatalf("exit %d: %s", out.ExitCode, out.Output)
			}
			if sc.ss.served.Load() != 1 {
				t.Fatal("not served")
			}
			sc.ss.Close()
			if got := childCPU(t) - before; got < direct/2 {
				t.Fatalf("after the session closed its server's command counts %v of CPU; run directly it took %v", got, direct)
			}
		})
	}
}

// danger-full-access through a session's server: nothing is confined per
// thread, so the server forks each command from its own main thread.
// Commands see the host's processes, start with nothing of the previous
// one, and leave nothing running once their result is in.
func TestServerSupervisesFullAccess(t *testing.T) {
	requireBash(t)
	ss := New().Session()
	t.Cleanup(func() { ss.Close() })
	dir := t.TempDir()
	run := func(script string) proc.Outcome {
		t.Helper()
		c := ss.Supervise([]string{"bash", "-c", script})
		if c.Run == nil {
			t.Fatal("no server for danger-full-access")
		}
		env := append(os.Environ(), "TESTPID="+strconv.Itoa(os.Getpid()))
		out, err := c.Run(t.Context(), proc.Spec{Argv: c.Argv, Dir: dir, Env: proc.EnvPolicy{Exact: env}, SysProcAttr: c.ProcAttr})
		if err != nil {
			t.Fatalf("run %q: %v", script, err)
		}
		return out
	}
	m := newMarker()
	out := run("kill -0 $TESTPID && echo host-visible; export STATE=a1; cd /; " + escapeScript(m, "exit 3"))
	if s := string(out.Output); out.ExitCode != 3 || !strings.Contains(s, "host-visible") || !strings.Contains(s, "ready") {
		t.Fatalf("exit %d: %q", out.ExitCode, s)
	}
	if pids := proctest.Marked(m); len(pids) > 0 {
		t.Fatalf("processes %v outlived the command's result", pids)
	}
	out = run(`echo "state=$STATE"; pwd`)
	if s := string(out.Output); out.ExitCode != 0 || s != "state=\n"+dir+"\n" {
		t.Fatalf("the next command saw the previous one: exit %d %q", out.ExitCode, s)
	}
	for i := range 20 {
		if out := run("exit " + strconv.Itoa(i)); out.ExitCode != i {
			t.Fatalf("command %d: exit %d %q", i, out.ExitCode, out.Output)
		}
	}
	if n := ss.served.Load(); n != 22 {
		t.Fatalf("the server ran %d of 22 commands", n)
	}
}
