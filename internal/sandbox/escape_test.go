//go:build linux

package sandbox

import (
	"bufio"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/dsh-dev/dsh/internal/proc/proctest"
)

// escapeScript starts four processes that try to outlive the command
// (setsid, nohup, a double fork, and a new session ignoring SIGTERM),
// each a sleep whose argument carries the marker, waits until all four
// run and prints "ready".
func escapeScript(marker, tail string) string {
	return fmt.Sprintf(`
setsid sleep %[1]s </dev/null >/dev/null 2>&1 &
nohup sleep %[1]s </dev/null >/dev/null 2>&1 &
( (sleep %[1]s </dev/null >/dev/null 2>&1 &) & )
setsid bash -c 'trap "" TERM HUP INT; exec sleep %[1]s' </dev/null >/dev/null 2>&1 &
until [ "$(pgrep -fx "sleep %[1]s" | wc -l)" -ge 4 ]; do :; done
echo ready
%[2]s
`, marker, tail)
}

// newMarker is a sleep duration unique to one test run.
func newMarker() string { return fmt.Sprintf("1000.%09d", rand.IntN(1e9)) }

// requireGone fails unless every process holding marker is gone within
// limit: each is waited for through a pidfd, not polled with sleeps.
func requireGone(t *testing.T, marker string, limit time.Duration) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		pids := proctest.Marked(marker)
		if len(pids) == 0 {
			return
		}
		left := time.Until(deadline)
		if left <= 0 {
			t.Fatalf("processes %v (%s) outlived their sandbox", pids, marker)
		}
		for _, pid := range pids {
			fd, err := unix.PidfdOpen(pid, 0)
			if err != nil {
				continue // gone already
			}
			fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
			_, _ = unix.Poll(fds, int(left.Milliseconds())+1)
			unix.Close(fd)
		}
	}
}

// readReady waits for the "ready" line.
func readReady(t *testing.T, r *bufio.Reader) {
	t.Helper()
	line, err := r.ReadString('\n')
	if err != nil || strings.TrimSpace(line) != "ready" {
		t.Fatalf("no readiness line: %q %v", line, err)
	}
}

// Nothing a confined command starts outlives it: not when it exits, not
// when it is stopped (and ignores SIGTERM), not when its spawner is
// killed with SIGKILL; under every backend and namespace mode.
func TestNothingOutlivesTheCommand(t *testing.T) {
	requireBash(t)
	if _, err := os.Stat("/proc/self/task"); err != nil {
		t.Skip("no /proc")
	}
	ws := workDir(t)
	for _, sc := range sandboxConfigs(t) {
		confine := func(t *testing.T, script string) Confined {
			t.Helper()
			ns := sc.ns
			var (
				c   Confined
				err error
			)
			argv := []string{"bash", "-c", script}
			p := Policy{Mode: WorkspaceWrite, Workspace: ws}
			if sc.backend == "bwrap" {
				c, err = (&Bwrap{ns: &ns}).Confine(argv, p)
			} else {
				c, err = (&Landlock{ns: &ns}).Confine(argv, p)
			}
			if err != nil {
				t.Fatal(err)
			}
			return c
		}
		t.Run(sc.name+"/exit", func(t *testing.T) {
			m := newMarker()
			cmd := command(confine(t, escapeScript(m, "exit 3")))
			out, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			readReady(t, bufio.NewReader(out))
			var ee *exec.ExitError
			if err := cmd.Wait(); !errors.As(err, &ee) || ee.ExitCode() != 3 {
				t.Fatalf("exit %v, want the command's status 3", err)
			}
			requireGone(t, m, 5*time.Second)
		})
		t.Run(sc.name+"/stopped", func(t *testing.T) {
			m := newMarker()
			// The command itself ignores SIGTERM too: the spawner's
			// SIGKILL after its grace, or the helper's own sweep, ends it.
			cmd := command(confine(t, "trap '' TERM INT HUP\n"+escapeScript(m, "exec sleep "+m)))
			out, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			readReady(t, bufio.NewReader(out))
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			// What proc.Run does on cancellation.
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
			select {
			case <-done:
			case <-time.After(2 * time.Second):
				_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
				<-done
			}
			requireGone(t, m, 5*time.Second)
		})
		t.Run(sc.name+"/spawner-killed", func(t *testing.T) {
			m := newMarker()
			parent, out := startRole(t, roleParent, roleConfig{
				Backend: sc.backend, NS: sc.ns, Harden: true, Mode: WorkspaceWrite, Dir: ws,
				Script: escapeScript(m, "exec sleep "+m),
			})
			readReady(t, out)
			if n := len(proctest.Marked(m)); n < 5 {
				t.Fatalf("%d marked processes before the kill, want 5", n)
			}
			_ = parent.Process.Kill()
			_ = parent.Wait()
			requireGone(t, m, 10*time.Second)
		})
	}
}

// A spawner killed with SIGKILL at a random moment while it starts
// confined commands leaves nothing behind. bwrap alone left its
// sandboxed child running in about 1 run of 75: --die-with-parent is set
// by that child after the clone, and a bwrap killed in between orphaned
// it. Under the helper the namespace (or the subreaper) takes care of it.
func TestSpawnerKilledWhileSpawning(t *testing.T) {
	requireBash(t)
	ws := workDir(t)
	iterations := 60
	if testing.Short() {
		iterations = 10
	}
	for _, sc := range sandboxConfigs(t) {
		if sc.name != "bwrap" && sc.name != "landlock/pid" && sc.name != "landlock/no-ns" {
			continue
		}
		t.Run(sc.name, func(t *testing.T) {
			for i := range iterations {
				m := newMarker()
				parent, _ := startRole(t, roleParent, roleConfig{
					Backend: sc.backend, NS: sc.ns, Harden: true, Mode: WorkspaceWrite, Dir: ws,
					Script: "exec sleep " + m, Spawn: 3,
				})
				// A random kill point: before, during or after the spawns.
				time.Sleep(time.Duration(rand.IntN(30)) * time.Millisecond)
				_ = parent.Process.Kill()
				_ = parent.Wait()
				requireGone(t, m, 10*time.Second)
				if t.Failed() {
					t.Fatalf("iteration %d", i)
				}
			}
		})
	}
}

// The command the helper starts from its confined thread really is
// confined (no_new_privs, seccomp, the escape capabilities gone from
// every set), holds no descriptor beyond 0-2, and in a namespace sees
// the helper as pid 1.
func TestHelperChildConfined(t *testing.T) {
	requireBash(t)
	ws := workDir(t)
	for _, sc := range sandboxConfigs(t) {
		if sc.backend != "landlock" {
			continue
		}
		t.Run(sc.name, func(t *testing.T) {
			ns := sc.ns
			c, err := (&Landlock{ns: &ns}).Confine([]string{"bash", "-c",
				`grep -E '^(NoNewPrivs|Seccomp|CapBnd|CapEff|CapPrm|CapInh|CapAmb):' /proc/self/status; echo ppid $PPID; exec ls -l /proc/self/fd`},
				Policy{Mode: WorkspaceWrite, Workspace: ws})
			if err != nil {
				t.Fatal(err)
			}
			code, out := run(t, c, ws)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, out)
			}
			fields := map[string]string{}
			var fds []string
			for line := range strings.SplitSeq(out, "\n") {
				k, v, _ := strings.Cut(line, ":")
				fields[k] = strings.TrimSpace(v)
				if v, ok := strings.CutPrefix(line, "ppid "); ok {
					fields["ppid"] = v
				}
				// ls -l /proc/self/fd: "… N -> target"; ls's own
				// directory fd is the one expected beyond 0-2.
				if i := strings.Index(line, " -> "); i > 0 {
					f := strings.Fields(line[:i])
					if fd := f[len(f)-1]; fd > "2" || len(fd) > 1 {
						if t := line[i+4:]; !strings.HasPrefix(t, "/proc/") || !strings.HasSuffix(t, "/fd") {
							fds = append(fds, fd+" -> "+t)
						}
					}
				}
			}
			if fields["NoNewPrivs"] != "1" || fields["Seccomp"] != "2" {
				t.Errorf("not confined: %s", out)
			}
			sets := []string{"CapEff", "CapPrm", "CapInh", "CapAmb"}
			if os.Geteuid() == 0 {
				// Root would regain the bounding set by exec; others
				// cannot change it, and cannot gain from it either.
				sets = append(sets, "CapBnd")
			}
			for _, set := range sets {
				v, err := strconv.ParseUint(fields[set], 16, 64)
				if err != nil {
					t.Fatalf("%s: %q", set, fields[set])
				}
				for _, c := range droppedCaps {
					if v&(1<<c) != 0 {
						t.Errorf("%s holds capability %d: %s", set, c, out)
					}
				}
			}
			if len(fds) > 0 {
				t.Errorf("descriptors beyond 0-2 reached the command: %q", fds)
			}
			if (sc.ns != nsNone) != (fields["ppid"] == "1") {
				t.Errorf("ppid %s in namespace mode %q", fields["ppid"], sc.ns)
			}
		})
	}
}

// unprivilegedEnv marks the test binary re-run as an unprivileged user
// by TestUnprivileged, so that it does not recurse.
const unprivilegedEnv = "DSH_SANDBOX_TEST_UNPRIVILEGED"

// The same guarantees hold for a user without privileges, where the
// helper gets its namespace through a user namespace (or none): run as
// root, this test re-runs the escape and secret tests as nobody.
func TestUnprivileged(t *testing.T) {
	if os.Geteuid() != 0 || os.Getenv(unprivilegedEnv) != "" {
		t.Skip("needs root to become another user")
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// A copy nobody can execute, and a temp dir nobody can write.
	// TestMain's TMPDIR is private to root; its parent is the system's.
	dir, err := os.MkdirTemp(filepath.Dir(os.TempDir()), "dsh-unpriv-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o1777); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "sandbox.test")
	b, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-test.short", "-test.v", "-test.run",
		"TestHelperChildConfined|TestNothingOutlivesTheCommand|TestSecretsUnreachable")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "TMPDIR="+dir, "HOME="+dir, unprivilegedEnv+"=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}, Pdeathsig: syscall.SIGKILL}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("as nobody: %v\n%s", err, out)
	}
	for _, want := range []string{"--- PASS: TestHelperChildConfined/landlock/no-ns", "--- PASS: TestNothingOutlivesTheCommand/landlock/no-ns/spawner-killed"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("as nobody, %q missing:\n%s", want, out)
		}
	}
	if !strings.Contains(string(out), "landlock/user") {
		t.Logf("user namespaces are not available to nobody here: only the no-namespace mode was tested")
	}
}

// danger-full-access is unconfined but supervised: the command sees the
// host's processes (no namespace), and nothing it starts outlives it. A
// binary that does not host the helper runs the command as it is.
func TestSuperviseFullAccess(t *testing.T) {
	requireBash(t)
	m := newMarker()
	s := New()
	c := s.Supervise([]string{"bash", "-c", "kill -0 $TESTPID && echo host-visible\n" + escapeScript(m, "exit 0")})
	if c.Enforcement != None || c.Argv[1] != HelperArg {
		t.Fatalf("not supervised: %+v", c)
	}
	code, out := run(t, c, "/", "TESTPID="+strconv.Itoa(os.Getpid()))
	if code != 0 || !strings.Contains(out, "host-visible") || !strings.Contains(out, "ready") {
		t.Fatalf("exit %d: %s", code, out)
	}
	requireGone(t, m, 5*time.Second)

	helperHosted.Store(false)
	defer helperHosted.Store(true)
	if c := s.Supervise([]string{"true"}); len(c.Argv) != 1 || c.Argv[0] != "true" {
		t.Errorf("without the helper: %q, want the command as it is", c.Argv)
	}
}
