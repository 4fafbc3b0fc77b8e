package webui_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/dsh-dev/dsh/internal/leakcheck"
	"github.com/dsh-dev/dsh/internal/llm/llmtest"
	"github.com/dsh-dev/dsh/internal/sandbox"
)

func TestMain(m *testing.M) {
	// needSandbox probes the real backends, which run this binary as the
	// sandbox helper.
	sandbox.RunHelperIfRequested()
	os.Exit(leakcheck.Run(m))
}

// needSandbox skips where no sandbox backend works: the approval
// scenarios need the read-only sandbox to refuse a write first.
func needSandbox(t *testing.T) {
	if _, err := sandbox.Default().Backend(); err != nil {
		t.Skipf("no sandbox backend on this machine: %v", err)
	}
}

// browser is what the browser tests need: node, playwright-core and a
// Chromium.
type browser struct{ node, playwrightDir, chromium string }

// needBrowser finds node, playwright-core (DSH_PLAYWRIGHT_DIR, else the
// peers prefix) and Chromium (DSH_CHROMIUM, else Debian's headless shell
// or chromium). It skips, saying what is missing, unless
// DSH_REQUIRE_BROWSER=1, when a missing piece fails the test.
func needBrowser(t *testing.T) browser {
	t.Helper()
	var b browser
	var missing []string
	if p, err := exec.LookPath("node"); err == nil {
		b.node = p
	} else {
		missing = append(missing, "node (not in PATH)")
	}
	home, _ := os.UserHomeDir()
	dirs := []string{os.Getenv("DSH_PLAYWRIGHT_DIR"), filepath.Join(os.Getenv("DSH_PEERS_PREFIX"), "node_modules"), filepath.Join(home, ".cache", "dsh-peers", "node_modules")}
	for _, d := range dirs {
		if d == "" || d == "node_modules" {
			continue
		}
		if _, err := os.Stat(filepath.Join(d, "playwright-core", "package.json")); err == nil {
			b.playwrightDir = d
			break
		}
	}
	if b.playwrightDir == "" {
		missing = append(missing, "playwright-core (npm install --prefix ~/.cache/dsh-peers playwright-core@1.65.1, or set DSH_PLAYWRIGHT_DIR)")
	}
	for _, c := range []string{os.Getenv("DSH_CHROMIUM"), "/usr/bin/chromium-headless-shell", "/usr/bin/chromium"} {
		if c == "" {
			continue
		}
		if _, err := os.Stat(c); err == nil {
			b.chromium = c
			break
		}
	}
	if b.chromium == "" {
		missing = append(missing, "Chromium (apt-get install chromium-headless-shell, or set DSH_CHROMIUM)")
	}
	if len(missing) > 0 {
		msg := "browser tests need " + strings.Join(missing, ", ")
		if os.Getenv("DSH_REQUIRE_BROWSER") == "1" {
			t.Fatal(msg + " (DSH_REQUIRE_BROWSER=1)")
		}
		t.Skip(msg)
	}
	return b
}

var (
	buildOnce sync.Once
	dshBin    string
	buildErr  error
)

// buildDsh builds the real dsh once per test binary: the UI under test is
// the one go:embed put into it.
func buildDsh(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "dsh-webui-e2e")
		if err != nil {
			buildErr = err
			return
		}
		dshBin = filepath.Join(dir, "dsh")
		out, err := exec.Command("go", "build", "-o", dshBin, "github.com/dsh-dev/dsh/cmd/dsh").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %w\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return dshBin
}

// serve is a running dsh serve over a fake model.
type serve struct {
	url       string // http://127.0.0.1:PORT
	tokenURL  string // the browser URL dsh serve printed
	home, dir string // $DSH_HOME and the workspace directory
	srv       *llmtest.Server
	stop      func() // SIGTERM, then wait for the exit; idempotent
}

// startServe starts dsh serve on a free port with the fake model as its
// provider and waits for its two start-up lines (the readiness handshake).
func startServe(t *testing.T, srv *llmtest.Server) *serve {
	t.Helper()
	return startServeWith(t, srv, nil)
}

// startServeWith is startServe with extra files in $DSH_HOME (name →
// content), such as hooks.json.
func startServeWith(t *testing.T, srv *llmtest.Server, homeFiles map[string]string) *serve {
	t.Helper()
	home, dir := t.TempDir(), t.TempDir()
	for name, content := range homeFiles {
		if err := os.WriteFile(filepath.Join(home, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// The workspace path as the server will canonicalise it.
	if real, err := filepath.EvalSymlinks(dir); err == nil {
		dir = real
	}
	// External agents' tools appear only where their executables are
	// found; the scripted turns do not depend on them.
	cfg := "profile:\n  - {id: codex, module: codex, disabled: true}\n  - {id: claude-code, module: claude-code, disabled: true}\n"
	if err := os.WriteFile(filepath.Join(home, "config.yaml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return startServeAt(t, srv, home, dir, "127.0.0.1:0")
}

// startServeAt starts dsh serve with $DSH_HOME home in dir, listening on
// listen (a restart reuses the address and the home, token included).
func startServeAt(t *testing.T, srv *llmtest.Server, home, dir, listen string) *serve {
	t.Helper()
	bin := buildDsh(t)
	s := &serve{home: home, dir: dir, srv: srv}
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, bin, "serve", "--listen", listen)
	cmd.Dir = s.dir
	cmd.Env = append(os.Environ(), "DSH_HOME="+s.home, "DEEPSEEK_API_KEY=test-key", "DEEPSEEK_BASE_URL="+srv.URL())
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 10 * time.Second
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &lockedWriter{w: &stderr}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	var once sync.Once
	s.stop = func() {
		once.Do(func() {
			cancel()
			<-done
			if t.Failed() {
				t.Logf("dsh serve stderr:\n%s", cmd.Stderr.(*lockedWriter).String())
			}
		})
	}
	t.Cleanup(s.stop)
	lines := make(chan string, 2)
	go func() {
		defer close(done)
		defer close(lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			default:
			}
		}
		_ = cmd.Wait()
	}()
	first := readLine(t, lines, cmd)
	const prefix = "dsh serve listening on "
	if !strings.HasPrefix(first, prefix) {
		t.Fatalf("first line %q", first)
	}
	s.url = strings.TrimPrefix(first, prefix)
	second := readLine(t, lines, cmd)
	if i := strings.Index(second, s.url+"/?token="); i >= 0 {
		s.tokenURL = strings.Fields(second[i:])[0]
	} else {
		t.Fatalf("second line %q has no browser URL", second)
	}
	return s
}

func readLine(t *testing.T, lines <-chan string, cmd *exec.Cmd) string {
	t.Helper()
	select {
	case l, ok := <-lines:
		if !ok {
			t.Fatalf("dsh serve exited: %s", cmd.Stderr.(*lockedWriter).String())
		}
		return l
	case <-time.After(30 * time.Second):
		t.Fatal("dsh serve printed nothing for 30 s")
	}
	return ""
}

type lockedWriter struct {
	mu sync.Mutex
	w  *strings.Builder
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func (l *lockedWriter) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.String()
}

// screensDir is where the scenarios save screenshots: DSH_SCREENS_DIR, or
// the test's temporary directory.
func screensDir(t *testing.T) string {
	if d := os.Getenv("DSH_SCREENS_DIR"); d != "" {
		return d
	}
	return t.TempDir()
}

// scenario runs e2e/NAME.mjs against s and fails the test with its
// output when it fails. Screenshots are also copied to /work/screens when
// that directory exists (the developer's look at them).
func scenario(t *testing.T, b browser, s *serve, name string, extra ...string) string {
	t.Helper()
	screens := screensDir(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, b.node, filepath.Join("e2e", name+".mjs"))
	cmd.Env = append(os.Environ(), "DSH_URL="+s.tokenURL, "DSH_WORKSPACE="+s.dir, "SCREENS_DIR="+screens,
		"CHROMIUM="+b.chromium, "PLAYWRIGHT_DIR="+b.playwrightDir)
	cmd.Env = append(cmd.Env, extra...)
	defer copyScreens(t, screens)
	out, err := cmd.CombinedOutput()
	t.Logf("%s:\n%s", name, out)
	if err != nil {
		t.Fatalf("scenario %s: %v", name, err)
	}
	return string(out)
}

// scenarioRestart runs e2e/restart.mjs: when it prints RESTART, dsh
// serve is stopped and started again on the same address and home, and
// the script is told (a line on its stdin) once the new one listens.
func scenarioRestart(t *testing.T, b browser, s *serve) {
	t.Helper()
	screens := screensDir(t)
	defer copyScreens(t, screens)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, b.node, filepath.Join("e2e", "restart.mjs"))
	cmd.Env = append(os.Environ(), "DSH_URL="+s.tokenURL, "DSH_WORKSPACE="+s.dir, "SCREENS_DIR="+screens,
		"CHROMIUM="+b.chromium, "PLAYWRIGHT_DIR="+b.playwrightDir)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	sc := bufio.NewScanner(stdout)
	restarted := false
	for sc.Scan() {
		out.WriteString(sc.Text() + "\n")
		if sc.Text() != "RESTART" || restarted {
			continue
		}
		restarted = true
		t0 := time.Now()
		s.stop()
		t.Logf("dsh serve stopped in %v", time.Since(t0))
		addr := strings.TrimPrefix(s.url, "http://")
		s2 := startServeAt(t, s.srv, s.home, s.dir, addr)
		if s2.url != s.url {
			t.Errorf("restarted on %s, want %s", s2.url, s.url)
		}
		t.Logf("dsh serve restarted at %s", s2.url)
		if _, err := io.WriteString(stdin, "go\n"); err != nil {
			t.Errorf("tell the script: %v", err)
		}
	}
	err = cmd.Wait()
	t.Logf("restart:\n%s%s", out.String(), stderr.String())
	if err != nil {
		t.Fatalf("scenario restart: %v", err)
	}
	if !restarted {
		t.Fatal("the scenario never asked for the restart")
	}
}

func copyScreens(t *testing.T, from string) {
	const to = "/work/screens"
	if fi, err := os.Stat(to); err != nil || !fi.IsDir() || from == to {
		return
	}
	ents, _ := os.ReadDir(from)
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), ".png") {
			continue
		}
		in, err := os.Open(filepath.Join(from, e.Name()))
		if err != nil {
			continue
		}
		out, err := os.Create(filepath.Join(to, e.Name()))
		if err == nil {
			_, _ = io.Copy(out, in)
			out.Close()
		}
		in.Close()
	}
}
