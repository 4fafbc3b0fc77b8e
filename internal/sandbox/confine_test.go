package sandbox

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// confineCase is one command run for real under each working backend.
type confineCase struct {
	name    string
	mode    Mode
	network bool
	script  string // bash; $WS, $OUTSIDE and $PORT are set
	ok      bool   // exits 0
	// landlockFails marks what Landlock refuses although the mode
	// allows it (see the Landlock doc: no new top-level entries in a
	// root holding .git).
	landlockFails bool
	// denied: a failure must be recognised by Confined.Denied.
	denied bool
	// needsOutside: the case is meaningful only when the fixture lies
	// outside every temp dir.
	needsOutside bool
}

var confineCases = []confineCase{
	// workspace-write
	{name: "ws/new file in subdir", mode: WorkspaceWrite, script: `echo x > "$WS/src/new.txt"`, ok: true},
	{name: "ws/overwrite top-level file", mode: WorkspaceWrite, script: `echo x > "$WS/README"`, ok: true},
	{name: "ws/create top-level file", mode: WorkspaceWrite, script: `echo x > "$WS/new-top"`, ok: true, landlockFails: true, denied: true, needsOutside: true},
	{name: "ws/nested mkdir", mode: WorkspaceWrite, script: `mkdir -p "$WS/src/a/b" && echo x > "$WS/src/a/b/c" && rm -r "$WS/src/a"`, ok: true},
	{name: "ws/move between dirs", mode: WorkspaceWrite, script: `mkdir "$WS/src/d1" "$WS/src/d2" && echo x > "$WS/src/d1/f" && mv "$WS/src/d1/f" "$WS/src/d2/f"`, ok: true},
	{name: "ws/write outside", mode: WorkspaceWrite, script: `echo x > "$OUTSIDE/new"`, denied: true, needsOutside: true},
	{name: "ws/overwrite outside", mode: WorkspaceWrite, script: `echo x > "$OUTSIDE/existing"`, denied: true, needsOutside: true},
	{name: "ws/append .git/config", mode: WorkspaceWrite, script: `echo x >> "$WS/.git/config"`, denied: true, needsOutside: true},
	{name: "ws/plant git hook", mode: WorkspaceWrite, script: `echo x > "$WS/.git/hooks/pre-commit"`, denied: true, needsOutside: true},
	{name: "ws/rename .git", mode: WorkspaceWrite, script: `mv "$WS/.git" "$WS/moved-git"`, denied: true, needsOutside: true},
	{name: "ws/temp dir", mode: WorkspaceWrite, script: `f=$(mktemp) && echo x > "$f" && rm "$f"`, ok: true},
	{name: "ws/dev null", mode: WorkspaceWrite, script: `echo x > /dev/null`, ok: true},
	{name: "ws/read outside", mode: WorkspaceWrite, script: `cat "$OUTSIDE/existing" /etc/passwd > /dev/null`, ok: true},

	// read-only blocks writes inside and outside, keeps a private TMPDIR
	{name: "ro/write workspace", mode: ReadOnly, script: `echo x > "$WS/src/new.txt"`, denied: true},
	{name: "ro/write outside", mode: ReadOnly, script: `echo x > "$OUTSIDE/new"`, denied: true},
	{name: "ro/write /tmp directly", mode: ReadOnly, script: `echo x > /tmp/dsh-ro-probe-$$`, denied: true},
	{name: "ro/mktemp in TMPDIR", mode: ReadOnly, script: `f=$(mktemp) && echo x > "$f" && rm "$f"`, ok: true},
	{name: "ro/read workspace", mode: ReadOnly, script: `cat "$WS/README" > /dev/null`, ok: true},

	// network
	{name: "net off/loopback listener", mode: WorkspaceWrite, script: `exec 3<>/dev/tcp/127.0.0.1/$PORT`},
	{name: "net off/remote address", mode: WorkspaceWrite, script: `exec 3<>/dev/tcp/192.0.2.1/9`, denied: true},
	{name: "net off/read-only", mode: ReadOnly, script: `exec 3<>/dev/tcp/127.0.0.1/$PORT`},
	{name: "net on/loopback listener", mode: WorkspaceWrite, network: true, script: `exec 3<>/dev/tcp/127.0.0.1/$PORT`, ok: true},

	// danger-full-access is not confined at all
	{name: "danger/write outside", mode: DangerFullAccess, script: `echo x > "$OUTSIDE/danger"`, ok: true},
	{name: "danger/write .git", mode: DangerFullAccess, script: `echo x >> "$WS/.git/config"`, ok: true},
}

func TestConfineRuns(t *testing.T) {
	requireBash(t)
	for _, b := range realBackends() {
		t.Run(b.Name(), func(t *testing.T) {
			requireWorking(t, b)
			port := listen(t)
			for _, tc := range confineCases {
				t.Run(tc.name, func(t *testing.T) {
					f := newFixture(t)
					if tc.needsOutside && !f.outsideTemp {
						t.Skipf("no directory outside the temp dirs for the fixture (%s)", f.root)
					}
					p := Policy{Mode: tc.mode, Workspace: f.ws, Network: tc.network}
					c, err := b.Confine([]string{"bash", "-c", tc.script}, p)
					if err != nil {
						t.Fatal(err)
					}
					code, out := run(t, c, f.ws, "WS="+f.ws, "OUTSIDE="+f.outside, "PORT="+port)
					wantOK := tc.ok && !(tc.landlockFails && b.Name() == "landlock")
					if (code == 0) != wantOK {
						t.Fatalf("exit %d, want success=%v\nargv: %q\noutput: %s", code, wantOK, c.Argv, out)
					}
					if !wantOK && tc.denied && !c.Denied(code, []byte(out)) {
						t.Errorf("Denied did not recognise the refusal: exit %d, output %q", code, out)
					}
					if wantOK && c.Denied(code, []byte(out)) {
						t.Errorf("Denied reports a successful command")
					}
				})
			}
		})
	}
}

func TestConfineReports(t *testing.T) {
	for _, b := range realBackends() {
		t.Run(b.Name(), func(t *testing.T) {
			requireWorking(t, b)
			f := newFixture(t)
			if !f.outsideTemp {
				t.Skipf("fixture %s lies in a temp dir", f.root)
			}
			for _, m := range []Mode{ReadOnly, WorkspaceWrite} {
				c, err := b.Confine([]string{"true"}, Policy{Mode: m, Workspace: f.ws})
				if err != nil {
					t.Fatal(err)
				}
				if c.Backend != b.Name() || c.Enforcement != Full || len(c.Gaps) != 0 {
					t.Errorf("%s: backend %q enforcement %q gaps %q, want %q full none", m, c.Backend, c.Enforcement, c.Gaps, b.Name())
				}
			}
			c, err := b.Confine([]string{"true"}, Policy{Mode: DangerFullAccess})
			if err != nil {
				t.Fatal(err)
			}
			if c.Backend != "none" || c.Enforcement != None || len(c.Argv) != 1 {
				t.Errorf("danger-full-access: %+v, want argv unchanged, backend none", c)
			}
		})
	}
}

// A workspace under /tmp is common in CI: bubblewrap still protects its
// .git, Landlock cannot (the temp dir is granted whole) and says so.
func TestGitUnderTempDir(t *testing.T) {
	requireBash(t)
	for _, b := range realBackends() {
		t.Run(b.Name(), func(t *testing.T) {
			requireWorking(t, b)
			ws, err := resolvePath("/", t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			if withinAny(ws, tempDirs()) == "" {
				t.Skip("t.TempDir() is not inside a temp dir here")
			}
			mustMkdir(t, filepath.Join(ws, ".git"))
			mustWrite(t, filepath.Join(ws, ".git", "config"), "")
			c, err := b.Confine([]string{"bash", "-c", `echo x >> .git/config`}, Policy{Mode: WorkspaceWrite, Workspace: ws})
			if err != nil {
				t.Fatal(err)
			}
			code, out := run(t, c, ws)
			switch b.Name() {
			case "bwrap":
				if code == 0 || !c.Denied(code, []byte(out)) || c.Enforcement != Full {
					t.Errorf("bwrap: exit %d (%s), enforcement %s; want denied, full", code, out, c.Enforcement)
				}
			case "landlock":
				if c.Enforcement != Partial || len(c.Gaps) != 1 || !strings.Contains(c.Gaps[0], ".git") {
					t.Errorf("landlock: enforcement %s gaps %q; want partial with the .git gap", c.Enforcement, c.Gaps)
				}
			}
		})
	}
}

// Without .git to protect, Landlock grants the workspace whole, so
// top-level entries can be created.
func TestLandlockWorkspaceWithoutGit(t *testing.T) {
	requireBash(t)
	b := NewLandlock("")
	requireWorking(t, b)
	root, _ := testRoot(t)
	c, err := b.Confine([]string{"bash", "-c", `echo x > new && mkdir d && mv new d/ && rm -r d`}, Policy{Mode: WorkspaceWrite, Workspace: root})
	if err != nil {
		t.Fatal(err)
	}
	if code, out := run(t, c, root); code != 0 {
		t.Fatalf("exit %d: %s", code, out)
	}
}

// LooseGit gives back top-level creation at the price of .git.
func TestLandlockLooseGit(t *testing.T) {
	requireBash(t)
	b := NewLandlock("")
	requireWorking(t, b)
	f := newFixture(t)
	b.LooseGit = true
	c, err := b.Confine([]string{"bash", "-c", `echo x > new-top && echo x >> .git/config`}, Policy{Mode: WorkspaceWrite, Workspace: f.ws})
	if err != nil {
		t.Fatal(err)
	}
	if code, out := run(t, c, f.ws); code != 0 {
		t.Fatalf("exit %d: %s", code, out)
	}
	if c.Enforcement != Partial || len(c.Gaps) == 0 {
		t.Errorf("enforcement %s gaps %q, want partial with a gap", c.Enforcement, c.Gaps)
	}
}

// bwrap's PID namespace hides host processes: PID 1 is bwrap's own
// init, and the test process does not exist inside.
func TestBwrapPIDNamespace(t *testing.T) {
	requireBash(t)
	b := NewBwrap("")
	requireWorking(t, b)
	c, err := b.Confine([]string{"bash", "-c", `cat /proc/1/comm; test -e /proc/$TESTPID && echo visible; true`}, Policy{Mode: ReadOnly})
	if err != nil {
		t.Fatal(err)
	}
	code, out := run(t, c, "/", "TESTPID="+strconv.Itoa(os.Getpid()))
	if code != 0 || strings.TrimSpace(out) != "bwrap" {
		t.Errorf("exit %d, output %q; want only PID 1 = bwrap", code, out)
	}
}

// With Landlock ABI ≥ 6, confined commands cannot signal processes
// outside the sandbox where there is no PID namespace to hide them.
func TestLandlockSignalScope(t *testing.T) {
	requireBash(t)
	requireWorking(t, NewLandlock(""))
	if landlockABI() < 6 {
		t.Skipf("Landlock ABI %d has no signal scoping", landlockABI())
	}
	none := nsNone
	b := &Landlock{ns: &none}
	c, err := b.Confine([]string{"bash", "-c", `kill -0 $TESTPID`}, Policy{Mode: ReadOnly})
	if err != nil {
		t.Fatal(err)
	}
	code, out := run(t, c, "/", "TESTPID="+strconv.Itoa(os.Getpid()))
	if code == 0 || !c.Denied(code, []byte(out)) {
		t.Errorf("exit %d, output %q; want a refused signal", code, out)
	}
}
