package cli_test

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/dsh-dev/dsh/internal/sandbox"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	_ "modernc.org/sqlite"

	"github.com/dsh-dev/dsh/internal/cli"
	"github.com/dsh-dev/dsh/internal/llm/llmtest"
	"github.com/dsh-dev/dsh/internal/proc/proctest"
	"github.com/dsh-dev/dsh/internal/session"
)

var dshBin, fakeACPBin, fakeCodexBin string

// TestMain builds the real dsh binary once: these tests drive it as a
// user would, as a subprocess, against the fake model server.
func TestMain(m *testing.M) {
	// needSandbox probes the real backends, which run this binary as the
	// sandbox helper.
	sandbox.RunHelperIfRequested()
	dir, err := os.MkdirTemp("", "dsh-cli-test")
	if err != nil {
		panic(err)
	}
	dshBin = filepath.Join(dir, "dsh")
	fakeACPBin = filepath.Join(dir, "dsh-fakeacp")
	fakeCodexBin = filepath.Join(dir, "dsh-fakecodex")
	for bin, pkg := range map[string]string{
		dshBin: "github.com/dsh-dev/dsh/cmd/dsh", fakeACPBin: "github.com/dsh-dev/dsh/cmd/dsh-fakeacp",
		fakeCodexBin: "github.com/dsh-dev/dsh/cmd/dsh-fakecodex",
	} {
		out, err := exec.Command("go", "build", "-o", bin, pkg).CombinedOutput()
		if err != nil {
			fmt.Fprintf(os.Stderr, "build %s: %v\n%s", pkg, err, out)
			os.Exit(1)
		}
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

type env struct {
	t    *testing.T
	home string
	cwd  string
	srv  *llmtest.Server
}

func newEnv(t *testing.T) *env {
	srv := llmtest.New()
	t.Cleanup(srv.Close)
	return &env{t: t, home: t.TempDir(), cwd: t.TempDir(), srv: srv}
}

func (e *env) cmd(ctx context.Context, args ...string) *exec.Cmd {
	c := exec.CommandContext(ctx, dshBin, args...)
	c.Dir = e.cwd
	c.Env = append(os.Environ(),
		"DSH_HOME="+e.home,
		"DEEPSEEK_API_KEY=test-key",
		"DEEPSEEK_BASE_URL="+e.srv.URL(),
	)
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return c
}

// dsh runs the binary to completion.
func (e *env) dsh(stdin string, args ...string) (stdout, stderr string, code int) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(e.t.Context(), 60*time.Second)
	defer cancel()
	c := e.cmd(ctx, args...)
	c.Stdin = strings.NewReader(stdin)
	var o, s bytes.Buffer
	c.Stdout, c.Stderr = &o, &s
	err := c.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		e.t.Fatalf("run dsh: %v", err)
	}
	return o.String(), s.String(), code
}

func bashCall(cmd string) llmtest.ToolCall {
	b, _ := json.Marshal(map[string]string{"command": cmd, "description": "test"})
	return llmtest.ToolCall{Name: "bash", Arguments: string(b)}
}

// parseJSONRun splits dsh run --json output into events and the result.
func parseJSONRun(t *testing.T, out string) ([]session.Event, cli.RunResult) {
	t.Helper()
	var events []session.Event
	var res cli.RunResult
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		line := sc.Bytes()
		var probe struct{ Type string }
		if err := json.Unmarshal(line, &probe); err != nil {
			t.Fatalf("non-JSON line %q: %v", line, err)
		}
		if probe.Type == "run/result" {
			if err := json.Unmarshal(line, &res); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if res.Type != "" {
			t.Fatalf("line after run/result: %s", line)
		}
		var e session.Event
		if err := json.Unmarshal(line, &e); err != nil {
			t.Fatal(err)
		}
		events = append(events, e)
	}
	if res.Type != "run/result" {
		t.Fatalf("no run/result line in:\n%s", out)
	}
	return events, res
}

func exportEvents(t *testing.T, e *env, id string) (session.Header, []session.Event, string) {
	t.Helper()
	out, stderr, code := e.dsh("", "sessions", "export", id)
	if code != 0 {
		t.Fatalf("export: %d %s", code, stderr)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	var h session.Header
	if err := json.Unmarshal([]byte(lines[0]), &h); err != nil {
		t.Fatal(err)
	}
	var events []session.Event
	for _, l := range lines[1:] {
		var ev session.Event
		if err := json.Unmarshal([]byte(l), &ev); err != nil {
			t.Fatal(err)
		}
		events = append(events, ev)
	}
	return h, events, out
}

func countTypes(events []session.Event) map[string]int {
	m := map[string]int{}
	for _, e := range events {
		m[e.Type]++
	}
	return m
}

func TestRunJSONMultiStep(t *testing.T) {
	e := newEnv(t)
	e.srv.Enqueue(
		llmtest.Response{Reasoning: "plan", ToolCalls: []llmtest.ToolCall{bashCall("echo 42 > answer.txt")}, Usage: &llmtest.Usage{Input: 100, Output: 10}},
		llmtest.Response{ToolCalls: []llmtest.ToolCall{bashCall("cat answer.txt")}, Usage: &llmtest.Usage{Input: 50, CacheRead: 100, Output: 10}},
		llmtest.Response{Text: "The answer is 42.", Usage: &llmtest.Usage{Input: 20, CacheRead: 150, Output: 8}},
	)
	out, stderr, code := e.dsh("", "run", "--json", "write 42 to a file and read it back")
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	events, res := parseJSONRun(t, out)
	if res.Status != "completed" || res.Text != "The answer is 42." || res.SessionID == "" {
		t.Fatalf("result %+v", res)
	}
	if res.Usage.InputTokens != 170 || res.Usage.CacheReadTokens != 250 || res.Usage.OutputTokens != 28 {
		t.Errorf("usage %+v", res.Usage)
	}
	for i, ev := range events {
		if ev.Seq != int64(i) {
			t.Fatalf("streamed seq %d at %d", ev.Seq, i)
		}
	}
	if got, err := os.ReadFile(filepath.Join(e.cwd, "answer.txt")); err != nil || string(got) != "42\n" {
		t.Errorf("the task did not happen in the cwd: %q %v", got, err)
	}
	// The stored log equals what was streamed, and it is balanced.
	_, stored, _ := exportEvents(t, e, res.SessionID)
	if len(stored) != len(events) {
		t.Fatalf("stored %d events, streamed %d", len(stored), len(events))
	}
	c := countTypes(stored)
	if c[session.TypeTurnStart] != 1 || c[session.TypeTurnEnd] != 1 || c[session.TypeToolCall] != 2 || c[session.TypeToolResult] != 2 || c[session.TypeStepStart] != 3 {
		t.Errorf("event counts %v", c)
	}
	if session.Closers(stored) != nil {
		t.Error("stored log is not balanced")
	}
	// The API key never reaches the log.
	if strings.Contains(out, "test-key") {
		t.Error("API key leaked into the event stream")
	}
	if h := e.srv.Requests()[0].Header.Get("Authorization"); h != "Bearer test-key" {
		t.Errorf("authorization header %q", h)
	}
}

func TestRunPlainPrintsTextAndReadsStdin(t *testing.T) {
	e := newEnv(t)
	e.srv.Enqueue(llmtest.Response{Text: "hello from the model"})
	out, stderr, code := e.dsh("prompt from stdin", "run", "-")
	if code != 0 || strings.TrimSpace(out) != "hello from the model" {
		t.Fatalf("exit %d out %q err %q", code, out, stderr)
	}
	found := false
	for _, m := range e.srv.Requests()[0].Messages() {
		found = found || (m["role"] == "user" && m["content"] == "prompt from stdin")
	}
	if !found {
		t.Errorf("prompt not sent: %s", e.srv.Requests()[0].Body)
	}
}

func TestExitCodes(t *testing.T) {
	for _, tc := range []struct {
		name   string
		script []llmtest.Response
		args   []string
		env    []string
		code   int
		stderr string
	}{
		{"model auth failure", []llmtest.Response{{Status: 401}}, []string{"run", "hi"}, nil, 1, "AUTH"},
		{"max tokens", []llmtest.Response{{Text: "cut", FinishReason: "max-tokens"}}, []string{"run", "--json", "hi"}, nil, 1, ""},
		{"missing key", nil, []string{"run", "hi"}, []string{"DEEPSEEK_API_KEY="}, 2, "DEEPSEEK_API_KEY"},
		{"unknown provider", nil, []string{"run", "--model", "nope/x", "hi"}, nil, 2, "unknown provider"},
		{"no prompt", nil, []string{"run"}, nil, 2, "PROMPT"},
		{"bad flag", nil, []string{"run", "--bogus", "hi"}, nil, 2, ""},
		{"unknown command", nil, []string{"frobnicate"}, nil, 2, "unknown command"},
		{"resume unknown", nil, []string{"run", "--resume", "no-such-id", "hi"}, nil, 2, "dsh sessions list --all"},
		{"bad config", nil, []string{"run", "hi"}, nil, 2, "config.yaml"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			if tc.name == "bad config" {
				if err := os.WriteFile(filepath.Join(e.home, "config.yaml"), []byte("modle: x\n"), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			e.srv.Enqueue(tc.script...)
			ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
			defer cancel()
			c := e.cmd(ctx, tc.args...)
			c.Env = append(c.Env, tc.env...)
			var stderr bytes.Buffer
			c.Stderr = &stderr
			err := c.Run()
			code := 0
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				code = ee.ExitCode()
			}
			if code != tc.code || !strings.Contains(stderr.String(), tc.stderr) {
				t.Fatalf("exit %d (want %d), stderr %q (want %q)", code, tc.code, stderr.String(), tc.stderr)
			}
			if tc.code == 2 && e.srv.RequestCount() != 0 {
				t.Error("a configuration error still sent a request")
			}
		})
	}
}

func TestKill9MidToolThenResume(t *testing.T) {
	e := newEnv(t)
	fifo, lines := proctest.Fifo(t)
	e.srv.Enqueue(
		llmtest.Response{Text: "running", ToolCalls: []llmtest.ToolCall{bashCall("echo started > " + fifo + "; sleep 60"), bashCall("echo second")}},
	)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	c := e.cmd(ctx, "run", "--json", "do something slow")
	var out bytes.Buffer
	c.Stdout = &out
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- c.Wait() }()
	select {
	case <-lines:
	case err := <-exited:
		t.Fatalf("dsh exited before the tool started: %v\n%s", err, out.String())
	case <-ctx.Done():
		t.Fatal("tool never started")
	}
	// kill -9 the whole process group: dsh and its tool.
	if err := syscall.Kill(-c.Process.Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-exited
	if !strings.Contains(out.String(), `"type":"tool/call"`) {
		t.Fatalf("tool/call was not streamed before the kill:\n%s", out.String())
	}
	list, _, code := e.dsh("", "sessions", "list", "--json")
	var headers []session.Header
	if code != 0 || json.Unmarshal([]byte(list), &headers) != nil || len(headers) != 1 {
		t.Fatalf("sessions list: %d %s", code, list)
	}
	sid := headers[0].ID

	// show reads without repairing; resume repairs and continues.
	shown, _, code := e.dsh("", "sessions", "show", sid)
	if code != 0 || !strings.Contains(shown, "TOOL_OUTCOME_UNKNOWN") {
		t.Fatalf("show: %d\n%s", code, shown)
	}
	e.srv.Enqueue(llmtest.Response{Text: "recovered after the crash"})
	stdout, stderr, code := e.dsh("", "run", "--resume", sid, "please continue")
	if code != 0 || !strings.Contains(stdout, "recovered after the crash") {
		t.Fatalf("resume: exit %d\n%s\n%s", code, stdout, stderr)
	}
	_, events, _ := exportEvents(t, e, sid)
	if session.Closers(events) != nil {
		t.Fatal("resumed log is not balanced")
	}
	var results []session.ToolResult
	var ends []session.TurnEnd
	for _, ev := range events {
		switch ev.Type {
		case session.TypeToolResult:
			var r session.ToolResult
			_ = ev.Decode(&r)
			results = append(results, r)
		case session.TypeTurnEnd:
			var te session.TurnEnd
			_ = ev.Decode(&te)
			ends = append(ends, te)
		}
	}
	if len(results) != 2 || results[0].Error.Code != session.CodeToolOutcomeUnknown || results[1].Error.Code != session.CodeToolNotStarted {
		t.Fatalf("repaired results %+v", results)
	}
	if len(ends) != 2 || ends[0].Reason.Kind != session.EndInterrupted || ends[1].Reason.Kind != session.EndCompleted || ends[1].Turn != 2 {
		t.Fatalf("turn ends %+v", ends)
	}
	// The resumed request carried the repaired history.
	reqs := e.srv.Requests()
	if n := reqs[len(reqs)-1].ToolResultCount(); n != 2 {
		t.Errorf("resumed request has %d tool results, want 2", n)
	}
}

func TestInterrupt(t *testing.T) {
	e := newEnv(t)
	e.srv.Enqueue(llmtest.Response{Text: "a long answer that will stall", ChunkRunes: 4, StallAfter: 3})
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	c := e.cmd(ctx, "run", "--json", "hi")
	var out bytes.Buffer
	c.Stdout = &out
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	if err := e.srv.WaitRequests(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if err := c.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	err := c.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 130 {
		t.Fatalf("exit = %v, want 130", err)
	}
	events, res := parseJSONRun(t, out.String())
	if res.Status != "aborted" {
		t.Errorf("status %q", res.Status)
	}
	if session.Closers(events) != nil {
		t.Error("aborted log is not balanced")
	}
	last := events[len(events)-1]
	var te session.TurnEnd
	_ = last.Decode(&te)
	if last.Type != session.TypeTurnEnd || te.Reason.Kind != session.EndAborted || te.Reason.Cause != "user" {
		t.Errorf("last event %s %+v", last.Type, te)
	}
}

func TestSecondInterruptExitsAtOnce(t *testing.T) {
	e := newEnv(t)
	fifo, lines := proctest.Fifo(t)
	// The tool ignores SIGTERM, so the first cancel has to wait out the
	// kill grace; the second interrupt must not.
	e.srv.Enqueue(llmtest.Response{ToolCalls: []llmtest.ToolCall{bashCall("trap '' TERM; echo started > " + fifo + "; sleep 60")}})
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	c := e.cmd(ctx, "run", "hi")
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- c.Wait() }()
	select {
	case <-lines:
	case err := <-exited:
		t.Fatalf("dsh exited before the tool started: %v", err)
	}
	_ = c.Process.Signal(os.Interrupt)
	_ = c.Process.Signal(os.Interrupt)
	err := <-exited
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 130 {
		t.Fatalf("exit = %v, want 130", err)
	}
	_ = syscall.Kill(-c.Process.Pid, syscall.SIGKILL)
}

func TestSessionsListShowExportImport(t *testing.T) {
	e := newEnv(t)
	e.srv.Enqueue(
		llmtest.Response{ToolCalls: []llmtest.ToolCall{bashCall("echo hi")}},
		llmtest.Response{Text: "first session"},
		llmtest.Response{Text: "second session"},
	)
	for _, p := range []string{"one", "two"} {
		if _, stderr, code := e.dsh("", "run", p); code != 0 {
			t.Fatalf("run: %s", stderr)
		}
	}
	out, _, code := e.dsh("", "sessions", "list", "--json")
	var headers []session.Header
	if code != 0 || json.Unmarshal([]byte(out), &headers) != nil || len(headers) != 2 {
		t.Fatalf("list: %d %s", code, out)
	}
	for _, h := range headers {
		if h.Cwd != e.cwd || h.Version != session.FormatVersion || h.CreatedAt == 0 {
			t.Errorf("header %+v", h)
		}
	}
	// Sessions of another directory are hidden unless --all.
	other := *e
	other.cwd = t.TempDir()
	if out, _, _ := other.dsh("", "sessions", "list", "--json"); strings.TrimSpace(out) != "[]" {
		t.Errorf("list in another dir = %s", out)
	}
	if out, _, _ := other.dsh("", "sessions", "list", "--all", "--json"); !strings.Contains(out, headers[0].ID) {
		t.Errorf("list --all = %s", out)
	}
	id := headers[1].ID // newest first: the first session is last
	shown, _, _ := e.dsh("", "sessions", "show", id)
	for _, want := range []string{"[user] one", "[tool bash]", "[bash result]", "[exit code: 0]", "[assistant] first session", "completed"} {
		if !strings.Contains(shown, want) {
			t.Errorf("transcript lacks %q:\n%s", want, shown)
		}
	}
	raw, _, _ := e.dsh("", "sessions", "show", "--json", id)
	if n := strings.Count(raw, "\n"); n < 10 {
		t.Errorf("show --json printed %d lines", n)
	}

	_, _, exported := exportEvents(t, e, id)
	file := filepath.Join(t.TempDir(), "s.jsonl")
	if err := os.WriteFile(file, []byte(exported), 0o600); err != nil {
		t.Fatal(err)
	}
	fresh := *e
	fresh.home = t.TempDir()
	if out, stderr, code := fresh.dsh("", "sessions", "import", file); code != 0 || !strings.Contains(out, id) {
		t.Fatalf("import: %d %s %s", code, out, stderr)
	}
	_, _, again := exportEvents(t, &fresh, id)
	if again != exported {
		t.Errorf("export after import differs:\n%s\n---\n%s", exported, again)
	}
	if _, stderr, code := fresh.dsh("", "sessions", "import", file); code == 0 || !strings.Contains(stderr, "exists") {
		t.Errorf("duplicate import: %d %s", code, stderr)
	}
}

func TestCorruptRowFailsOnlyItsSession(t *testing.T) {
	e := newEnv(t)
	e.srv.Enqueue(llmtest.Response{Text: "a"}, llmtest.Response{Text: "b"})
	for _, p := range []string{"one", "two"} {
		if _, stderr, code := e.dsh("", "run", p); code != 0 {
			t.Fatalf("run: %s", stderr)
		}
	}
	out, _, _ := e.dsh("", "sessions", "list", "--json")
	var headers []session.Header
	if err := json.Unmarshal([]byte(out), &headers); err != nil {
		t.Fatal(err)
	}
	bad, good := headers[0].ID, headers[1].ID
	db, err := sql.Open("sqlite", filepath.Join(e.home, "dsh.db"))
	if err != nil {
		t.Fatal(err)
	}
	res, err := db.Exec(`UPDATE events SET body = '{"type":"turn/start","seq":2,' WHERE session_id = ? AND seq = 2`, bad)
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		t.Fatalf("corrupted %d rows", n)
	}
	db.Close()
	if _, stderr, code := e.dsh("", "sessions", "show", bad); code != 1 || !strings.Contains(stderr, bad) {
		t.Errorf("show corrupt: %d %s", code, stderr)
	}
	if _, stderr, code := e.dsh("", "run", "--resume", bad, "more"); code != 1 || !strings.Contains(stderr, "seq 2") {
		t.Errorf("resume corrupt: %d %s", code, stderr)
	}
	if shown, _, code := e.dsh("", "sessions", "show", good); code != 0 || !strings.Contains(shown, "[assistant] a") {
		t.Errorf("good session unreadable: %d %s", code, shown)
	}
	if out, _, code := e.dsh("", "sessions", "list", "--json"); code != 0 || !strings.Contains(out, good) {
		t.Errorf("list after corruption: %d %s", code, out)
	}
}

func TestVersion(t *testing.T) {
	e := newEnv(t)
	if out, _, code := e.dsh("", "version"); code != 0 || !strings.HasPrefix(out, "dsh ") {
		t.Errorf("version: %d %q", code, out)
	}
}

func TestContinueResumesNewestSessionOfTheDirectory(t *testing.T) {
	e := newEnv(t)
	e.srv.Enqueue(llmtest.Response{Text: "a"}, llmtest.Response{Text: "b"})
	out1, _, _ := e.dsh("", "run", "--json", "one")
	_, r1 := parseJSONRun(t, out1)
	out2, stderr, code := e.dsh("", "run", "--json", "--continue", "two")
	if code != 0 {
		t.Fatalf("continue: %s", stderr)
	}
	events, r2 := parseJSONRun(t, out2)
	if r2.SessionID != r1.SessionID {
		t.Fatalf("continued %s, want %s", r2.SessionID, r1.SessionID)
	}
	if events[0].Type != session.TypeEndSeed {
		t.Errorf("first live event %s, want session/end-seed", events[0].Type)
	}
	// system, prompt, runtime context, answer, new prompt (the unchanged
	// runtime context is not entered again).
	if msgs := e.srv.Requests()[1].Messages(); len(msgs) != 5 {
		t.Errorf("continued request has %d messages, want 5", len(msgs))
	}
	other := *e
	other.cwd = t.TempDir()
	if _, stderr, code := other.dsh("", "run", "--continue", "x"); code != 2 || !strings.Contains(stderr, "no session") {
		t.Errorf("continue in empty dir: %d %s", code, stderr)
	}
}

// TestAPIKeyNeverReachesTheLog: the provider key in dsh's environment is
// not visible to commands, so a model cannot copy it into the log.
func TestAPIKeyNeverReachesTheLog(t *testing.T) {
	e := newEnv(t)
	e.srv.Enqueue(
		llmtest.Response{ToolCalls: []llmtest.ToolCall{bashCall(`echo "key=[$DEEPSEEK_API_KEY]"; env | grep -c DEEPSEEK_API_KEY`)}},
		llmtest.Response{Text: "ok"},
	)
	out, stderr, code := e.dsh("", "run", "--json", "--permission", "full-access", "print the key")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if strings.Contains(out, "test-key") {
		t.Fatal("the API key reached the session log")
	}
	if !strings.Contains(out, `key=[]`) {
		t.Errorf("unexpected command output: %s", out)
	}
}

func TestDoctor(t *testing.T) {
	e := newEnv(t)
	out, stderr, code := e.dsh("", "doctor")
	if code != 0 {
		t.Fatalf("doctor: %d %s", code, stderr)
	}
	for _, want := range []string{"provider deepseek", "DEEPSEEK_API_KEY is set", "sandbox bwrap", "sandbox landlock", "rg", "codex"} {
		if !strings.Contains(out, want) {
			t.Errorf("doctor output lacks %q:\n%s", want, out)
		}
	}
}
