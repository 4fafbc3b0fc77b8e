//go:build linux && (amd64 || arm64 || riscv64 || loong64)

package sandbox

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dsh-dev/dsh/internal/proc"
)

// sessionRun runs a bash script confined by ss under p, in dir, through
// the session's server when it has one (served) or per call, and
// returns its output.
func sessionRun(t *testing.T, ss *Session, p Policy, dir, script string, env ...string) proc.Outcome {
	t.Helper()
	c, err := ss.Confine([]string{"bash", "-c", script}, p)
	if err != nil {
		t.Fatal(err)
	}
	if ss.perCall != (c.Run == nil) {
		t.Fatalf("%s: served %v, want %v", c.Backend, c.Run != nil, !ss.perCall)
	}
	spec := proc.Spec{Argv: c.Argv, Dir: dir, Env: proc.EnvPolicy{Exact: append(os.Environ(), env...)},
		SysProcAttr: c.ProcAttr, KillGrace: 500 * time.Millisecond}
	ctx := t.Context()
	run := proc.Run
	if c.Run != nil {
		run = c.Run
	}
	out, err := run(ctx, spec)
	if err != nil {
		t.Fatalf("run %q: %v", script, err)
	}
	return out
}

// sessionModes runs f for every working backend, through the session
// server and per call (DSH_SANDBOX_SERVER=0), each with a fresh session.
func sessionModes(t *testing.T, f func(t *testing.T, ss *Session)) {
	t.Helper()
	requireBash(t)
	for _, b := range realBackends() {
		t.Run(b.Name(), func(t *testing.T) {
			requireWorking(t, b)
			for _, served := range []bool{true, false} {
				name := "served"
				if !served {
					name = "per-call"
				}
				t.Run(name, func(t *testing.T) {
					ss := New(b).Session()
					ss.perCall = !served
					t.Cleanup(func() { ss.Close() })
					f(t, ss)
				})
			}
		})
	}
}

// hostAgent is a host daemon's socket in a directory of its own in the
// shared temp dir base, as ssh-agent keeps it (/tmp/ssh-XXXX/agent.N).
func hostAgent(t *testing.T, base string) (dir string, s *sockServer) {
	t.Helper()
	dir, err := os.MkdirTemp(base, "dsh-test-agent-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir, serveStream(t, filepath.Join(dir, "agent.sock"))
}

// A host socket hard-linked or moved (alone or with its directory) into
// the command's TMPDIR, the workspace or a writable root does not become
// reachable: under bubblewrap TMPDIR, the workspace and the roots are
// mounts of their own (EXDEV), under Landlock only they may have files
// moved in (REFER). Sockets that commands create there still work.
func TestGateRefusesSmuggledHostSocket(t *testing.T) {
	requireGate(t)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	client := `"$SELF" ` + gateClientArg + ` connect`
	attacks := []struct {
		name     string
		mode     Mode
		script   string
		reaching string // the path the attack connects to
		tempWS   bool   // the workspace lies in the temp dir, beside the agent's
	}{
		// Renames within one directory need no right to move files
		// between directories: the agent's directory takes the name of
		// TMPDIR, or of a workspace in the same temp dir.
		{"ws/rename its directory to TMPDIR's name", WorkspaceWrite, `mv "$TMPDIR" "$TMPDIR.old" && mv "$HOSTDIR" "$TMPDIR"`, "$TMPDIR/agent.sock", false},
		{"ro/rename its directory to TMPDIR's name", ReadOnly, `mv "$TMPDIR" "$TMPDIR.old" && mv "$HOSTDIR" "$TMPDIR"`, "$TMPDIR/agent.sock", false},
		{"ws/rename its directory to the workspace's name", WorkspaceWrite, `cd / && mv "$WS" "$WS.old" && mv "$HOSTDIR" "$WS"`, "$WS/agent.sock", true},
		// A mount in a user namespace of the command's own (possible
		// inside bubblewrap), reached by a relative path.
		{"ws/bind mount in a namespace of its own", WorkspaceWrite, `mkdir "$TMPDIR/m" && unshare -Urm sh -c 'mount --bind "$HOSTDIR" "$TMPDIR/m" && cd "$TMPDIR/m" && "$SELF" ` + gateClientArg + ` connect agent.sock && echo REACHED'`, "$TMPDIR/m/agent.sock", false},
		{"ws/link into TMPDIR", WorkspaceWrite, `ln "$SOCK" "$TMPDIR/a"`, "$TMPDIR/a", false},
		{"ws/move into TMPDIR", WorkspaceWrite, `mv "$SOCK" "$TMPDIR/a"`, "$TMPDIR/a", false},
		{"ws/move its directory into TMPDIR", WorkspaceWrite, `mv "$HOSTDIR" "$TMPDIR/d"`, "$TMPDIR/d/agent.sock", false},
		{"ws/link into the workspace", WorkspaceWrite, `ln "$SOCK" "$WS/a"`, "$WS/a", false},
		{"ws/move into the workspace", WorkspaceWrite, `mv "$SOCK" "$WS/a"`, "$WS/a", false},
		{"ws/link into a writable root", WorkspaceWrite, `ln "$SOCK" "$WR/a"`, "$WR/a", false},
		{"ws/move into a writable root", WorkspaceWrite, `mv "$SOCK" "$WR/a"`, "$WR/a", false},
		{"ws/link through a symlinked name", WorkspaceWrite, `ln -L "$WS/l" "$TMPDIR/a"`, "$TMPDIR/a", false},
		{"ro/link into TMPDIR", ReadOnly, `ln "$SOCK" "$TMPDIR/a"`, "$TMPDIR/a", false},
		{"ro/move into TMPDIR", ReadOnly, `mv "$SOCK" "$TMPDIR/a"`, "$TMPDIR/a", false},
	}
	sessionModes(t, func(t *testing.T, ss *Session) {
		f := newFixture(t)
		wr := filepath.Join(f.root, "wr")
		mustMkdir(t, wr)
		// The agent lives in the temp dir that holds the session's
		// TMPDIR (/tmp, as in production; TestMain's TMPDIR here), and,
		// for the plain link, in /tmp.
		for _, base := range []string{os.TempDir(), "/tmp"} {
			for _, a := range attacks {
				if base == "/tmp" && a.name != "ws/link into TMPDIR" {
					continue
				}
				// Per call, the mounts and rules are the server's: the
				// ways into TMPDIR are enough there.
				if ss.perCall && !strings.Contains(a.name, "TMPDIR") && !strings.Contains(a.name, "mount") {
					continue
				}
				t.Run(a.name+" from "+strings.ReplaceAll(base, "/", "_"), func(t *testing.T) {
					ws := f.ws
					if a.tempWS {
						ws = tempWorkspace(t, base)
					}
					smuggle(t, ss, ws, wr, base, a.mode, a.script, a.reaching, self, client)
				})
			}
		}
		// What commands create themselves stays reachable: a socket in
		// TMPDIR, one in the workspace, and one moved within TMPDIR and
		// from the workspace into TMPDIR.
		p := Policy{Mode: WorkspaceWrite, Workspace: f.ws, WritableRoots: []string{wr}}
		self := `"$SELF" ` + gateClientArg
		for _, script := range []string{
			self + ` selfconnect`,
			`TMPDIR="$WS/src" ` + self + ` selfconnect`,
			`TMPDIR="$WR" ` + self + ` selfconnect`,
			`echo x > "$WS/src/f" && mkdir -p "$TMPDIR/x/y" && mv "$TMPDIR/x" "$TMPDIR/z" && mv "$WS/src/f" "$TMPDIR/z/y/" && mv "$TMPDIR/z/y/f" "$WS/src/" && TMPDIR="$TMPDIR/z/y" ` + self + ` selfconnect`,
		} {
			out := sessionRun(t, ss, p, f.ws, script, "SELF="+os.Args[0], "WS="+f.ws, "WR="+wr)
			if out.ExitCode != 0 || !strings.Contains(string(out.Output), "ok ") {
				t.Fatalf("%s: exit %d: %s", script, out.ExitCode, out.Output)
			}
		}
		p.Mode = ReadOnly
		if out := sessionRun(t, ss, p, f.ws, self+" selfconnect", "SELF="+os.Args[0]); out.ExitCode != 0 {
			t.Fatalf("read-only selfconnect: exit %d: %s", out.ExitCode, out.Output)
		}
	})
}

// Each session has a TMPDIR of its own, in read-only and workspace-write
// alike, whatever the backend and with or without the server: what one
// session leaves there is not in another's, a socket one binds there is
// refused to the other, and Close removes the directory.
func TestSessionTmpDirPrivate(t *testing.T) {
	requireGate(t)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	sessionModes(t, func(t *testing.T, a *Session) {
		f := newFixture(t)
		b := a.sb.Session()
		b.perCall = a.perCall
		ws := Policy{Mode: WorkspaceWrite, Workspace: f.ws}
		ro := Policy{Mode: ReadOnly}
		outA := sessionRun(t, a, ws, f.ws, `echo "$TMPDIR"; echo left > "$TMPDIR/left"; mkdir "$TMPDIR/locked"; touch "$TMPDIR/locked/f"; chmod 0 "$TMPDIR/locked"`)
		tmpA := strings.TrimSpace(string(outA.Output))
		roA := strings.TrimSpace(string(sessionRun(t, a, ro, f.ws, `echo "$TMPDIR"; cat "$TMPDIR/left"`).Output))
		if roA != tmpA+"\nleft" {
			t.Fatalf("read-only saw %q, want the session's TMPDIR %s and its file", roA, tmpA)
		}
		// A socket session a's command binds in its TMPDIR stays there
		// (the listener is the test's, standing for a background job).
		sockA := serveStream(t, filepath.Join(tmpA, "job.sock"))
		for _, p := range []Policy{ws, ro} {
			out := sessionRun(t, b, p, f.ws, `echo "$TMPDIR"; ls "$TMPDIR"; "$SELF" `+gateClientArg+` connect "$A/job.sock" && echo REACHED`, "SELF="+self, "A="+tmpA)
			s := string(out.Output)
			tmpB, _, _ := strings.Cut(s, "\n")
			if tmpB == tmpA || !strings.HasPrefix(tmpB, "/") || strings.Contains(s, "left") {
				t.Fatalf("session b's TMPDIR shows session a's: %q (a's is %s)", s, tmpA)
			}
			if strings.Contains(s, "REACHED") || len(sockA.got()) > 0 {
				t.Fatalf("session b reached a socket in session a's TMPDIR: %s", s)
			}
			if fi, err := os.Stat(tmpB); err != nil || fi.Mode().Perm() != 0o700 {
				t.Fatalf("TMPDIR %s: %v %v, want a 0700 directory", tmpB, fi, err)
			}
		}
		tmpB, err := b.TmpDir()
		if err != nil {
			t.Fatal(err)
		}
		for ss, dir := range map[*Session]string{a: tmpA, b: tmpB} {
			if err := ss.Close(); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Lstat(dir); !os.IsNotExist(err) {
				t.Fatalf("TMPDIR %s outlived its session: %v", dir, err)
			}
		}
	})
}

// smuggle runs one attack of TestGateRefusesSmuggledHostSocket against
// a fresh host agent in base.
func smuggle(t *testing.T, ss *Session, ws, wr, base string, mode Mode, attack, reaching, self, client string) {
	dir, agent := hostAgent(t, base)
	link := filepath.Join(ws, "l")
	os.Remove(link)
	if err := os.Symlink(agent.path, link); err != nil {
		t.Fatal(err)
	}
	tmp, err := ss.TmpDir()
	if err != nil {
		t.Fatal(err)
	}
	// Whatever the attack renamed is put back for the next one.
	t.Cleanup(func() {
		for _, d := range []string{tmp, ws} {
			if _, err := os.Stat(d + ".old"); err == nil {
				os.RemoveAll(d)
				os.Rename(d+".old", d)
			}
		}
	})
	p := Policy{Mode: mode, Workspace: ws, WritableRoots: []string{wr}}
	script := `( ` + attack + ` ); ls -l "` + reaching + `"; ` + client + ` "` + reaching + `" && echo REACHED; rm -rf "$TMPDIR"/* "$WS/a" "$WR/a"`
	out := sessionRun(t, ss, p, ws, script, "SELF="+self, "SOCK="+agent.path, "HOSTDIR="+dir, "WS="+ws, "WR="+wr)
	s := string(out.Output)
	if strings.Contains(s, "REACHED") || len(agent.got()) > 0 {
		t.Fatalf("the host socket was reached through %s: %s", reaching, s)
	}
}

// tempWorkspace is a workspace in the temp dir base, beside the host
// agent's directory.
func tempWorkspace(t *testing.T, base string) string {
	t.Helper()
	d, err := os.MkdirTemp(base, "dsh-test-ws-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d); os.RemoveAll(d + ".old") })
	d, err = resolvePath("/", d)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// A command that puts a host directory in the place of TMPDIR or of a
// workspace in the temp dir (renames within one directory) gains nothing
// for the next command either: the session starts a new TMPDIR, and the
// gate holds a root to the directory the session first saw there.
func TestGateRefusesReplacedRootLater(t *testing.T) {
	requireGate(t)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	sessionModes(t, func(t *testing.T, ss *Session) {
		for _, target := range []string{"TMPDIR", "WS"} {
			t.Run(target, func(t *testing.T) {
				dir, agent := hostAgent(t, os.TempDir())
				ws := tempWorkspace(t, os.TempDir())
				oldTmp, err := ss.TmpDir()
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { os.RemoveAll(oldTmp + ".old") })
				p := Policy{Mode: WorkspaceWrite, Workspace: ws}
				env := []string{"SELF=" + self, "HOSTDIR=" + dir, "WS=" + ws, "OLDTMP=" + oldTmp}
				probe := `"$SELF" ` + gateClientArg + ` connect "$` + target + `/agent.sock" && echo REACHED`
				// The first command sees the roots; the second replaces one.
				sessionRun(t, ss, p, ws, "true", env...)
				out := sessionRun(t, ss, p, "/", `cd / && mv "$`+target+`" "$`+target+`.old" && mv "$HOSTDIR" "$`+target+`" && echo replaced`, env...)
				t.Logf("%s", out.Output)
				if target == "TMPDIR" {
					env = append(env, "TMPDIR="+oldTmp) // the name the gate knew
				}
				out = sessionRun(t, ss, p, "/", `echo "now $TMPDIR"; `+probe+`; `+strings.ReplaceAll(probe, "$"+target, "$OLDTMP"), env...)
				if s := string(out.Output); strings.Contains(s, "REACHED") || len(agent.got()) > 0 {
					t.Fatalf("the next command reached the host socket: %s", s)
				}
				if tmp, err := ss.TmpDir(); err != nil || (target == "TMPDIR" && strings.Contains(string(out.Output), "replaced") && tmp == oldTmp) {
					t.Fatalf("the session kept a replaced TMPDIR %s: %v", tmp, err)
				}
			})
		}
	})
}

// The TMPDIRs of a dsh that died without closing its sessions (kill -9)
// are removed when the next session makes one; those of live processes
// and of other names stay.
func TestSessionTmpDirSweepsDead(t *testing.T) {
	base, err := resolvePath("/", os.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	dead := cmd.Process.Pid // reaped: no process has this pid now, or hardly
	uid := os.Getuid()
	stale := filepath.Join(base, fmt.Sprintf("%s%d-%d-123", sessionTmpPrefix, uid, dead))
	live := filepath.Join(base, fmt.Sprintf("%s%d-%d-456", sessionTmpPrefix, uid, os.Getpid()))
	other := filepath.Join(base, fmt.Sprintf("%s%d-x-789", sessionTmpPrefix, uid))
	for _, d := range []string{stale, live, other} {
		mustMkdir(t, filepath.Join(d, "sub"))
		t.Cleanup(func() { os.RemoveAll(d) })
	}
	ss := New().Session()
	dir, err := ss.TmpDir()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(stale); !os.IsNotExist(err) && !processAlive(dead) {
		t.Errorf("the dead dsh's TMPDIR %s stayed: %v", stale, err)
	}
	for _, d := range []string{live, other, dir} {
		if _, err := os.Lstat(d); err != nil {
			t.Errorf("%s was removed: %v", d, err)
		}
	}
	if err := ss.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(dir); !os.IsNotExist(err) {
		t.Errorf("Close left %s: %v", dir, err)
	}
}
