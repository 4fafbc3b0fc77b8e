//go:build linux && (amd64 || arm64 || riscv64 || loong64)

package sandbox

import (
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/dsh-dev/dsh/internal/proc"
)

// socketFixture is a workspace fixture with socket servers inside the
// workspace, outside it, and in a directory a profile allows.
type socketFixture struct {
	fixture
	inS, outS, outD, agentS *sockServer
	link                    string
}

func newSocketFixture(t testing.TB) socketFixture {
	t.Helper()
	f := socketFixture{fixture: newFixture(t)}
	f.inS = serveStream(t, filepath.Join(f.ws, "src", "s"))
	f.outS = serveStream(t, filepath.Join(f.outside, "s"))
	f.outD = serveDgram(t, filepath.Join(f.outside, "d"))
	agent := filepath.Join(f.root, "agent")
	mustMkdir(t, agent)
	f.agentS = serveStream(t, filepath.Join(agent, "sock"))
	f.link = filepath.Join(f.ws, "src", "link")
	if err := os.Symlink(f.outS.path, f.link); err != nil {
		t.Fatal(err)
	}
	return f
}

// gatedSocketBackends runs f for every working backend, where the gate
// works, with this test binary (the gate's client, gateClientArg) and a
// fresh socket fixture outside the temp dirs (which workspace-write
// allows).
func gatedSocketBackends(t *testing.T, f func(t *testing.T, self string, b Backend, fx socketFixture)) {
	t.Helper()
	requireGate(t)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range realBackends() {
		t.Run(b.Name(), func(t *testing.T) {
			requireWorking(t, b)
			fx := newSocketFixture(t)
			if !fx.outsideTemp {
				t.Skipf("fixture %s lies in a temp dir, which workspace-write allows", fx.root)
			}
			f(t, self, b, fx)
		})
	}
}

// Under both backends, in read-only and workspace-write, a command
// cannot reach a UNIX socket outside the workspace unless the policy
// lists it; inside the workspace sockets work; danger-full-access is
// not gated.
func TestConfineUnixSockets(t *testing.T) {
	gatedSocketBackends(t, func(t *testing.T, self string, b Backend, f socketFixture) {
		src := filepath.Join(f.ws, "src")
		// A host daemon's socket in the shared /tmp (like tmux's) and
		// one in the private TMPDIR the sandbox gives commands.
		shared := serveStream(t, filepath.Join(t.TempDir(), "tmux.sock"))
		scratch, err := scratchDir()
		if err != nil {
			t.Fatal(err)
		}
		private := serveStream(t, filepath.Join(scratch, strings.ReplaceAll(t.Name(), "/", "_")+".sock"))
		t.Cleanup(func() { os.Remove(private.path) })
		abstract := serveStream(t, "@dsh-gate-test-host-"+strings.ReplaceAll(t.Name(), "/", "_"))
		tests := []struct {
			name    string
			mode    Mode
			roots   []string
			allow   []string
			network bool
			dir     string
			args    []string
			ok      bool
			refused string
		}{
			{"ws/outside", WorkspaceWrite, nil, nil, false, "/", []string{"connect", f.outS.path}, false, f.outS.path},
			{"ro/outside", ReadOnly, nil, nil, false, "/", []string{"connect", f.outS.path}, false, f.outS.path},
			{"ws/outside with network", WorkspaceWrite, nil, nil, true, "/", []string{"connect", f.outS.path}, false, f.outS.path},
			{"ws/inside", WorkspaceWrite, nil, nil, false, "/", []string{"connect", f.inS.path}, true, ""},
			{"ro/inside", ReadOnly, nil, nil, false, "/", []string{"connect", f.inS.path}, true, ""},
			{"ws/allowed socket", WorkspaceWrite, nil, []string{f.agentS.path}, false, "/", []string{"connect", f.agentS.path}, true, ""},
			{"ro/allowed dir", ReadOnly, nil, []string{filepath.Dir(f.agentS.path)}, false, "/", []string{"connect", f.agentS.path}, true, ""},
			{"ws/symlink to outside", WorkspaceWrite, nil, nil, false, "/", []string{"connect", f.link}, false, f.outS.path},
			{"ro/relative", ReadOnly, nil, nil, false, src, []string{"connect", "s"}, true, ""},
			{"ws/relative escaping", WorkspaceWrite, nil, nil, false, src, []string{"connect", "../../outside/s"}, false, f.outS.path},
			{"ws/datagram outside", WorkspaceWrite, nil, nil, false, "/", []string{"sendto", f.outD.path}, false, f.outD.path},
			{"ro/datagram outside", ReadOnly, nil, nil, false, "/", []string{"sendmsg", f.outD.path}, false, f.outD.path},
			{"ws/writable root", WorkspaceWrite, []string{filepath.Dir(f.agentS.path)}, nil, false, "/", []string{"connect", f.agentS.path}, true, ""},
			{"ro/writable root does not count", ReadOnly, []string{filepath.Dir(f.agentS.path)}, nil, false, "/", []string{"connect", f.agentS.path}, false, f.agentS.path},
			{"ws/shared temp dir", WorkspaceWrite, nil, nil, false, "/", []string{"connect", shared.path}, false, shared.path},
			{"ws/private TMPDIR", WorkspaceWrite, nil, nil, false, "/", []string{"connect", private.path}, true, ""},
			{"ro/private TMPDIR", ReadOnly, nil, nil, false, "/", []string{"connect", private.path}, true, ""},
			{"ws/socket in TMPDIR", WorkspaceWrite, nil, nil, false, "/", []string{"selfconnect"}, true, ""},
			{"ro/socket in TMPDIR", ReadOnly, nil, nil, false, "/", []string{"selfconnect"}, true, ""},
			// Abstract sockets keep their handling: Landlock's scope or
			// bwrap's network namespace, both lifted with network.
			{"ws/host abstract socket", WorkspaceWrite, nil, nil, false, "/", []string{"abstract", abstract.path[1:]}, false, ""},
			{"ws/host abstract socket with network", WorkspaceWrite, nil, nil, true, "/", []string{"abstract", abstract.path[1:]}, true, ""},
			{"ro/abstract socket inside", ReadOnly, nil, nil, false, "/", []string{"selfabstract"}, true, ""},
			{"danger/outside", DangerFullAccess, nil, nil, false, "/", []string{"connect", f.outS.path}, true, ""},
		}
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				p := Policy{Mode: tc.mode, Workspace: f.ws, WritableRoots: tc.roots, UnixSockets: tc.allow, Network: tc.network}
				c, err := b.Confine(append([]string{self, gateClientArg}, tc.args...), p)
				if err != nil {
					t.Fatal(err)
				}
				code, out := run(t, c, tc.dir)
				if (code == 0) != tc.ok {
					t.Fatalf("exit %d, want success=%v\nargv %q\noutput: %s", code, tc.ok, c.Argv, out)
				}
				if tc.ok || tc.refused == "" {
					return
				}
				if !strings.Contains(out, SocketDeniedPrefix+tc.refused+"\n") || !strings.Contains(out, "EACCES") {
					t.Errorf("output %q does not report the refusal of %s", out, tc.refused)
				}
				if !c.Denied(code, []byte(out)) {
					t.Errorf("Denied did not recognise the refusal: %q", out)
				}
			})
		}
	})
}

// The tools a coding agent runs most still work under the gate: git
// status (its .git stays read-only) and go test with its build cache, which lives in a
// writable root.
func TestConfineToolsUnderGate(t *testing.T) {
	requireBash(t)
	for _, tool := range []string{"git", "go"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed", tool)
		}
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		t.Skip("no user cache dir")
	}
	for _, b := range realBackends() {
		t.Run(b.Name(), func(t *testing.T) {
			requireWorking(t, b)
			ws, _ := testRoot(t)
			mustWrite(t, filepath.Join(ws, "go.mod"), "module example.com/m\n\ngo 1.21\n")
			mustWrite(t, filepath.Join(ws, "m_test.go"), "package m\n\nimport \"testing\"\n\nfunc TestM(t *testing.T) {}\n")
			if out, err := exec.Command("git", "-C", ws, "init", "-q").CombinedOutput(); err != nil {
				t.Fatalf("git init: %v: %s", err, out)
			}
			script := `git status --short && go test -count=1 ./...`
			p := Policy{Mode: WorkspaceWrite, Workspace: ws, WritableRoots: []string{cache}}
			c, err := b.Confine([]string{"bash", "-c", script}, p)
			if err != nil {
				t.Fatal(err)
			}
			if code, out := run(t, c, ws); code != 0 {
				t.Fatalf("exit %d: %s", code, out)
			}
		})
	}
}

// The helper that serves the gate stands in for the command: its exit
// code comes through unchanged, a death by signal as 128+n (the helper is
// pid 1 of its namespace and cannot re-raise it), and a descriptor the
// spawner leaks does not reach the command.
func TestGatedHelperIsTransparent(t *testing.T) {
	requireBash(t)
	requireGate(t)
	for _, b := range realBackends() {
		t.Run(b.Name(), func(t *testing.T) {
			requireWorking(t, b)
			confine := func(script string) *exec.Cmd {
				c, err := b.Confine([]string{"bash", "-c", script}, Policy{Mode: ReadOnly})
				if err != nil {
					t.Fatal(err)
				}
				return command(c)
			}
			var ee *exec.ExitError
			if err := confine("exit 7").Run(); !errors.As(err, &ee) || ee.ExitCode() != 7 {
				t.Errorf("exit 7: %v", err)
			}
			if err := confine("kill -KILL $$").Run(); !errors.As(err, &ee) || ee.ExitCode() != 128+int(syscall.SIGKILL) {
				t.Errorf("kill -KILL $$: %v", err)
			}
			r, w, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			cmd := confine("echo through-fd3 >&3 2>/dev/null && echo leaked")
			cmd.ExtraFiles = []*os.File{w}
			out, err := cmd.Output()
			w.Close()
			leaked, _ := io.ReadAll(r)
			if err == nil || len(leaked) != 0 || strings.Contains(string(out), "leaked") {
				t.Errorf("fd 3 reached the command: %v, %q, %q", err, out, leaked)
			}
		})
	}
}

// A double-forked process of the command is still served (the helper is
// its subreaper, so it stays a descendant) and still refused outside.
func TestGateServesOrphans(t *testing.T) {
	requireBash(t)
	gatedSocketBackends(t, func(t *testing.T, self string, b Backend, f socketFixture) {
		// The orphan reports through a FIFO that the command reads,
		// so the command outlives it.
		script := `fifo="$WS/src/fifo" && mkfifo "$fifo" && ` +
			`( ( "$SELF" ` + gateClientArg + ` connect "$IN"; "$SELF" ` + gateClientArg + ` connect "$OUT" ) > "$fifo" 2>&1 & ) && cat "$fifo"`
		c, err := b.Confine([]string{"bash", "-c", script}, Policy{Mode: WorkspaceWrite, Workspace: f.ws})
		if err != nil {
			t.Fatal(err)
		}
		code, out := run(t, c, f.ws, "SELF="+self, "WS="+f.ws, "IN="+f.inS.path, "OUT="+f.outS.path)
		if code != 0 || !strings.HasPrefix(out, "ok\n") || !strings.Contains(out, "EACCES") {
			t.Fatalf("exit %d, output %q; want the orphan connected inside and refused outside", code, out)
		}
		f.inS.wait(1)
		if got := f.outS.got(); len(got) != 0 {
			t.Fatalf("outside server reached: %q", got)
		}
	})
}

// A command running as root loses the capabilities that would undo the
// sandbox from below: mounting (bwrap leaves root CAP_SYS_ADMIN, enough
// to remount the host root read-write or bind an outside socket into the
// workspace) and device nodes.
func TestGatedCommandLosesHostCaps(t *testing.T) {
	requireBash(t)
	requireGate(t)
	if os.Geteuid() != 0 {
		t.Skip("only root holds these capabilities")
	}
	for _, b := range realBackends() {
		t.Run(b.Name(), func(t *testing.T) {
			requireWorking(t, b)
			f := newFixture(t)
			for _, script := range []string{
				`mount -o remount,bind,rw /`,
				`mount --bind "$OUTSIDE" "$WS/src"`,
				`mknod "$WS/src/null" c 1 3`,
			} {
				c, err := b.Confine([]string{"bash", "-c", script}, Policy{Mode: WorkspaceWrite, Workspace: f.ws})
				if err != nil {
					t.Fatal(err)
				}
				if code, out := run(t, c, f.ws, "WS="+f.ws, "OUTSIDE="+f.outside); code == 0 {
					t.Errorf("%s succeeded: %s", script, out)
				}
			}
			if _, err := os.Stat(filepath.Join(f.ws, "src", "null")); err == nil {
				t.Error("a device node was made in the workspace")
			}
		})
	}
}

// A command cannot give an outside socket a name inside the workspace:
// a hard link crosses a mount (bwrap) or gains rights (Landlock), and a
// rename needs write access to the outside directory.
func TestGateOutsideSocketCannotBeRenamedIn(t *testing.T) {
	requireBash(t)
	gatedSocketBackends(t, func(t *testing.T, self string, b Backend, f socketFixture) {
		script := `ln "$OUT" "$WS/src/hl" || mv "$OUT" "$WS/src/hl"; "$SELF" ` + gateClientArg + ` connect "$WS/src/hl"`
		c, err := b.Confine([]string{"bash", "-c", script}, Policy{Mode: WorkspaceWrite, Workspace: f.ws})
		if err != nil {
			t.Fatal(err)
		}
		code, out := run(t, c, f.ws, "SELF="+self, "WS="+f.ws, "OUT="+f.outS.path)
		if code == 0 || len(f.outS.got()) != 0 {
			t.Fatalf("exit %d, output %q: the outside socket was reached through the workspace", code, out)
		}
		if _, err := os.Stat(f.outS.path); err != nil {
			t.Fatalf("the outside socket was moved: %v", err)
		}
	})
}

// Through a session's server, whose confined thread serves command after
// command: each command's refused socket is reported on its own output
// and nowhere else, and what the gate allows still works after a refusal.
func TestServerGateAcrossCommands(t *testing.T) {
	gatedSocketBackends(t, func(t *testing.T, self string, b Backend, f socketFixture) {
		ss := New(b).Session()
		t.Cleanup(func() { ss.Close() })
		p := Policy{Mode: WorkspaceWrite, Workspace: f.ws}
		run := func(args ...string) (int, string) {
			t.Helper()
			c, err := ss.Confine(append([]string{self, gateClientArg}, args...), p)
			if err != nil {
				t.Fatal(err)
			}
			if c.Run == nil {
				t.Fatal("no server for the command")
			}
			out, err := c.Run(t.Context(), proc.Spec{Argv: c.Argv, Dir: f.ws, Env: proc.EnvPolicy{Exact: os.Environ()}, SysProcAttr: c.ProcAttr})
			if err != nil {
				t.Fatal(err)
			}
			return out.ExitCode, string(out.Output)
		}
		for round := range 3 {
			code, out := run("connect", f.outS.path)
			if code == 0 || strings.Count(out, SocketDeniedPrefix) != 1 || !strings.Contains(out, SocketDeniedPrefix+f.outS.path+"\n") {
				t.Fatalf("round %d, outside socket: exit %d %q", round, code, out)
			}
			code, out = run("connect", f.inS.path)
			if code != 0 || strings.Contains(out, SocketDeniedPrefix) {
				t.Fatalf("round %d, workspace socket: exit %d %q", round, code, out)
			}
		}
		if n := ss.served.Load(); n != 6 {
			t.Fatalf("the server ran %d of 6 commands", n)
		}
	})
}
