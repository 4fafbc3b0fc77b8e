package tui_test

import (
	"bufio"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/dsh-dev/dsh/internal/llm/llmtest"
	"github.com/dsh-dev/dsh/internal/session"
)

// askCall is a scripted ask_user_question call.
func askCall(items ...map[string]any) llmtest.ToolCall {
	b, _ := json.Marshal(map[string]any{"questions": items})
	return llmtest.ToolCall{Name: "ask_user_question", Arguments: string(b)}
}

func planCall(plan string) llmtest.ToolCall {
	b, _ := json.Marshal(map[string]any{"plan": plan})
	return llmtest.ToolCall{Name: "exit_plan_mode", Arguments: string(b)}
}

func writeCall(path, content string) llmtest.ToolCall {
	b, _ := json.Marshal(map[string]any{"file_path": path, "content": content})
	return llmtest.ToolCall{Name: "write", Arguments: string(b)}
}

func opts(labels ...string) []map[string]any {
	var out []map[string]any
	for _, l := range labels {
		out = append(out, map[string]any{"label": l, "description": "about " + strings.ToLower(l)})
	}
	return out
}

// lastToolResult is the text of the last tool result the model was sent.
func lastRequest(srv *llmtest.Server) string {
	reqs := srv.Requests()
	if len(reqs) == 0 {
		return ""
	}
	return string(reqs[len(reqs)-1].Body)
}

// TestAnswerQuestions answers a single-select question with a digit and
// a multi-select one with space and enter; the answers reach the model
// and the log, and the scrollback shows what was asked and answered.
func TestAnswerQuestions(t *testing.T) {
	tm := newTerm(t)
	tm.srv.Enqueue(
		llmtest.Response{Text: "One question first.", ToolCalls: []llmtest.ToolCall{askCall(map[string]any{
			"id": "db", "header": "Database", "question": "Which database should the service use?", "options": opts("Postgres", "SQLite")})}},
		llmtest.Response{ToolCalls: []llmtest.ToolCall{askCall(map[string]any{
			"id": "checks", "header": "Checks", "question": "Which checks should CI run?", "multi_select": true,
			"options": opts("Unit tests", "Race detector", "Linters")})}},
		llmtest.Response{Text: "Noted: SQLite, with unit tests and linters."},
	)
	tm.start(100, 34, "tui")
	tm.waitFor("/help for commands")
	tm.typeLine("set up the service")
	s := tm.waitFor("dsh asks")
	for _, want := range []string{"DATABASE", "Which database should the service use?", "○ 1. Postgres", "about sqlite", "Other: type your own answer", "answer the question above"} {
		if !strings.Contains(s, want) {
			t.Errorf("question panel lacks %q:\n%s", want, s)
		}
	}
	tm.keys("2")
	s = tm.waitFor("Which checks should CI run?")
	if !strings.Contains(s, "[ ] 1. Unit tests") {
		t.Errorf("multi-select panel:\n%s", s)
	}
	tm.keys("Space", "Down", "Down")
	tm.keys("Space")
	s = tm.waitFor("[x] 3. Linters")
	if !strings.Contains(s, "[x] 1. Unit tests") || !strings.Contains(s, "[ ] 2. Race detector") {
		t.Errorf("toggles:\n%s", s)
	}
	tm.keys("Enter")
	s = tm.waitFor("Noted: SQLite, with unit tests and linters.")
	for _, want := range []string{"? Database · Which database should the service use?", "⎿ SQLite", "? Checks · Which checks should CI run?", "⎿ Unit tests, Linters"} {
		if !strings.Contains(tm.history(), want) {
			t.Errorf("scrollback lacks %q:\n%s", want, s)
		}
	}
	if strings.Contains(s, "dsh asks") {
		t.Errorf("the panel stayed:\n%s", s)
	}
	if body := lastRequest(tm.srv); !strings.Contains(body, "Unit tests") || !strings.Contains(body, "Linters") {
		t.Error("the model was not sent the multi-select answer")
	}
	tm.keys("C-d")
	tm.exitStatus()
	id := sessionLine.FindStringSubmatch(tm.screen())
	if id == nil {
		t.Fatalf("no session line:\n%s", tm.screen())
	}
	var answers []string
	for _, e := range tm.export(id[1]) {
		if e.Type == session.TypeQuestionAnswer {
			answers = append(answers, string(e.Data))
		}
	}
	if len(answers) != 2 || !strings.Contains(answers[0], `"db":["SQLite"]`) || !strings.Contains(answers[1], `"checks":["Unit tests","Linters"]`) {
		t.Errorf("logged answers: %v", answers)
	}
}

// TestPlanModeRefusesWritesThenPlanIsApproved: /plan puts the session in
// plan mode (PLAN on the status line); the model's write is refused; its
// first plan is sent back with feedback (which reaches the model), the
// second approved, which ends plan mode, and the write then goes through.
func TestPlanModeRefusesWritesThenPlanIsApproved(t *testing.T) {
	tm := newTerm(t)
	target := filepath.Join(tm.cwd, "plan.txt")
	tm.srv.Enqueue(
		llmtest.Response{ToolCalls: []llmtest.ToolCall{writeCall(target, "too early\n")}},
		llmtest.Response{ToolCalls: []llmtest.ToolCall{planCall("# Plan v1\n\n1. write `plan.txt`\n2. stop")}},
		llmtest.Response{ToolCalls: []llmtest.ToolCall{planCall("# Plan v2\n\n1. write `plan.txt` with a greeting\n2. say so")}},
		llmtest.Response{ToolCalls: []llmtest.ToolCall{writeCall(target, "hello\n")}},
		llmtest.Response{Text: "Wrote plan.txt as planned."},
	)
	tm.start(100, 34, "tui")
	tm.waitFor("/help for commands")
	tm.typeLine("/plan")
	// The notice is printed and the status line redrawn on the next
	// frame: wait for both.
	tm.waitScreen("PLAN on the status line", func(s string) bool {
		return strings.Contains(s, "plan mode on") && strings.Contains(s, "\n PLAN  deepseek/")
	})
	tm.typeLine("write plan.txt")
	s := tm.waitFor("Plan ready for review")
	for _, want := range []string{"Plan v1", "1. write plan.txt", "› Approve", "Keep planning"} {
		if !strings.Contains(s, want) {
			t.Errorf("plan panel lacks %q:\n%s", want, s)
		}
	}
	if h := tm.history(); !regexp.MustCompile(`● write .*plan\.txt\n  ⎿ .*(PLAN_MODE_ACTIVE|plan mode)`).MatchString(h) {
		t.Errorf("the refused write is not shown:\n%s", h)
	}
	if _, err := os.Stat(target); err == nil {
		t.Fatal("the write ran in plan mode")
	}
	tm.keys("n")
	tm.keys("-l", "greet the reader")
	tm.waitFor("greet the reader▏")
	tm.keys("Enter")
	tm.waitFor("Plan v2")
	if !strings.Contains(lastRequest(tm.srv), "greet the reader") {
		t.Error("the feedback did not reach the model")
	}
	tm.keys("y")
	tm.waitFor("Wrote plan.txt as planned.")
	s = tm.waitScreen("the turn to end", func(s string) bool { return !strings.Contains(s, "working") })
	if strings.Contains(s, " PLAN  ") {
		t.Errorf("PLAN stayed after the approval:\n%s", s)
	}
	h := tm.history()
	for _, want := range []string{"↺ kept planning", "⎿ feedback: greet the reader", "✓ plan approved", "plan approved: plan mode off"} {
		if !strings.Contains(h, want) {
			t.Errorf("scrollback lacks %q", want)
		}
	}
	if got, err := os.ReadFile(target); err != nil || string(got) != "hello\n" {
		t.Errorf("plan.txt = %q, %v", got, err)
	}
	tm.keys("C-d")
	tm.exitStatus()
}

// TestQuestionSurvivesReattach: a TUI attached to dsh serve leaves while
// a question waits; the host keeps it, and the next TUI shows it again
// and answers it; /plan works over the API as well.
func TestQuestionSurvivesReattach(t *testing.T) {
	tm := newTerm(t)
	tm.srv.Enqueue(
		llmtest.Response{ToolCalls: []llmtest.ToolCall{askCall(map[string]any{
			"id": "lang", "question": "Which language?", "options": opts("Go", "Rust")})}},
		llmtest.Response{Text: "Go it is."},
	)
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
	go func() { _, _ = io.Copy(io.Discard, out) }()
	tm.start(100, 30, "tui", "--attach", url)
	tm.waitFor("/help for commands")
	tm.typeLine("pick a language")
	s := tm.waitFor("Which language?")
	id := sessionIDOnStatus(t, s)
	// The terminal goes away without a word to the server.
	if err := tm.tmux("kill-session", "-t", "m"); err != nil {
		t.Fatal(err)
	}
	tm.start(100, 30, "tui", "--attach", url, "--resume", id)
	s = tm.waitFor("Which language?")
	if !strings.Contains(s, "dsh asks") {
		t.Errorf("the reattached UI does not show the question panel:\n%s", s)
	}
	tm.keys("Enter") // the first option
	tm.waitFor("Go it is.")
	// Plan mode over the API too.
	tm.typeLine("/plan")
	tm.waitScreen("PLAN on the status line", func(s string) bool { return strings.Contains(s, "\n PLAN  deepseek/") })
	tm.keys("C-d")
	tm.exitStatus()
}

// sessionIDOnStatus finds the session's short id on the status line and
// returns it (a prefix --resume accepts).
func sessionIDOnStatus(t *testing.T, screen string) string {
	t.Helper()
	lines := strings.Split(strings.TrimRight(screen, "\n"), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		for _, f := range strings.Split(lines[i], " · ") {
			f = strings.TrimSpace(f)
			if len(f) == 13 && strings.Count(f, "-") == 1 {
				return f
			}
		}
	}
	t.Fatalf("no session id on the status line:\n%s", screen)
	return ""
}
