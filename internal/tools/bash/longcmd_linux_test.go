package bash

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/dsh-dev/dsh/internal/jobs"
	"github.com/dsh-dev/dsh/internal/sandbox"
	"github.com/dsh-dev/dsh/internal/tool"
)

// longCommand is a command of about n bytes (a here-doc of x lines) that
// reports what a `bash -c` command sees: $0, $#, stdin at EOF, the
// here-doc's size; it exits 3.
func longCommand(n int) (cmd string, body int) {
	line := strings.Repeat("x", 99) + "\n"
	lines := n / len(line)
	return "echo \"start $0 $#\"\nread -r x; echo \"stdin=$?\"\ncat <<'EOF' | wc -c\n" +
		strings.Repeat(line, lines) + "EOF\necho done\nexit 3\n", lines * len(line)
}

// checkLong checks a long command's output and exit marker.
func checkLong(t *testing.T, out string, body int, marker bool) {
	t.Helper()
	// $0 is the shell as started: "bash", or its path where the
	// runner resolved it (as for any command).
	want := fmt.Sprintf("bash 0\nstdin=1\n%d\ndone\n", body)
	if !strings.HasPrefix(out, "start ") || !strings.Contains(out, want) || (marker && !strings.HasSuffix(out, "[exit code: 3]")) {
		t.Fatalf("output %q, want %q and exit code 3", tail(out), want)
	}
}

func tail(s string) string {
	if len(s) > 400 {
		return "…" + s[len(s)-400:]
	}
	return s
}

// Commands of 200 KiB and 2 MiB (over MAX_ARG_STRLEN, 128 KiB) run and
// behave as `bash -c` does ($0, no arguments, stdin at EOF, exit code),
// on every path: unconfined, supervised (danger-full-access, served),
// both sandbox backends per call and through the session's server, in
// the background, and in the persistent shell.
func TestLongCommand(t *testing.T) {
	sizes := []int{200 << 10, 2 << 20}
	each := func(t *testing.T, h *harness, r *jobs.Registry) {
		for _, n := range sizes {
			cmd, body := longCommand(n)
			res := h.run(context.Background(), t, map[string]any{"command": cmd, "timeout_ms": 60000})
			checkLong(t, text(res), body, true)
			if r != nil {
				j := startJob(t, h, r, map[string]any{"command": cmd})
				j, out := waitJob(t, r, j.ID)
				checkLong(t, out, body, false)
				if j.ExitCode == nil || *j.ExitCode != 3 {
					t.Fatalf("background job ended %s", j.Summary())
				}
			}
		}
	}
	t.Run("unconfined", func(t *testing.T) {
		r := newJobs(t, jobs.Options{})
		each(t, newHarness(t, Options{Jobs: r}), r)
	})
	t.Run("full access served", func(t *testing.T) {
		ss := sandbox.New().Session()
		t.Cleanup(func() { ss.Close() })
		r := newJobs(t, jobs.Options{})
		h := newHarness(t, Options{Jobs: r, Confine: func(c *tool.Call, argv []string) (Confinement, error) {
			cf := ss.Supervise(argv)
			if cf.Run == nil {
				t.Error("no server")
			}
			return Confinement{Confined: cf, Policy: sandbox.Policy{Mode: sandbox.DangerFullAccess}}, nil
		}})
		each(t, h, r)
	})
	for _, mode := range []sandbox.Mode{sandbox.ReadOnly, sandbox.WorkspaceWrite} {
		t.Run(string(mode), func(t *testing.T) {
			realBackends(t, mode, nil, each)
		})
	}
	t.Run("persistent", func(t *testing.T) {
		def, closer := NewPersistent(Options{})
		t.Cleanup(func() { _ = closer.Close() })
		reg := tool.NewRegistry()
		if err := reg.Register("", def); err != nil {
			t.Fatal(err)
		}
		h := &harness{p: tool.NewPipeline(reg), cwd: t.TempDir()}
		for _, n := range sizes {
			cmd, body := longCommand(n)
			// The persistent shell's exit ends it; run as a subshell.
			cmd = "( " + cmd + " )"
			res := h.run(context.Background(), t, map[string]any{"command": cmd, "timeout_ms": 60000})
			checkLong(t, text(res), body, true)
		}
	})
	t.Run("persistent escalated", func(t *testing.T) {
		// An escalated call runs one-off, outside the persistent shell.
		for _, b := range []sandbox.Backend{sandbox.NewBwrap(""), sandbox.NewLandlock("")} {
			t.Run(b.Name(), func(t *testing.T) {
				if err := b.Probe(); err != nil {
					t.Skipf("%s unavailable: %v", b.Name(), err)
				}
				var h *harness
				def, closer := NewPersistent(Options{Confine: func(c *tool.Call, argv []string) (Confinement, error) {
					p := sandbox.Policy{Mode: sandbox.WorkspaceWrite, Workspace: h.cwd, Network: true}
					cf, err := b.Confine(argv, p)
					return Confinement{Confined: cf, Policy: p}, err
				}})
				t.Cleanup(func() { _ = closer.Close() })
				reg := tool.NewRegistry()
				if err := reg.Register("", def); err != nil {
					t.Fatal(err)
				}
				h = &harness{p: tool.NewPipeline(reg), cwd: t.TempDir()}
				cmd, body := longCommand(200 << 10)
				res := h.run(context.Background(), t, map[string]any{"command": cmd, "timeout_ms": 60000,
					"sandbox_permissions": EscalateNetwork, "justification": "test"})
				checkLong(t, text(res), body, true)
			})
		}
	})
}

// A command that tries to stop the sandbox server (or the gate helper
// inside bubblewrap) and then outlives its timeout gets the timeout's
// result, not a sandbox failure, and the next command runs normally.
func TestRealSandboxStoppedServerTimesOut(t *testing.T) {
	realBackends(t, sandbox.WorkspaceWrite, nil, func(t *testing.T, h *harness, _ *jobs.Registry) {
		res := h.run(context.Background(), t, map[string]any{
			"command":    "kill -STOP $PPID 2>/dev/null && echo stopped; echo waiting; exec sleep 30",
			"timeout_ms": 1500,
		})
		out := text(res)
		var te *tool.Error
		if !errors.As(res.Error, &te) || te.Code != tool.CodeTimeout || !strings.Contains(out, "waiting") || !strings.Contains(out, "[timed out after 1.5s") {
			t.Fatalf("want a timeout: %v %q", res.Error, out)
		}
		t.Logf("%s", out) // "stopped" only on kernels without Landlock's signal scope (ABI < 6)
		start := time.Now()
		res = h.run(context.Background(), t, map[string]any{"command": "echo next"})
		if res.IsError || !strings.Contains(text(res), "next\n") {
			t.Fatalf("the next command (after %s): %v %q", time.Since(start), res.Error, text(res))
		}
	})
}
