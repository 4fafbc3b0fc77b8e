package sandbox

import (
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
)

// realBackends are the backends the machine-level tests exercise, in
// Default's order.
func realBackends() []Backend { return []Backend{NewBwrap(""), NewLandlock("")} }

var probed = struct {
	sync.Mutex
	errs map[string]error
}{errs: map[string]error{}}

// requireWorking skips t when b does not work here, saying why; each
// backend is probed once per test binary.
func requireWorking(t testing.TB, b Backend) {
	t.Helper()
	probed.Lock()
	err, ok := probed.errs[b.Name()]
	if !ok {
		err = b.Probe()
		probed.errs[b.Name()] = err
	}
	probed.Unlock()
	if err != nil {
		t.Skipf("%s backend does not work on this machine: %v", b.Name(), err)
	}
}

func requireBash(t testing.TB) {
	t.Helper()
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("bash is not installed")
	}
}

// testRoot returns a fresh directory, outside every temp dir when it can
// be (under the user cache dir): workspace-write makes the temp dirs
// writable, so a workspace and an "outside" dir under /tmp would prove
// nothing about writes outside. outsideTemp says whether that worked.
func testRoot(t testing.TB) (dir string, outsideTemp bool) {
	t.Helper()
	if cache, err := os.UserCacheDir(); err == nil {
		if err := os.MkdirAll(cache, 0o755); err == nil {
			if d, err := os.MkdirTemp(cache, "dsh-sandbox-test-"); err == nil {
				t.Cleanup(func() { os.RemoveAll(d) })
				if r, err := resolvePath("/", d); err == nil && withinAny(r, tempDirs()) == "" {
					return r, true
				}
				return d, false
			}
		}
	}
	d, err := resolvePath("/", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return d, false
}

// fixture is a workspace that is a git checkout, beside a directory
// outside it.
type fixture struct {
	root, ws, outside string
	outsideTemp       bool
}

func newFixture(t testing.TB) fixture {
	t.Helper()
	root, outsideTemp := testRoot(t)
	f := fixture{root: root, ws: filepath.Join(root, "ws"), outside: filepath.Join(root, "outside"), outsideTemp: outsideTemp}
	for _, d := range []string{f.ws, f.outside, filepath.Join(f.ws, ".git", "hooks"), filepath.Join(f.ws, "src")} {
		mustMkdir(t, d)
	}
	mustWrite(t, filepath.Join(f.ws, ".git", "config"), "[core]\n")
	mustWrite(t, filepath.Join(f.ws, "README"), "readme\n")
	mustWrite(t, filepath.Join(f.outside, "existing"), "outside\n")
	return f
}

func mustMkdir(t testing.TB, d string) {
	t.Helper()
	if err := os.MkdirAll(d, 0o755); err != nil {
		t.Fatal(err)
	}
}

func mustWrite(t testing.TB, p, s string) {
	t.Helper()
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

// run executes a confined command in dir with extra environment and
// returns its exit code and combined output.
func run(t testing.TB, c Confined, dir string, env ...string) (int, string) {
	t.Helper()
	cmd := command(c)
	cmd.Dir = dir
	cmd.Env = append(append(os.Environ(), env...), c.Env...)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0, string(out)
	case errors.As(err, &ee):
		return ee.ExitCode(), string(out)
	}
	t.Fatalf("run %q: %v", c.Argv, err)
	return -1, ""
}

// command is c as a spawner starts it: in its own session, killed with
// its parent, in the namespaces c asks for.
func command(c Confined) *exec.Cmd {
	cmd := exec.Command(c.Argv[0], c.Argv[1:]...)
	cmd.SysProcAttr = spawnAttr(c.ProcAttr)
	return cmd
}

// listen opens a TCP listener on loopback that accepts and drops
// connections until the test ends, and returns its port.
func listen(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	t.Cleanup(func() { ln.Close(); <-done })
	return strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
}
