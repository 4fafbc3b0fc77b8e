//go:build linux

package bash

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dsh-dev/dsh/internal/jobs"
	"github.com/dsh-dev/dsh/internal/proc/proctest"
	"github.com/dsh-dev/dsh/internal/sandbox"
	"github.com/dsh-dev/dsh/internal/tool"
)

// realBackends runs f once per real backend that works here, with a bash
// tool confining commands through it in mode (workspace: the harness's
// cwd) and a job registry for background calls: per call (the backend
// itself) and through a session's sandbox server (what dsh uses).
func realBackends(t *testing.T, mode sandbox.Mode, roots []string, f func(t *testing.T, h *harness, r *jobs.Registry)) {
	for _, b := range []sandbox.Backend{sandbox.NewBwrap(""), sandbox.NewLandlock("")} {
		for _, via := range []string{"per-call", "server"} {
			t.Run(b.Name()+"/"+via, func(t *testing.T) {
				if err := b.Probe(); err != nil {
					t.Skipf("%s unavailable: %v", b.Name(), err)
				}
				r := newJobs(t, jobs.Options{})
				var sb interface {
					Confine([]string, sandbox.Policy) (sandbox.Confined, error)
				} = b
				if via == "server" {
					ss := sandbox.New(b).Session()
					t.Cleanup(func() { ss.Close() })
					sb = ss
				}
				var h *harness
				confine := func(c *tool.Call, argv []string) (Confinement, error) {
					p := sandbox.Policy{Mode: mode, Workspace: h.cwd, WritableRoots: roots}
					cf, err := sb.Confine(argv, p)
					if via == "server" && err == nil && cf.Run == nil {
						t.Errorf("%s: no server for %v", b.Name(), p)
					}
					return Confinement{Confined: cf, Policy: p}, err
				}
				h = newHarness(t, Options{Jobs: r, Confine: confine})
				f(t, h, r)
			})
		}
	}
}

// A command cannot smuggle the API key out of dsh, encoded or not: it is
// neither in the command's environment nor readable from dsh's /proc
// entries (this test binary plays dsh and is hardened in TestMain).
func TestRealSandboxAPIKeyUnreachable(t *testing.T) {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	key := hex.EncodeToString(b)
	t.Setenv("DEEPSEEK_API_KEY", key)
	script := `all=$(for p in /proc/[0-9]*; do tr '\0' '\n' < $p/environ; done 2>/dev/null; tr '\0' '\n' < /proc/$PPID/environ 2>/dev/null; env)
echo "B64:$(printf '%s' "$all" | base64 -w0)"
echo "REV:$(printf '%s' "$all" | rev | tr '\n' ' ')"`
	for _, mode := range []sandbox.Mode{sandbox.ReadOnly, sandbox.WorkspaceWrite} {
		t.Run(string(mode), func(t *testing.T) {
			realBackends(t, mode, nil, func(t *testing.T, h *harness, _ *jobs.Registry) {
				res := h.run(context.Background(), t, map[string]any{"command": script})
				out := text(res)
				var loot strings.Builder
				for line := range strings.SplitSeq(out, "\n") {
					if v, ok := strings.CutPrefix(line, "B64:"); ok {
						d, _ := base64.StdEncoding.DecodeString(v)
						loot.Write(d)
					}
					if v, ok := strings.CutPrefix(line, "REV:"); ok {
						r := []rune(v)
						slices.Reverse(r)
						loot.WriteString(string(r))
					}
				}
				if !strings.Contains(loot.String(), "PATH=") {
					t.Fatalf("the attack did not run: %s", out)
				}
				if strings.Contains(loot.String(), key) || strings.Contains(out, key) {
					t.Fatalf("the API key leaked:\n%s", loot.String())
				}
			})
		})
	}
}

// escapes starts processes that try to outlive the call, each a sleep
// whose argument is the marker, and waits until they all run.
func escapes(marker string) string {
	return fmt.Sprintf(`setsid sleep %[1]s </dev/null >/dev/null 2>&1 &
nohup sleep %[1]s </dev/null >/dev/null 2>&1 &
( (sleep %[1]s </dev/null >/dev/null 2>&1 &) & )
until [ "$(pgrep -fx "sleep %[1]s" | wc -l)" -ge 3 ]; do :; done
echo ready
`, marker)
}

func newMarker(t *testing.T) string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return fmt.Sprintf("1000.%d", int(b[0])<<24|int(b[1])<<16|int(b[2])<<8|int(b[3]))
}

// requireNoneLeft fails when a process whose command line holds marker
// is still running once each has been waited for (through a pidfd).
func requireNoneLeft(t *testing.T, marker string) {
	t.Helper()
	if left := proctest.Survivors(marker, exitWait); len(left) > 0 {
		t.Fatalf("processes %v outlived their call", left)
	}
}

// Nothing a foreground call starts outlives it, nothing a background job
// starts outlives the job when it is killed or its owner goes away.
func TestRealSandboxNothingOutlives(t *testing.T) {
	if _, err := exec.LookPath("pgrep"); err != nil {
		t.Skip("no pgrep")
	}
	realBackends(t, sandbox.WorkspaceWrite, nil, func(t *testing.T, h *harness, r *jobs.Registry) {
		t.Run("foreground", func(t *testing.T) {
			m := newMarker(t)
			res := h.run(context.Background(), t, map[string]any{"command": escapes(m)})
			if !strings.Contains(text(res), "ready") || res.IsError {
				t.Fatalf("call: %s", text(res))
			}
			requireNoneLeft(t, m)
		})
		for _, how := range []string{"killed", "owner gone"} {
			t.Run("background "+how, func(t *testing.T) {
				m := newMarker(t)
				j := startJob(t, h, r, map[string]any{"command": escapes(m) + "exec sleep " + m})
				ctx, cancel := context.WithTimeout(context.Background(), exitWait)
				defer cancel()
				for {
					out, _, _, _ := r.Output(j.ID, 0)
					if strings.Contains(string(out), "ready") {
						break
					}
					if _, err := r.WaitOutput(ctx, j.ID, int64(len(out))); err != nil {
						t.Fatalf("no readiness: %v", err)
					}
				}
				if how == "killed" {
					if _, err := r.Kill(ctx, j.ID); err != nil {
						t.Fatal(err)
					}
				} else {
					r.CancelOwner("sess-42")
				}
				if j, _ := waitJob(t, r, j.ID); !j.Status.Terminal() {
					t.Fatalf("job %s", j.Summary())
				}
				requireNoneLeft(t, m)
			})
		}
	})
}

// What the sandbox must still allow: workspace writes, git, and go test
// with its build cache granted as a writable root (the host's, so that
// the test does not rebuild the standard library).
func TestRealSandboxAllowed(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go toolchain")
	}
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	b, err := exec.Command(gobin, "env", "GOCACHE").Output()
	cache := strings.TrimSpace(string(b))
	if err != nil || cache == "" || cache == "off" {
		t.Skip("no go build cache")
	}
	if r, err := filepath.EvalSymlinks(cache); err == nil {
		cache = r
	}
	realBackends(t, sandbox.WorkspaceWrite, []string{cache}, func(t *testing.T, h *harness, _ *jobs.Registry) {
		ws := h.cwd
		gitCmd := func(args ...string) {
			c := exec.Command("git", append([]string{"-C", ws, "-c", "user.name=t", "-c", "user.email=t@t"}, args...)...)
			if out, err := c.CombinedOutput(); err != nil {
				t.Fatalf("git %v: %v %s", args, err, out)
			}
		}
		mustWriteFile(t, filepath.Join(ws, "go.mod"), "module example.com/m\n\ngo 1.22\n")
		mustWriteFile(t, filepath.Join(ws, "m_test.go"), "package m\n\nimport \"testing\"\n\nfunc TestOK(t *testing.T) {}\n")
		gitCmd("init", "-q")
		gitCmd("add", ".")
		gitCmd("commit", "-qm", "init")
		script := fmt.Sprintf(`set -e
mkdir -p sub && echo hi > sub/file && cat sub/file
git status --short && git log --oneline | wc -l
GOCACHE=%s GOTOOLCHAIN=local GOPROXY=off %s test -count=1 ./... 2>&1 | tail -1`, cache, gobin)
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		res := h.run(ctx, t, map[string]any{"command": script, "timeout_ms": 170000})
		out := text(res)
		if res.IsError || !strings.Contains(out, "hi\n") || !strings.Contains(out, "?? sub/") || !strings.Contains(out, "ok  \texample.com/m") {
			t.Fatalf("allowed things failed:\n%s", out)
		}
	})
}

func mustWriteFile(t *testing.T, p, s string) {
	t.Helper()
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

// danger-full-access runs unconfined, yet nothing a call starts outlives
// it: the sandbox supervises the command (sandbox.Sandbox.Supervise).
// Per call and through the session's lifetime-only server.
func TestFullAccessNothingOutlives(t *testing.T) {
	if _, err := exec.LookPath("pgrep"); err != nil {
		t.Skip("no pgrep")
	}
	for _, via := range []string{"per-call", "server"} {
		t.Run(via, func(t *testing.T) {
			var sb interface {
				Supervise([]string) sandbox.Confined
			} = sandbox.New()
			if via == "server" {
				ss := sandbox.New().Session()
				t.Cleanup(func() { ss.Close() })
				sb = ss
			}
			h := newHarness(t, Options{Confine: func(c *tool.Call, argv []string) (Confinement, error) {
				cf := sb.Supervise(argv)
				if via == "server" && cf.Run == nil {
					t.Error("no server")
				}
				return Confinement{Confined: cf, Policy: sandbox.Policy{Mode: sandbox.DangerFullAccess}}, nil
			}})
			for range 2 {
				m := newMarker(t)
				res := h.run(context.Background(), t, map[string]any{"command": escapes(m) + "\necho $PPID > /dev/null; touch " + filepath.Join(h.cwd, "..", "outside-"+m)})
				if !strings.Contains(text(res), "ready") || res.IsError {
					t.Fatalf("call: %s", text(res))
				}
				if _, err := os.Stat(filepath.Join(h.cwd, "..", "outside-"+m)); err != nil {
					t.Fatalf("full access could not write outside the workspace: %s", text(res))
				}
				requireNoneLeft(t, m)
			}
		})
	}
}
