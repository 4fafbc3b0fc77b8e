//go:build linux

package bench

import (
	"context"
	"encoding/base64"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"

	"github.com/dsh-dev/dsh/internal/proc"
	"github.com/dsh-dev/dsh/internal/sandbox"
)

// BenchmarkSandboxBreakdown takes one confined bash call apart: each
// sub-benchmark adds one layer of what a call costs, wall and CPU per
// call (the CPU of this process and its reaped children). The helper is
// the real dsh binary (built once), started as the backends start it.
// Layers: the shell alone (exec), through proc.Run (the /bin/sh gate,
// the guardian, the output pipe), under the dsh helper re-executed in
// lifetime-only mode (no namespace), the same in a new PID and mount
// namespace (what every per-call command pays), bubblewrap alone (its
// namespaces and mounts, no helper), the Landlock backend per call (the
// helper confining one thread) and the same commands through the
// session's server (Confine and Run, the server started once).
func BenchmarkSandboxBreakdown(b *testing.B) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		b.Skip("no bash")
	}
	self := dshBinary(b)
	ws := b.TempDir()
	argv := []string{bash, "-c", "echo hi"}
	env := proc.EnvPolicy{Exact: os.Environ()}
	runSpec := func(b *testing.B, spec proc.Spec) {
		out, err := proc.Run(context.Background(), spec)
		if err != nil || out.ExitCode != 0 {
			b.Fatalf("%v: exit %d: %s", err, out.ExitCode, out.Output)
		}
	}
	helper := func(spec string, argv []string) []string {
		return append([]string{self, sandbox.HelperArg, base64.RawURLEncoding.EncodeToString([]byte(spec)), "--"}, argv...)
	}
	pid := strconv.Itoa(os.Getpid())
	layers := []struct {
		name string
		run  func(b *testing.B)
	}{
		{"exec", func(b *testing.B) {
			if err := exec.Command(argv[0], argv[1:]...).Run(); err != nil {
				b.Fatal(err)
			}
		}},
		{"proc.Run", func(b *testing.B) { runSpec(b, proc.Spec{Argv: argv, Dir: ws, Env: env}) }},
		{"helper", func(b *testing.B) {
			runSpec(b, proc.Spec{Argv: helper(`{"lifetime":true,"parent":`+pid+`}`, argv), Dir: ws, Env: env})
		}},
		{"helper+pidns", func(b *testing.B) {
			runSpec(b, proc.Spec{Argv: helper(`{"lifetime":true,"ns":"pid","parent":`+pid+`}`, argv), Dir: ws, Env: env,
				SysProcAttr: func(a *syscall.SysProcAttr) { a.Cloneflags |= syscall.CLONE_NEWPID | syscall.CLONE_NEWNS }})
		}},
	}
	if bw, err := exec.LookPath("bwrap"); err == nil {
		layers = append(layers, struct {
			name string
			run  func(b *testing.B)
		}{"bwrap", func(b *testing.B) {
			a := append([]string{bw, "--die-with-parent", "--new-session", "--unshare-pid", "--unshare-net",
				"--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--bind", ws, ws, "--"}, argv...)
			runSpec(b, proc.Spec{Argv: a, Dir: ws, Env: env})
		}})
	}
	p := sandbox.Policy{Mode: sandbox.WorkspaceWrite, Workspace: ws}
	ll := sandbox.NewLandlock(self)
	if err := ll.Probe(); err == nil {
		layers = append(layers, struct {
			name string
			run  func(b *testing.B)
		}{"landlock/per-call", func(b *testing.B) {
			c, err := ll.Confine(argv, p)
			if err != nil {
				b.Fatal(err)
			}
			runSpec(b, proc.Spec{Argv: c.Argv, Dir: ws, Env: env, SysProcAttr: c.ProcAttr})
		}})
	}
	for _, l := range layers {
		b.Run(l.name, func(b *testing.B) {
			s := measure(func() {
				for b.Loop() {
					l.run(b)
				}
			})
			reportPerCall(b, s)
		})
	}
	if err := ll.Probe(); err == nil {
		b.Run("landlock/server", func(b *testing.B) {
			ss := sandbox.New(ll).Session()
			s := measure(func() {
				for b.Loop() {
					c, err := ss.Confine(argv, p)
					if err != nil || c.Run == nil {
						b.Fatalf("%v: no server", err)
					}
					out, err := c.Run(context.Background(), proc.Spec{Argv: c.Argv, Dir: ws, Env: env, SysProcAttr: c.ProcAttr})
					if err != nil || out.ExitCode != 0 {
						b.Fatalf("%v: exit %d: %s", err, out.ExitCode, out.Output)
					}
				}
				// The server's CPU (and its commands') counts once it is
				// reaped.
				ss.Close()
			})
			reportPerCall(b, s)
		})
	}
}

func reportPerCall(b *testing.B, s sample) {
	b.ReportMetric(float64(s.wall.Microseconds())/1000/float64(b.N), "wall-ms/call")
	b.ReportMetric(float64(s.cpu.Microseconds())/1000/float64(b.N), "cpu-ms/call")
}
