//go:build linux

package sandbox

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/dsh-dev/dsh/internal/proc"
)

// serverCase is a working backend's session for policy p in workspace
// dir, and a way to run bash commands through its server.
type serverCase struct {
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
// session's server.
func BenchmarkServerTrue(b *testing.B) {
	for _, be := range realBackends() {
		b.Run(be.Name(), func(b *testing.B) {
			requireWorking(b, be)
			ws := b.TempDir()
			ss := New(be).Session()
			defer ss.Close()
			p := Policy{Mode: WorkspaceWrite, Workspace: ws}
			for b.Loop() {
				c, err := ss.Confine([]string{"bash", "-c", "true"}, p)
				if err != nil {
					b.Fatal(err)
				}
				out, err := c.Run(b.Context(), proc.Spec{Argv: c.Argv, Dir: ws, Env: proc.EnvPolicy{Exact: os.Environ()}, SysProcAttr: c.ProcAttr})
				if err != nil || out.ExitCode != 0 {
					b.Fatalf("%v %d %s", err, out.ExitCode, out.Output)
				}
			}
			if ss.served.Load() == 0 {
				b.Fatal("not served")
			}
		})
	}
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
