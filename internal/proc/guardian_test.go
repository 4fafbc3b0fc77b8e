package proc

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"github.com/dsh-dev/dsh/internal/leakcheck"
	"github.com/dsh-dev/dsh/internal/proc/proctest"
)

// Environment of the test binary when it plays "dsh" for the guardian
// tests: the fifo to report on, and which kind of child to start.
const (
	helperEnv     = "PROC_TEST_FAKE_DSH_FIFO"
	helperModeEnv = "PROC_TEST_FAKE_DSH_MODE"
)

func TestMain(m *testing.M) {
	if fifo := os.Getenv(helperEnv); fifo != "" {
		fakeDsh(fifo, os.Getenv(helperModeEnv))
		return
	}
	os.Exit(leakcheck.Run(m))
}

// fakeDsh starts a child whose grandchild sleeps, reports the group id
// and the grandchild pid through fifo, and blocks until it is killed.
// mode "start" keeps the command running, "orphan" lets it exit first so
// that the group outlives its leader, "run" runs it under Run, "restart"
// starts two, killing the guardian in between.
func fakeDsh(fifo, mode string) {
	script := `sleep 1000 & echo "gc $!" >"$1"; wait`
	if mode == "orphan" {
		script = `sleep 1000 & echo "gc $!" >"$1"`
	}
	spec := Spec{Argv: []string{"sh", "-c", script, "_", fifo}, Dir: "/"}
	report := func(pgid int) {
		f, err := os.OpenFile(fifo, os.O_WRONLY, 0)
		if err != nil {
			os.Exit(2)
		}
		fmt.Fprintf(f, "pgid %d\n", pgid)
	}
	if mode == "run" {
		// Run's command is its group's leader; the pgid is the pid of
		// the sh that reports the grandchild, which is its parent.
		spec.Argv[2] = `sleep 1000 & echo "gc $!" >"$1"; echo "pgid $$" >"$1"; wait`
		_, _ = Run(context.Background(), spec)
		os.Exit(3) // not reached: the test kills this process first
	}
	if mode == "restart" {
		// A first group, then the guardian is killed: starting a second
		// group must bring up a new guardian that guards both.
		first, err := Start(context.Background(), spec)
		if err != nil {
			os.Exit(2)
		}
		report(first.Pgid())
		gp := theGuardian.pid()
		var ws syscall.WaitStatus
		if syscall.Kill(gp, syscall.SIGKILL) != nil {
			os.Exit(2)
		}
		if _, err := syscall.Wait4(gp, &ws, 0, nil); err != nil {
			os.Exit(2)
		}
	}
	p, err := Start(context.Background(), spec)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	if mode == "orphan" {
		if _, err := p.Wait(); err != nil {
			os.Exit(2)
		}
	}
	report(p.Pgid())
	select {}
}

// dsh is SIGKILLed: neither Teardown nor any deferred cleanup runs, yet
// the guardian kills the whole group, grandchild included, whether the
// command still runs, has already exited, or runs under Run, and a
// guardian that was killed is replaced, still guarding every group.
func TestGuardianKillsGroupWhenDshDies(t *testing.T) {
	for _, mode := range []string{"start", "orphan", "run", "restart"} {
		t.Run(mode, func(t *testing.T) {
			groups := 1
			if mode == "restart" {
				groups = 2
			}
			fifo, lines := proctest.Fifo(t)
			dsh := exec.Command(os.Args[0], "-test.run=^$")
			dsh.Env = append(os.Environ(), helperEnv+"="+fifo, helperModeEnv+"="+mode)
			dsh.Stderr = os.Stderr
			if err := dsh.Start(); err != nil {
				t.Fatal(err)
			}
			var gcs, pgids []int
			for len(gcs) < groups || len(pgids) < groups {
				var n int
				l := next(t, lines)
				if _, err := fmt.Sscanf(l, "gc %d", &n); err == nil {
					gcs = append(gcs, n)
				} else if _, err := fmt.Sscanf(l, "pgid %d", &n); err == nil {
					pgids = append(pgids, n)
					t.Cleanup(func() { _ = syscall.Kill(-n, syscall.SIGKILL) })
				} else {
					t.Fatalf("unexpected line %q", l)
				}
			}
			for _, gc := range gcs {
				if !proctest.Alive(gc) {
					t.Fatal("grandchild not running before dsh dies")
				}
			}
			if mode == "orphan" && !proctest.WaitExit(pgids[0], 0) {
				t.Fatal("the group leader should have exited already")
			}
			if err := dsh.Process.Kill(); err != nil {
				t.Fatal(err)
			}
			_ = dsh.Wait()
			for _, gc := range gcs {
				if !proctest.WaitExit(gc, exitWait) {
					t.Fatalf("grandchild %d survived dsh's death", gc)
				}
			}
			for _, pgid := range pgids {
				for _, pid := range groupMembers(pgid) {
					if !proctest.WaitExit(pid, exitWait) {
						t.Fatalf("group member %d survived dsh's death", pid)
					}
				}
			}
		})
	}
}

// The guardian's bookkeeping: at EOF it ends exactly the groups added
// and not removed, each with one TERM and then one KILL ("kill" and
// "sleep" are replaced by functions that print their arguments), and
// with no group left it does not wait.
func TestGuardianScriptSet(t *testing.T) {
	cmd := exec.Command("/bin/sh", "-c", `kill() { echo "$*"; }; sleep() { echo "sleep $*"; }; `+guardianScript)
	cmd.Stdin = strings.NewReader("+ 5\n+ 6\n+ 17\n- 5\n- 99\n+ 56\n- 17\n")
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	if got := string(out); got != "-TERM -6\n-TERM -56\nsleep 1\n-KILL -6\n-KILL -56\n" {
		t.Fatalf("guardian killed %q", got)
	}
	cmd = exec.Command("/bin/sh", "-c", `kill() { echo "$*"; }; sleep() { echo "sleep $*"; }; `+guardianScript)
	cmd.Stdin = strings.NewReader("+ 5\n- 5\n")
	if out, err = cmd.Output(); err != nil || len(out) != 0 {
		t.Fatalf("guardian with no group: %v %q", err, out)
	}
}
