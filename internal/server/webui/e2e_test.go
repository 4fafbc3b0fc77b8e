package webui_test

import (
	"bufio"
	"context"
	"encoding/json"
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
	home, dir := t.TempDir(), t.TempDir()
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

func call(name string, args map[string]any) llmtest.ToolCall {
	b, _ := json.Marshal(args)
	return llmtest.ToolCall{Name: name, Arguments: string(b)}
}

const streamedAnswer = "Each chunk the model sends is logged as an **assistant/chunk** event, and dsh serve pushes it over " +
	"Server-Sent Events the moment it is appended.\n\n- The page folds the events into the conversation.\n" +
	"- A reload replays the log from the start.\n- A reconnect resumes after the last `seq` it saw.\n\nNothing is kept anywhere else."

// TestBrowserStream: (a) a prompt streams its answer into the page.
func TestBrowserStream(t *testing.T) {
	b := needBrowser(t)
	srv := llmtest.New()
	defer srv.Close()
	srv.Enqueue(llmtest.Response{Reasoning: "The user wants to see streaming; answer in a few short parts.", Text: streamedAnswer,
		ChunkRunes: 6, DelayPerChunk: 40 * time.Millisecond, Usage: &llmtest.Usage{Input: 1200, Output: 180}},
		llmtest.Response{Text: "Then the page is done.", Usage: &llmtest.Usage{Input: 1500, Output: 12}})
	s := startServe(t, srv)
	scenario(t, b, s, "stream", "EXPECT_TEXT="+streamedAnswer)
}

const writeReason = "The user asked for this file; the sandbox is read-only."

// escalatedWrite is how a model writes under the read-only preset: file
// tools cannot escalate, and bash may ask for workspace-write only for
// the exact command the sandbox refused, so the command runs plainly
// first (refused: read-only) and is then retried with the escalation,
// which asks for approval.
func escalatedWrite(name, line string) []llmtest.Response {
	cmd := fmt.Sprintf("printf '%%s\\n' '%s' > %s", line, name)
	return []llmtest.Response{
		{ToolCalls: []llmtest.ToolCall{call("bash", map[string]any{"command": cmd, "description": "Write " + name})}},
		{Text: "The sandbox is read-only, so the write needs your approval.", ToolCalls: []llmtest.ToolCall{call("bash", map[string]any{
			"command": cmd, "description": "Write " + name, "sandbox_permissions": "workspace-write", "justification": writeReason,
		})}},
	}
}

// TestBrowserApproval: (b) a write under read-only raises the approval
// panel; Allow once writes the file on disk.
func TestBrowserApproval(t *testing.T) {
	b := needBrowser(t)
	needSandbox(t)
	srv := llmtest.New()
	defer srv.Close()
	const content = "hello from the browser test\n"
	srv.Enqueue(escalatedWrite("greeting.txt", strings.TrimSuffix(content, "\n"))...)
	srv.Enqueue(llmtest.Response{Text: "Wrote greeting.txt."})
	s := startServe(t, srv)
	scenario(t, b, s, "approval", "EXPECT_FILE=greeting.txt", "EXPECT_REASON="+writeReason)
	got, err := os.ReadFile(filepath.Join(s.dir, "greeting.txt"))
	if err != nil || string(got) != content {
		t.Fatalf("greeting.txt = %q, %v", got, err)
	}
}

// TestBrowserReloadPendingApproval: (c) a reload while the approval is
// pending shows it again and answering still works.
func TestBrowserReloadPendingApproval(t *testing.T) {
	b := needBrowser(t)
	needSandbox(t)
	srv := llmtest.New()
	defer srv.Close()
	srv.Enqueue(escalatedWrite("kept.txt", "kept")...)
	srv.Enqueue(escalatedWrite("refused.txt", "refused")...)
	srv.Enqueue(llmtest.Response{Text: "Understood: kept.txt is written, refused.txt is not."})
	s := startServe(t, srv)
	scenario(t, b, s, "reload", "EXPECT_FILE=kept.txt")
	if got, err := os.ReadFile(filepath.Join(s.dir, "kept.txt")); err != nil || string(got) != "kept\n" {
		t.Fatalf("kept.txt = %q, %v", got, err)
	}
	if _, err := os.Stat(filepath.Join(s.dir, "refused.txt")); !os.IsNotExist(err) {
		t.Fatalf("refused.txt exists after a rejection (%v)", err)
	}
	// The rejection's feedback reached the model.
	reqs := srv.Requests()
	if last := string(reqs[len(reqs)-1].Body); !strings.Contains(last, "Not that one, thanks.") {
		t.Errorf("the last request lacks the rejection feedback")
	}
}

// TestBrowserSubagentTree: (d) a three-level subagent tree renders and a
// child opens. Sessions run concurrently, so the fake model answers by
// conversation (its first user message) rather than in queue order.
func TestBrowserSubagentTree(t *testing.T) {
	b := needBrowser(t)
	srv := llmtest.New()
	defer srv.Close()
	const rootPrompt, childTask, grandchildTask = "Delegate the survey.", "Survey the repository and delegate the test check.", "Run the test suite and report."
	srv.SetFallback(func(r llmtest.Request) llmtest.Response {
		done := r.ToolResultCount() > 0
		switch firstUserText(r, rootPrompt, childTask, grandchildTask) {
		case rootPrompt:
			if msgs := r.Messages(); done && msgs[len(msgs)-1]["role"] == "user" {
				// The continuable child's settle notice starts a turn of its own.
				return llmtest.Response{Text: "Noted: the survey subagent has settled."}
			}
			if done {
				return llmtest.Response{Text: "All three levels finished."}
			}
			return llmtest.Response{ToolCalls: []llmtest.ToolCall{call("subagent", map[string]any{"description": "Survey the repository", "prompt": childTask})}}
		case childTask:
			if msgs := r.Messages(); done && msgs[len(msgs)-1]["role"] == "user" {
				return llmtest.Response{Text: "Noted: the test check has settled."}
			}
			if done {
				return llmtest.Response{Text: "Survey done; the grandchild reports that the tests pass."}
			}
			return llmtest.Response{ToolCalls: []llmtest.ToolCall{call("subagent", map[string]any{"description": "Check the tests", "prompt": grandchildTask})}}
		case grandchildTask:
			return llmtest.Response{Text: "The tests pass (3 of 3)."}
		}
		return llmtest.Response{Status: 500, ErrorBody: "unexpected conversation"}
	})
	s := startServe(t, srv)
	scenario(t, b, s, "tree")
}

// firstUserText returns the marker found in the earliest user message
// that holds any of them.
func firstUserText(r llmtest.Request, markers ...string) string {
	for _, m := range r.Messages() {
		if m["role"] != "user" {
			continue
		}
		b, _ := json.Marshal(m["content"])
		for _, k := range markers {
			if strings.Contains(string(b), k) {
				return k
			}
		}
	}
	return ""
}

// TestBrowserCancelKeepsPartial: (e) cancel keeps the partial answer.
func TestBrowserCancelKeepsPartial(t *testing.T) {
	b := needBrowser(t)
	srv := llmtest.New()
	defer srv.Close()
	story := strings.Repeat("Once upon a time a harness streamed its answer, one small chunk at a time. ", 12)
	srv.Enqueue(llmtest.Response{Text: story, ChunkRunes: 4, DelayPerChunk: 60 * time.Millisecond})
	s := startServe(t, srv)
	scenario(t, b, s, "cancel", "EXPECT_TEXT="+story)
}

// TestBrowserJobs: a background job shows in the side panel and its
// completion notice starts the next turn.
func TestBrowserJobs(t *testing.T) {
	b := needBrowser(t)
	srv := llmtest.New()
	defer srv.Close()
	srv.SetFallback(func(r llmtest.Request) llmtest.Response {
		msgs := r.Messages()
		switch {
		case r.ToolResultCount() == 0:
			return llmtest.Response{ToolCalls: []llmtest.ToolCall{call("bash", map[string]any{"command": "sleep 0.5; echo job-finished", "description": "Slow job", "run_in_background": true})}}
		case msgs[len(msgs)-1]["role"] == "user":
			return llmtest.Response{Text: "The background job finished: job-finished."}
		default:
			return llmtest.Response{Text: "Started it in the background."}
		}
	})
	s := startServe(t, srv)
	scenario(t, b, s, "jobs")
}

// TestBrowserServerRestart: a restart of dsh serve loses nothing; the
// page reconnects, resumes after the last seq it saw and goes on.
func TestBrowserServerRestart(t *testing.T) {
	b := needBrowser(t)
	srv := llmtest.New()
	defer srv.Close()
	srv.Enqueue(llmtest.Response{Text: "First answer."}, llmtest.Response{Text: "Second answer, after the restart."})
	s := startServe(t, srv)
	scenarioRestart(t, b, s)
}

// TestBrowserSessionsLive: the sidebar follows another session's status
// live while the page shows a second session.
func TestBrowserSessionsLive(t *testing.T) {
	b := needBrowser(t)
	srv := llmtest.New()
	defer srv.Close()
	srv.Enqueue(llmtest.Response{Text: strings.Repeat("A slow story goes on. ", 20) + "The end.", ChunkRunes: 4, DelayPerChunk: 50 * time.Millisecond})
	s := startServe(t, srv)
	scenario(t, b, s, "multi")
}

// onePixelPNG is a valid 1×1 PNG.
const onePixelPNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="

// TestBrowserImage: an image pasted into the composer reaches the model
// with the prompt and shows in the prompt's bubble.
func TestBrowserImage(t *testing.T) {
	b := needBrowser(t)
	srv := llmtest.New()
	defer srv.Close()
	srv.Enqueue(llmtest.Response{Text: "A single dot."})
	s := startServe(t, srv)
	scenario(t, b, s, "image", "PNG_B64="+onePixelPNG, "VISION_MODEL=deepseek/deepseek-v4-flash-vision-exp")
	reqs := srv.Requests()
	if len(reqs) != 1 {
		t.Fatalf("%d model requests, want 1", len(reqs))
	}
	body := string(reqs[0].Body)
	if strings.Count(body, onePixelPNG) != 1 || !strings.Contains(body, "What is in this image?") {
		t.Errorf("the request does not carry the prompt and exactly one image:\n%.2000s", body)
	}
}

// TestBrowserToolCards: write, read, edit and web_fetch calls render as
// cards with diffs, paths and the URL; the file on disk ends up edited.
func TestBrowserToolCards(t *testing.T) {
	b := needBrowser(t)
	srv := llmtest.New()
	defer srv.Close()
	srv.Enqueue(
		llmtest.Response{ToolCalls: []llmtest.ToolCall{call("write", map[string]any{"file_path": "notes.md", "content": "# Notes\n\n- first\n- second\n"})}},
		llmtest.Response{ToolCalls: []llmtest.ToolCall{call("read", map[string]any{"file_path": "notes.md"})}},
		llmtest.Response{Text: "Fixing the heading.", ToolCalls: []llmtest.ToolCall{call("edit", map[string]any{"file_path": "notes.md", "old_string": "# Notes", "new_string": "# Project notes"})}},
		llmtest.Response{ToolCalls: []llmtest.ToolCall{call("web_fetch", map[string]any{"url": "https://docs.example.invalid/guide"})}},
		llmtest.Response{Text: "Done editing; the docs could not be fetched."},
	)
	s := startServe(t, srv)
	scenario(t, b, s, "tools")
	if got, err := os.ReadFile(filepath.Join(s.dir, "notes.md")); err != nil || string(got) != "# Project notes\n\n- first\n- second\n" {
		t.Fatalf("notes.md = %q, %v", got, err)
	}
}
