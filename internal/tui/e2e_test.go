package tui_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/charmbracelet/x/ansi"

	"github.com/dsh-dev/dsh/internal/dshtest"
	"github.com/dsh-dev/dsh/internal/llm/llmtest"
	"github.com/dsh-dev/dsh/internal/sandbox"
	"github.com/dsh-dev/dsh/internal/session"
)

// The end-to-end tests drive the real dsh binary in a real terminal:
// tmux (the counterpart nobody on the team wrote), with the scripted fake
// model. A terminal has no handshake to wait on, so each step waits for
// what it expects to appear on the screen, with a deadline.

var dshBin string

func TestMain(m *testing.M) { dshtest.Main(m, &dshBin) }

// term is one tmux server (its own socket) running dsh in a pane.
type term struct {
	t    *testing.T
	sock string
	home string
	cwd  string
	srv  *llmtest.Server
}

func needTmux(t *testing.T) {
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Skip("tmux is not installed: the terminal tests need it")
	}
}

func newTerm(t *testing.T) *term {
	needTmux(t)
	srv := llmtest.New()
	t.Cleanup(srv.Close)
	tm := &term{t: t, sock: filepath.Join(t.TempDir(), "tmux.sock"), home: t.TempDir(), cwd: t.TempDir(), srv: srv}
	t.Cleanup(func() { _ = tm.tmux("kill-server") })
	return tm
}

func (tm *term) tmux(args ...string) error {
	_, err := tm.tmuxOut(args...)
	return err
}

func (tm *term) tmuxOut(args ...string) (string, error) {
	out, err := exec.Command("tmux", append([]string{"-S", tm.sock, "-f", "/dev/null"}, args...)...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("tmux %s: %w: %s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// start runs dsh with args in a cols×rows pane that stays after dsh
// exits, so its status can be read.
func (tm *term) start(cols, rows int, args ...string) {
	tm.t.Helper()
	cmd := append([]string{dshBin}, args...)
	err := tm.tmux("new-session", "-d", "-s", "m", "-x", fmt.Sprint(cols), "-y", fmt.Sprint(rows), "-c", tm.cwd,
		"-e", "DSH_HOME="+tm.home, "-e", "DEEPSEEK_API_KEY=test-key", "-e", "DEEPSEEK_BASE_URL="+tm.srv.URL(),
		"-e", "TERM=xterm-256color", "-e", "NO_COLOR=",
		// The shell reports dsh's exit status on the screen (tmux's
		// pane_dead_status is not always filled in).
		strings.Join(quoteAll(cmd), " ")+`; echo "dsh-exit=$?"`, ";", "set-option", "-t", "m", "remain-on-exit", "on",
		// A test may kill its session and start another: the server stays.
		";", "set-option", "-g", "exit-empty", "off")
	if err != nil {
		tm.t.Fatal(err)
	}
}

func quoteAll(xs []string) []string {
	out := make([]string, len(xs))
	for i, x := range xs {
		out[i] = "'" + strings.ReplaceAll(x, "'", `'\''`) + "'"
	}
	return out
}

func (tm *term) keys(keys ...string) {
	tm.t.Helper()
	if err := tm.tmux(append([]string{"send-keys", "-t", "m"}, keys...)...); err != nil {
		tm.t.Fatal(err)
	}
}

// typeLine types text literally and presses Enter.
func (tm *term) typeLine(text string) {
	tm.t.Helper()
	if err := tm.tmux("send-keys", "-t", "m", "-l", text); err != nil {
		tm.t.Fatal(err)
	}
	tm.keys("Enter")
}

// screen is the visible pane; history adds the scrollback.
func (tm *term) screen() string {
	out, err := tm.tmuxOut("capture-pane", "-p", "-t", "m")
	if err != nil {
		tm.t.Fatal(err)
	}
	return out
}

func (tm *term) history() string {
	out, err := tm.tmuxOut("capture-pane", "-p", "-S", "-", "-t", "m")
	if err != nil {
		tm.t.Fatal(err)
	}
	return out
}

// waitScreen waits until ok holds for the visible pane.
func (tm *term) waitScreen(what string, ok func(string) bool) string {
	tm.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		s := tm.screen()
		if ok(s) {
			return s
		}
		if time.Now().After(deadline) {
			tm.t.Fatalf("timed out waiting for %s; screen:\n%s", what, s)
		}
		time.Sleep(20 * time.Millisecond) // polling the screen, not synchronising
	}
}

func (tm *term) waitFor(sub string) string {
	tm.t.Helper()
	return tm.waitScreen(fmt.Sprintf("%q", sub), func(s string) bool { return strings.Contains(s, sub) })
}

// exitStatus waits for dsh to exit and returns its status.
func (tm *term) exitStatus() int {
	tm.t.Helper()
	var status int
	tm.waitHistory("dsh to exit", func(h string) bool {
		m := exitLine.FindStringSubmatch(h)
		if m == nil {
			return false
		}
		_, err := fmt.Sscan(m[1], &status)
		return err == nil
	})
	return status
}

var exitLine = regexp.MustCompile(`dsh-exit=(\d+)`)

// waitHistory waits until ok holds for the pane with its scrollback.
func (tm *term) waitHistory(what string, ok func(string) bool) {
	tm.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		h := tm.history()
		if ok(h) {
			return
		}
		if time.Now().After(deadline) {
			tm.t.Fatalf("timed out waiting for %s; screen:\n%s", what, tm.screen())
		}
		time.Sleep(20 * time.Millisecond) // polling the screen, not synchronising
	}
}

var sessionLine = regexp.MustCompile(`session ([0-9a-f-]{36})`)

// export reads the session's log with the real binary.
func (tm *term) export(id string) []session.Event {
	tm.t.Helper()
	c := exec.Command(dshBin, "sessions", "export", id)
	c.Env = append(os.Environ(), "DSH_HOME="+tm.home)
	out, err := c.Output()
	if err != nil {
		tm.t.Fatalf("export: %v", err)
	}
	var events []session.Event
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		var e session.Event
		if json.Unmarshal(sc.Bytes(), &e) == nil && e.Type != "" {
			events = append(events, e)
		}
	}
	return events
}

func bash(cmd string, extra map[string]any) llmtest.ToolCall {
	a := map[string]any{"command": cmd, "description": "test"}
	for k, v := range extra {
		a[k] = v
	}
	b, _ := json.Marshal(a)
	return llmtest.ToolCall{Name: "bash", Arguments: string(b)}
}

func TestStreamedAnswerAndStatusLine(t *testing.T) {
	tm := newTerm(t)
	tm.srv.Enqueue(llmtest.Response{Text: "Here is **the answer** with `code`.\n\n- first point\n- second point", ChunkRunes: 5,
		Usage: &llmtest.Usage{Input: 1500, Output: 42}})
	tm.start(100, 30, "tui")
	tm.waitFor("/help for commands")
	tm.typeLine("hello there")
	s := tm.waitFor("• second point")
	if !strings.Contains(s, "› hello there") || !strings.Contains(s, "Here is the answer with code.") {
		t.Errorf("prompt or answer missing:\n%s", s)
	}
	// The status line names the model, and the tokens once the message
	// is logged (the text is on screen while it streams, before that).
	s = tm.waitFor("↑1.5k ↓42")
	if !strings.Contains(s, "deepseek/deepseek-v4-flash · ") {
		t.Errorf("the status line does not name the model:\n%s", s)
	}
	tm.keys("C-d")
	if code := tm.exitStatus(); code != 0 {
		t.Errorf("ctrl+d exit status %d, want 0", code)
	}
	// --continue opens the same session and prints its history first.
	if err := tm.tmux("kill-session", "-t", "m"); err != nil {
		t.Fatal(err)
	}
	tm.start(100, 30, "tui", "--continue")
	s = tm.waitScreen("the replayed history and the composer", func(s string) bool {
		return strings.Contains(s, "• second point") && strings.Contains(s, "/help for commands")
	})
	if !strings.Contains(s, "› hello there") || !strings.Contains(s, "deepseek/deepseek-v4-flash · ") {
		t.Errorf("--continue did not replay the session:\n%s", s)
	}
	tm.keys("C-d")
	tm.exitStatus()
}

func TestBareDshOnATerminalOpensTheUI(t *testing.T) {
	tm := newTerm(t)
	tm.start(80, 20)
	tm.waitFor("/help for commands")
	tm.typeLine("/nosuch")
	tm.waitFor("unknown command /nosuch")
	tm.typeLine("/exit")
	if code := tm.exitStatus(); code != 0 {
		t.Errorf("exit status %d", code)
	}
}

// TestApprovalDenied: under read-only a command the sandbox refused is
// retried with an escalation, which asks; the prompt shows the command,
// the directory and the reason with deny focused, and n denies it.
func TestApprovalDenied(t *testing.T) {
	if _, err := sandbox.Default().Backend(); err != nil {
		t.Skipf("no sandbox backend on this machine (the read-only preset needs one to refuse a write): %v", err)
	}
	tm := newTerm(t)
	target := filepath.Join(t.TempDir(), "outside.txt")
	tm.srv.Enqueue(
		llmtest.Response{ToolCalls: []llmtest.ToolCall{bash("touch "+target, nil)}},
		llmtest.Response{ToolCalls: []llmtest.ToolCall{bash("touch "+target, map[string]any{
			"sandbox_permissions": "danger-full-access", "justification": "the file lies outside the workspace"})}},
		llmtest.Response{Text: "understood, leaving it"},
	)
	tm.start(100, 30, "tui", "--permission", "read-only")
	tm.waitFor("/help for commands")
	tm.typeLine("touch the file")
	s := tm.waitFor("Allow bash?")
	for _, want := range []string{"$ touch " + target, "in " + tm.cwd, "why: sandbox escalation", "› Deny", "n deny"} {
		if !strings.Contains(s, want) {
			t.Errorf("approval prompt lacks %q:\n%s", want, s)
		}
	}
	tm.keys("n")
	s = tm.waitFor("understood, leaving it")
	if !strings.Contains(s, "✗ denied touch") {
		t.Errorf("no denial row:\n%s", s)
	}
	tm.keys("C-d")
	tm.exitStatus()
	m := sessionLine.FindStringSubmatch(tm.screen())
	if m == nil {
		t.Fatalf("no session line:\n%s", tm.screen())
	}
	var rejected bool
	for _, e := range tm.export(m[1]) {
		if e.Type == session.TypeApprovalDecided && strings.Contains(string(e.Data), `"rejected"`) {
			rejected = true
		}
	}
	if !rejected {
		t.Error("the log has no rejected approval/decided")
	}
	if _, err := os.Stat(target); err == nil {
		t.Error("the denied command ran")
	}
}

// TestCtrlCKeepsPartialThenExits: Ctrl-C mid-stream cancels the turn,
// the partial text stays and the composer returns; a second Ctrl-C
// exits with 130.
func TestCtrlCKeepsPartialThenExits(t *testing.T) {
	tm := newTerm(t)
	tm.srv.Enqueue(llmtest.Response{Text: "partial words arrive slowly and then the model stalls forever", ChunkRunes: 4, StallAfter: 6})
	tm.start(100, 30, "tui")
	tm.waitFor("/help for commands")
	tm.typeLine("go")
	tm.waitFor("partial wor")
	tm.keys("C-c")
	// The interrupted row is printed first and the live area redrawn on
	// the next frame: wait for both.
	s := tm.waitScreen("the turn to end", func(s string) bool {
		return strings.Contains(s, "⎿ interrupted") && !strings.Contains(s, "working")
	})
	if !strings.Contains(s, "● partial wor") || !strings.Contains(s, "press ctrl+c again to exit") || !strings.Contains(s, "› Ask dsh") {
		t.Errorf("partial text, composer or hint missing:\n%s", s)
	}
	tm.keys("C-c")
	if code := tm.exitStatus(); code != 130 {
		t.Errorf("exit status %d, want 130", code)
	}
}

// TestResizeReflows: shrinking to 50 columns redraws the live area in 50
// columns without a crash, and the UI keeps working.
func TestResizeReflows(t *testing.T) {
	tm := newTerm(t)
	long := strings.Repeat("wrapping words ", 12)
	tm.srv.Enqueue(llmtest.Response{Text: "first " + long}, llmtest.Response{Text: "second " + long})
	tm.start(100, 30, "tui")
	tm.waitFor("/help for commands")
	tm.typeLine("one")
	tm.waitFor("first wrapping")
	if err := tm.tmux("resize-window", "-t", "m", "-x", "50", "-y", "30"); err != nil {
		t.Fatal(err)
	}
	tm.waitScreen("a 50-column status line", func(s string) bool {
		return strings.Contains(s, "deepseek/") && !strings.Contains(s, strings.Repeat("─", 51))
	})
	tm.typeLine("two")
	s := tm.waitFor("second wrapping")
	for _, l := range strings.Split(s, "\n") {
		if w := ansi.StringWidth(l); w > 50 {
			t.Errorf("line wider than 50 columns (%d): %q", w, l)
		}
	}
	if !strings.Contains(s, "› Ask dsh") {
		t.Errorf("composer missing after the resize:\n%s", s)
	}
	tm.keys("C-d")
	if code := tm.exitStatus(); code != 0 {
		t.Errorf("exit status %d after the resize", code)
	}
}

// TestTreeListsChildren: /tree lists the child of a subagent run, and
// Enter opens its transcript read-only.
func TestTreeListsChildren(t *testing.T) {
	tm := newTerm(t)
	var mu sync.Mutex
	tm.srv.SetFallback(func(r llmtest.Request) llmtest.Response {
		mu.Lock()
		defer mu.Unlock()
		body := string(r.Body)
		switch {
		case strings.Contains(body, "CHILD TASK") && !strings.Contains(body, "delegate it"):
			return llmtest.Response{Text: "child says hi"}
		case strings.Contains(body, "child says hi"):
			return llmtest.Response{Text: "parent done"}
		case r.ToolResultCount() == 0:
			b, _ := json.Marshal(map[string]any{"description": "greeter", "prompt": "CHILD TASK: say hi"})
			return llmtest.Response{ToolCalls: []llmtest.ToolCall{{Name: "subagent", Arguments: string(b)}}}
		default:
			return llmtest.Response{Text: "waiting for the child"}
		}
	})
	tm.start(100, 30, "tui")
	tm.waitFor("/help for commands")
	tm.typeLine("delegate it")
	tm.waitFor("parent done")
	s := tm.screen()
	if !strings.Contains(s, "◆ subagent greeter") {
		t.Errorf("no finished child row:\n%s", s)
	}
	tm.typeLine("/tree")
	s = tm.waitFor("Subagents")
	if !strings.Contains(s, "greeter") {
		t.Errorf("/tree does not list the child:\n%s", s)
	}
	tm.keys("Enter")
	s = tm.waitFor("(read-only)")
	if !strings.Contains(s, "› CHILD TASK: say hi") || !strings.Contains(s, "child says hi") {
		t.Errorf("the child transcript lacks its task or its answer:\n%s", s)
	}
	tm.keys("Escape")
	tm.waitScreen("the overlay to close", func(s string) bool { return !strings.Contains(s, "(read-only)") })
	tm.keys("C-d")
	tm.exitStatus()
}

// TestScrollbackKeepsEarlierTurns: finished items are printed into the
// terminal's scrollback, so turns that left the screen are still there.
func TestScrollbackKeepsEarlierTurns(t *testing.T) {
	tm := newTerm(t)
	for i := 1; i <= 3; i++ {
		var lines []string
		for j := 1; j <= 12; j++ {
			lines = append(lines, fmt.Sprintf("turn%d line%d", i, j))
		}
		tm.srv.Enqueue(llmtest.Response{Text: strings.Join(lines, "\n\n")})
	}
	tm.start(80, 20, "tui")
	tm.waitFor("/help for commands")
	for i := 1; i <= 3; i++ {
		tm.typeLine(fmt.Sprintf("prompt %d", i))
		tm.waitScreen("the turn to end", func(s string) bool {
			return strings.Contains(s, fmt.Sprintf("turn%d line12", i)) && !strings.Contains(s, "working")
		})
	}
	h := tm.history()
	for _, want := range []string{"› prompt 1", "turn1 line1", "turn1 line12", "› prompt 2", "turn2 line5", "turn3 line12"} {
		if !strings.Contains(h, want) {
			t.Errorf("scrollback lacks %q", want)
		}
	}
	if strings.Contains(tm.screen(), "turn1 line1\n") {
		t.Error("the first turn is still on screen: the test does not exercise the scrollback")
	}
	// Each finished line is printed exactly once (none lost off the
	// bottom of the screen, none repeated by a repaint), and no frame of
	// the live area was left behind in the scrollback.
	for i := 1; i <= 3; i++ {
		for j := 1; j <= 12; j++ {
			if n := strings.Count(h, fmt.Sprintf("turn%d line%d\n", i, j)); n != 1 {
				t.Errorf("turn%d line%d appears %d times in the scrollback", i, j, n)
			}
		}
	}
	if n := strings.Count(h, "Ask dsh"); n != 1 {
		t.Errorf("the composer appears %d times in the scrollback:\n%s", n, h)
	}
	// The pane was fresh: one blank line (printed before the UI started,
	// so the live area never sat at the top-left corner), then the turn.
	if !strings.HasPrefix(h, "\n› prompt 1\n") {
		t.Errorf("the scrollback does not open with one blank line and the first prompt:\n%s", h)
	}
	tm.keys("C-d")
	tm.exitStatus()
}

// TestLiveAreaNeverScrolledIntoHistory: a fresh terminal starts the live
// area at the screen's top-left corner, where tmux (scroll-on-clear, on
// by default) takes "erase below" for a clear screen and scrolls what is
// there into its history. A redraw of the whole live area (its height
// changed: the composer grew a line) and the erase on exit must not
// leave copies of the composer and status line in the scrollback.
func TestLiveAreaNeverScrolledIntoHistory(t *testing.T) {
	tm := newTerm(t)
	tm.start(80, 20, "tui")
	tm.waitFor("/help for commands")
	if err := tm.tmux("send-keys", "-t", "m", "-l", "first line"); err != nil {
		t.Fatal(err)
	}
	tm.keys("C-j")
	if err := tm.tmux("send-keys", "-t", "m", "-l", "second line"); err != nil {
		t.Fatal(err)
	}
	tm.waitFor("second line")
	if h := tm.history(); strings.Count(h, "deepseek/") != 1 || strings.Contains(h, "/help for commands") {
		t.Errorf("a redrawn frame was left in the scrollback:\n%s", h)
	}
	// Empty the composer (Ctrl-D leaves only when it is empty), then leave.
	if err := tm.tmux("send-keys", "-t", "m", "-N", "30", "BSpace"); err != nil {
		t.Fatal(err)
	}
	tm.waitFor("/help for commands")
	tm.keys("C-d")
	tm.exitStatus()
	if h := tm.history(); strings.Contains(h, "deepseek/") || strings.Contains(h, "second line") {
		t.Errorf("the live area was left in the scrollback on exit:\n%s", h)
	}
}

// TestAttachToServe runs the same UI against a dsh serve: the answer
// streams over SSE and the status line names the server.
func TestAttachToServe(t *testing.T) {
	tm := newTerm(t)
	tm.srv.Enqueue(llmtest.Response{Text: "served answer over the wire", ChunkRunes: 6})
	serve := exec.Command(dshBin, "serve", "--listen", "127.0.0.1:0")
	serve.Dir = tm.cwd
	serve.Env = append(os.Environ(), "DSH_HOME="+tm.home, "DEEPSEEK_API_KEY=test-key", "DEEPSEEK_BASE_URL="+tm.srv.URL())
	out, err := serve.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := serve.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = serve.Process.Signal(os.Interrupt)
		_ = serve.Wait()
	})
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("dsh serve: %v", err)
	}
	url := strings.TrimSpace(line[strings.LastIndex(line, " ")+1:])
	go func() { _, _ = io.Copy(io.Discard, out) }() // the server ends it when it exits
	tm.start(100, 30, "tui", "--attach", url)
	tm.waitFor("/help for commands")
	tm.typeLine("hello server")
	s := tm.waitFor("served answer over the wire")
	if !strings.Contains(s, "@ "+url) {
		t.Errorf("the status line does not name the server:\n%s", s)
	}
	tm.keys("C-d")
	if code := tm.exitStatus(); code != 0 {
		t.Errorf("exit status %d", code)
	}
}

// TestNoColorAndAltScreen: NO_COLOR leaves no colour in what is drawn,
// and --alt-screen shows the conversation full-screen.
func TestNoColorAndAltScreen(t *testing.T) {
	tm := newTerm(t)
	tm.srv.Enqueue(llmtest.Response{Text: "plain **answer** with `code`"})
	if err := tm.tmux("new-session", "-d", "-s", "m", "-x", "90", "-y", "24", "-c", tm.cwd,
		"-e", "DSH_HOME="+tm.home, "-e", "DEEPSEEK_API_KEY=test-key", "-e", "DEEPSEEK_BASE_URL="+tm.srv.URL(),
		"-e", "TERM=xterm-256color", "-e", "NO_COLOR=1",
		strings.Join(quoteAll([]string{dshBin, "tui", "--alt-screen"}), " ")+`; echo "dsh-exit=$?"`, ";",
		"set-option", "-t", "m", "remain-on-exit", "on"); err != nil {
		t.Fatal(err)
	}
	tm.waitFor("/help for commands")
	tm.typeLine("hi")
	tm.waitFor("plain answer with code")
	styled, err := tm.tmuxOut("capture-pane", "-p", "-e", "-t", "m")
	if err != nil {
		t.Fatal(err)
	}
	// A colour is an SGR parameter 30–38, 40–48, 90–97 or 100–107 (39
	// and 49 only reset to the terminal's own colours).
	for _, m := range regexp.MustCompile(`\x1b\[([0-9;:]*)m`).FindAllStringSubmatch(styled, -1) {
		for _, p := range strings.FieldsFunc(m[1], func(r rune) bool { return r == ';' || r == ':' }) {
			var n int
			fmt.Sscan(p, &n)
			if n >= 30 && n <= 38 || n >= 40 && n <= 48 || n >= 90 && n <= 97 || n >= 100 && n <= 107 {
				t.Errorf("colour under NO_COLOR: %q", m[0])
			}
		}
	}
	s := tm.screen()
	if lines := strings.Split(strings.TrimRight(s, "\n"), "\n"); len(lines) != 24 || !strings.HasPrefix(lines[len(lines)-1], "deepseek/") {
		t.Errorf("the alt screen is not full-screen with the status line last:\n%s", s)
	}
	tm.keys("C-d")
	if code := tm.exitStatus(); code != 0 {
		t.Errorf("exit status %d", code)
	}
	if strings.Contains(tm.screen(), "plain answer") {
		t.Error("the alt screen's content stayed after the exit")
	}
}

// TestQueueWhileWorking: a message typed during a turn waits in the
// host's queue (shown from the log), Up takes it back for editing, and
// sent again it starts the next turn.
func TestQueueWhileWorking(t *testing.T) {
	tm := newTerm(t)
	tm.srv.Enqueue(
		llmtest.Response{Text: strings.Repeat("slow words ", 40) + "FIRST-DONE", ChunkRunes: 4, DelayPerChunk: 25 * time.Millisecond},
		llmtest.Response{Text: "second answer"},
	)
	tm.start(100, 30, "tui")
	tm.waitFor("/help for commands")
	tm.typeLine("first")
	tm.waitFor("slow words")
	tm.typeLine("and then this")
	tm.waitFor("⧗ queued: and then this · ↑ edits")
	tm.keys("Up")
	tm.waitScreen("the message back in the composer", func(s string) bool {
		return !strings.Contains(s, "⧗ queued") && strings.Contains(s, "› and then this")
	})
	tm.keys("-l", " too")
	tm.keys("Enter")
	tm.waitFor("second answer")
	if h := tm.history(); strings.Count(h, "› and then this") != 1 || !strings.Contains(h, "› and then this too") {
		t.Errorf("the taken-back message was not sent once, edited:\n%s", h)
	}
	tm.keys("C-d")
	tm.exitStatus()
}
