//go:build linux

package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/dsh-dev/dsh/internal/llm/llmtest"
	"github.com/dsh-dev/dsh/internal/session"
	"github.com/dsh-dev/dsh/internal/tools/question"
)

func questionCall(t *testing.T, name string, args any) llmtest.ToolCall {
	t.Helper()
	b, err := json.Marshal(args)
	if err != nil {
		t.Fatal(err)
	}
	return llmtest.ToolCall{Name: name, Arguments: string(b)}
}

var twoQuestions = map[string]any{"questions": []map[string]any{
	{"id": "db", "question": "Which database?", "header": "Storage",
		"options": []map[string]string{{"label": "SQLite", "description": "embedded"}, {"label": "Postgres"}}},
	{"id": "langs", "question": "Which languages?", "multi_select": true,
		"options": []map[string]string{{"label": "Go"}, {"label": "Rust"}, {"label": "Zig"}}},
}}

// ptyScreen is the master side of a pseudo-terminal: what the child
// writes to it, with a wait for a text to appear (each read wakes it).
type ptyScreen struct {
	master *os.File
	mu     sync.Mutex
	buf    bytes.Buffer
	more   chan struct{}
	done   chan struct{}
}

// openPTY returns the screen and the slave side (to give the child).
func openPTY(t *testing.T) (*ptyScreen, *os.File) {
	t.Helper()
	master, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals here: %v", err)
	}
	t.Cleanup(func() { master.Close() })
	if err := unix.IoctlSetPointerInt(int(master.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(int(master.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	slave, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	return &ptyScreen{master: master, more: make(chan struct{}, 1), done: make(chan struct{})}, slave
}

func (s *ptyScreen) read() {
	defer close(s.done)
	b := make([]byte, 4096)
	for {
		n, err := s.master.Read(b)
		s.mu.Lock()
		s.buf.Write(b[:n])
		s.mu.Unlock()
		select {
		case s.more <- struct{}{}:
		default:
		}
		if err != nil {
			return
		}
	}
}

func (s *ptyScreen) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.String()
}

// waitFor waits until the screen has shown text n times.
func (s *ptyScreen) waitFor(t *testing.T, text string, n int) {
	t.Helper()
	for strings.Count(s.String(), text) < n {
		select {
		case <-s.more:
		case <-s.done:
			t.Fatalf("the terminal closed before %q (x%d):\n%s", text, n, s.String())
		}
	}
}

// TestQuestionsAndPlanOnTerminal runs `dsh run --plan --json -` with the
// prompt piped and a pseudo-terminal as the controlling terminal: the
// form's questions are answered there (a number after an invalid one,
// then two numbers for the multi-select question), the plan is approved
// with y, plan mode ends and the write the model makes next runs.
func TestQuestionsAndPlanOnTerminal(t *testing.T) {
	e := newEnv(t)
	withoutExternalAgents(t, e)
	file := filepath.Join(e.cwd, "out.txt")
	e.srv.Enqueue(
		llmtest.Response{ToolCalls: []llmtest.ToolCall{questionCall(t, question.AskName, twoQuestions)}},
		llmtest.Response{ToolCalls: []llmtest.ToolCall{questionCall(t, question.ExitName, map[string]string{"plan": "# Plan\n1. write out.txt"})}},
		llmtest.Response{ToolCalls: []llmtest.ToolCall{questionCall(t, "write", map[string]string{"file_path": file, "content": "planned\n"})}},
		llmtest.Response{Text: "done"},
	)
	screen, slave := openPTY(t)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	c := e.cmd(ctx, "run", "--plan", "--json", "-")
	// Lines in the piped prompt must not answer anything.
	c.Stdin = strings.NewReader("plan and write\n1\ny\n")
	var stdout bytes.Buffer
	c.Stdout, c.Stderr = &stdout, slave
	c.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 2}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	slave.Close()
	go screen.read()

	screen.waitFor(t, "Which database?", 1)
	if !strings.Contains(screen.String(), "1. SQLite — embedded") {
		t.Fatalf("options not shown:\n%s", screen.String())
	}
	write := func(s string) {
		if _, err := screen.master.WriteString(s); err != nil {
			t.Fatal(err)
		}
	}
	write("7\n")
	screen.waitFor(t, "There is no option 7", 1)
	write("2\n")
	screen.waitFor(t, "Which languages?", 1)
	write("1, 3\n")
	screen.waitFor(t, "Approve the plan?", 1)
	if !strings.Contains(screen.String(), "│ # Plan") {
		t.Fatalf("plan not shown:\n%s", screen.String())
	}
	write("y\n")
	if err := c.Wait(); err != nil {
		t.Fatalf("dsh: %v\nterminal:\n%s", err, screen.String())
	}
	<-screen.done
	if b, err := os.ReadFile(file); err != nil || string(b) != "planned\n" {
		t.Fatalf("out.txt %q %v; terminal:\n%s", b, err, screen.String())
	}
	events, res := parseJSONRun(t, stdout.String())
	if res.Status != "completed" {
		t.Fatalf("result %+v", res)
	}
	var answers []question.Answered
	var modes []question.PlanMode
	for _, ev := range events {
		switch ev.Type {
		case session.TypeQuestionAnswer:
			var a question.Answered
			if err := json.Unmarshal(ev.Data, &a); err != nil {
				t.Fatal(err)
			}
			answers = append(answers, a)
		case session.TypePlanMode:
			var m question.PlanMode
			if err := json.Unmarshal(ev.Data, &m); err != nil {
				t.Fatal(err)
			}
			modes = append(modes, m)
		}
	}
	if len(answers) != 2 || !reflect.DeepEqual(answers[0].Answers, map[string][]string{"db": {"Postgres"}, "langs": {"Go", "Zig"}}) ||
		answers[1].Approved == nil || !*answers[1].Approved {
		t.Fatalf("answers %+v", answers)
	}
	if len(modes) != 2 || !modes[0].Active || modes[1].Active || modes[1].Source != question.SourcePlanApproved {
		t.Fatalf("plan/mode %+v", modes)
	}
	// sessions show renders the answers and the mode changes.
	show, _, code := e.dsh("", "sessions", "show", res.SessionID)
	for _, want := range []string{"[plan mode] on (user)", "[answer] db: Postgres; langs: Go, Zig", "[answer] plan approved", "[plan mode] off (plan-approved)"} {
		if code != 0 || !strings.Contains(show, want) {
			t.Errorf("sessions show (exit %d) lacks %q:\n%s", code, want, show)
		}
	}
}

// TestQuestionWithoutTerminalFailsAtOnce: with no controlling terminal
// (stdin a pipe), a question fails at once with QUESTION_UNAVAILABLE and
// the run goes on to its end.
func TestQuestionWithoutTerminalFailsAtOnce(t *testing.T) {
	e := newEnv(t)
	withoutExternalAgents(t, e)
	e.srv.Enqueue(
		llmtest.Response{ToolCalls: []llmtest.ToolCall{questionCall(t, question.AskName, twoQuestions)}},
		llmtest.Response{Text: "assumed SQLite"},
	)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	c := e.cmd(ctx, "run", "--json", "-")
	c.Stdin = strings.NewReader("ask me\n")
	var stdout, stderr bytes.Buffer
	c.Stdout, c.Stderr = &stdout, &stderr
	// A new session: no controlling terminal, whatever the test runs in.
	c.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := c.Run(); err != nil {
		t.Fatalf("dsh: %v\n%s", err, stderr.String())
	}
	events, res := parseJSONRun(t, stdout.String())
	if res.Status != "completed" || res.Text != "assumed SQLite" {
		t.Fatalf("result %+v", res)
	}
	var result session.ToolResult
	var answered question.Answered
	for _, ev := range events {
		switch ev.Type {
		case session.TypeToolResult:
			_ = json.Unmarshal(ev.Data, &result)
		case session.TypeQuestionAnswer:
			_ = json.Unmarshal(ev.Data, &answered)
		}
	}
	if result.Error == nil || result.Error.Code != question.CodeUnavailable {
		t.Fatalf("tool result %+v", result)
	}
	if answered.Status != question.StatusUnavailable {
		t.Fatalf("question/answer %+v", answered)
	}
}

// TestPlanFlagsAcrossRuns: --plan starts a session in plan mode (a write
// is refused); --continue keeps it; --continue --no-plan leaves it and
// the write runs.
func TestPlanFlagsAcrossRuns(t *testing.T) {
	e := newEnv(t)
	withoutExternalAgents(t, e)
	file := filepath.Join(e.cwd, "out.txt")
	write := questionCall(t, "write", map[string]string{"file_path": file, "content": "x\n"})
	e.srv.Enqueue(
		llmtest.Response{ToolCalls: []llmtest.ToolCall{write}}, llmtest.Response{Text: "refused"},
		llmtest.Response{ToolCalls: []llmtest.ToolCall{write}}, llmtest.Response{Text: "still refused"},
		llmtest.Response{ToolCalls: []llmtest.ToolCall{write}}, llmtest.Response{Text: "written"},
	)
	codes := func(out string) []string {
		events, _ := parseJSONRun(t, out)
		var got []string
		for _, ev := range events {
			if ev.Type == session.TypeToolResult {
				var r session.ToolResult
				_ = json.Unmarshal(ev.Data, &r)
				code := ""
				if r.Error != nil {
					code = r.Error.Code
				}
				got = append(got, code)
			}
		}
		return got
	}
	out, stderr, code := e.dsh("", "run", "--json", "--plan", "write out.txt")
	if code != 0 || !reflect.DeepEqual(codes(out), []string{question.CodePlanModeActive}) {
		t.Fatalf("--plan: exit %d, results %v\n%s", code, codes(out), stderr)
	}
	out, _, code = e.dsh("", "run", "--json", "--continue", "write it now")
	if code != 0 || !reflect.DeepEqual(codes(out), []string{question.CodePlanModeActive}) {
		t.Fatalf("--continue: exit %d, results %v", code, codes(out))
	}
	out, _, code = e.dsh("", "run", "--json", "--continue", "--no-plan", "go ahead")
	if code != 0 || !reflect.DeepEqual(codes(out), []string{""}) || !fileExists(file) {
		t.Fatalf("--no-plan: exit %d, results %v", code, codes(out))
	}
	if _, stderr, code := e.dsh("", "run", "--plan", "--no-plan", "x"); code != 2 || !strings.Contains(stderr, "exclusive") {
		t.Fatalf("both flags: exit %d %s", code, stderr)
	}
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
