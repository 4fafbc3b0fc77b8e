package claudecode_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dsh-dev/dsh/internal/leakcheck"
	"github.com/dsh-dev/dsh/internal/llm"
	"github.com/dsh-dev/dsh/internal/permission"
	"github.com/dsh-dev/dsh/internal/proc"
	"github.com/dsh-dev/dsh/internal/sandbox"
	"github.com/dsh-dev/dsh/internal/session"
	"github.com/dsh-dev/dsh/internal/subagent"
	"github.com/dsh-dev/dsh/internal/subagent/claudecode"
)

func TestMain(m *testing.M) {
	if code, ok := fakeMain(); ok {
		os.Exit(code)
	}
	os.Exit(leakcheck.Run(m))
}

// fake describes one fake Claude: its modes and where it records what it
// saw.
type fake struct {
	mode, fifo, record string
	o                  claudecode.Options
}

func newProvider(t *testing.T, f fake) *claudecode.Provider {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	o := f.o
	o.Command = exe
	set := map[string]string{
		"CLAUDECODE_FAKE": f.mode, "CLAUDECODE_FIFO": f.fifo, "CLAUDECODE_RECORD": f.record,
		// A race-enabled fake would otherwise sleep a second at exit.
		"GORACE": "atexit_sleep_ms=0",
	}
	for k, v := range o.Env.Set {
		set[k] = v
	}
	o.Env.Set = set
	if o.KillGrace == 0 {
		o.KillGrace = 500 * time.Millisecond
	}
	p, err := claudecode.New(o)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func request(t *testing.T, mode sandbox.Mode) subagent.Request {
	t.Helper()
	log, err := session.NewLog(session.Header{Version: session.FormatVersion, ID: "parent", Cwd: t.TempDir()}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return subagent.Request{
		Prompt:     []llm.Block{llm.TextBlock("do it")},
		Parent:     log,
		Permission: permission.State{Mode: mode},
	}
}

func wait(t *testing.T, r subagent.Run) subagent.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, err := r.Wait(ctx)
	if err != nil {
		t.Fatalf("Wait: %v", err)
	}
	return res
}

func dispose(t *testing.T, r subagent.Run) {
	t.Helper()
	if err := r.Dispose(); err != nil {
		t.Fatalf("Dispose: %v", err)
	}
}

func readRecord(t *testing.T, path string) record {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var rec record
	if err := json.Unmarshal(b, &rec); err != nil {
		t.Fatal(err)
	}
	return rec
}

// flagValue returns the argument after flag, or "" when flag is absent.
func flagValue(args []string, flag string) string {
	if i := slices.Index(args, flag); i >= 0 && i+1 < len(args) {
		return args[i+1]
	}
	return ""
}

// lines collects progress reports and fails the test on one that arrives
// after the result was collected.
type lines struct {
	mu     sync.Mutex
	got    []string
	closed bool
	t      *testing.T
}

func (l *lines) add(s string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		l.t.Errorf("progress after the result: %q", s)
	}
	if strings.Contains(s, "\n") {
		l.t.Errorf("progress line has a newline: %q", s)
	}
	l.got = append(l.got, s)
}

func (l *lines) close() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closed = true
	return slices.Clone(l.got)
}

func TestDelegationThroughService(t *testing.T) {
	svc, err := subagent.NewService(subagent.Options{})
	if err != nil {
		t.Fatal(err)
	}
	rec := filepath.Join(t.TempDir(), "rec.json")
	if err := svc.Register(newProvider(t, fake{mode: "ok", record: rec})); err != nil {
		t.Fatal(err)
	}
	req := request(t, sandbox.WorkspaceWrite)
	progress := &lines{t: t}
	req.Progress = progress.add
	h, err := svc.Start(context.Background(), claudecode.DefaultName, req)
	if err != nil {
		t.Fatal(err)
	}
	want := "claude-code/" + fakeSession
	if h.ChildID() != want {
		t.Errorf("handle child id %q, want %q", h.ChildID(), want)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, err := h.Wait(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := progress.close()
	if res.StopReason != subagent.StopCompleted || res.Text() != "answer to: do it" || res.ChildID != want {
		t.Fatalf("result %+v", res)
	}
	if res.Usage != (llm.Usage{InputTokens: 2000, OutputTokens: 100, CacheReadTokens: 30, CacheWriteTokens: 40}) {
		t.Errorf("usage %+v", res.Usage)
	}
	for _, s := range []string{"success after 2 turns", "$0.0125", "permission denials (1): Bash (touch /outside)"} {
		if !strings.Contains(res.Diagnostic, s) {
			t.Errorf("diagnostic %q lacks %q", res.Diagnostic, s)
		}
	}
	wantLines := []string{
		"claude-code session " + fakeSession + " (model fake-model, permission mode default)",
		"tool Bash: echo hi echo there",
		"tool Bash ok",
		"tool Read: /nope",
		"tool Read error: File does not exist.",
		"claude: answer to: do it",
	}
	if len(got) != len(wantLines)+1 || !slices.Equal(got[:len(wantLines)], wantLines) || !strings.HasPrefix(got[len(wantLines)], "claude-code result success after 2 turns") {
		t.Errorf("progress:\n%s", strings.Join(got, "\n"))
	}
	if err := h.Dispose(); err != nil {
		t.Fatal(err)
	}
	var ends int
	for _, e := range req.Parent.Events() {
		if e.Type == session.TypeSubagentEnd {
			ends++
		}
	}
	if ends != 1 {
		t.Errorf("%d subagent/end events", ends)
	}
	r := readRecord(t, rec)
	if !slices.Equal(r.Args[:6], []string{"-p", "--output-format", "stream-json", "--input-format", "stream-json", "--verbose"}) {
		t.Errorf("argv %q", r.Args)
	}
	if cwd, _ := filepath.EvalSymlinks(req.Parent.Header().Cwd); r.Cwd != cwd {
		t.Errorf("cwd %q, want %q", r.Cwd, cwd)
	}
}

func TestEnvironment(t *testing.T) {
	t.Setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:1")
	t.Setenv("CLAUDE_CODE_SOMETHING", "x")
	t.Setenv("CLAUDECODE_TEST_SECRET", "hidden")
	t.Setenv("EXTRA_PASS", "yes")
	rec := filepath.Join(t.TempDir(), "rec.json")
	r, err := newProvider(t, fake{mode: "ok", record: rec, o: claudecode.Options{
		Env: proc.EnvPolicy{Passthrough: []string{"EXTRA_PASS"}, Set: map[string]string{"DISABLE_TELEMETRY": "0"}},
	}}).Start(context.Background(), request(t, sandbox.ReadOnly))
	if err != nil {
		t.Fatal(err)
	}
	wait(t, r)
	dispose(t, r)
	env := readRecord(t, rec).Env
	for _, kv := range []string{"ANTHROPIC_BASE_URL=http://127.0.0.1:1", "CLAUDE_CODE_SOMETHING=x", "EXTRA_PASS=yes",
		"DISABLE_AUTOUPDATER=1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "DISABLE_TELEMETRY=0"} {
		if !slices.Contains(env, kv) {
			t.Errorf("env lacks %s: %q", kv, env)
		}
	}
	for _, kv := range env {
		if strings.HasPrefix(kv, "CLAUDECODE_TEST_SECRET=") {
			t.Errorf("env leaks %s", kv)
		}
	}
}

func TestPermissionArgv(t *testing.T) {
	for _, tc := range []struct {
		name string
		mode sandbox.Mode
		root bool
		want []string
		note bool
	}{
		{"read-only", sandbox.ReadOnly, false, []string{"--permission-mode", "default", "--disallowedTools", "Edit,Write,NotebookEdit"}, false},
		{"zero fails closed", "", false, []string{"--permission-mode", "default", "--disallowedTools", "Edit,Write,NotebookEdit"}, false},
		{"workspace-write", sandbox.WorkspaceWrite, true, []string{"--permission-mode", "acceptEdits", "--allowedTools", "Bash"}, false},
		{"full access", sandbox.DangerFullAccess, false, []string{"--permission-mode", "bypassPermissions"}, false},
		{"full access as root", sandbox.DangerFullAccess, true, []string{"--permission-mode", "acceptEdits", "--allowedTools", "Bash,Edit,Write,NotebookEdit,WebFetch,WebSearch"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			uid := 1000
			if tc.root {
				uid = 0
			}
			defer claudecode.SetGeteuid(func() int { return uid })()
			rec := filepath.Join(t.TempDir(), "rec.json")
			req := request(t, tc.mode)
			progress := &lines{t: t}
			req.Progress = progress.add
			r, err := newProvider(t, fake{mode: "ok", record: rec}).Start(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			res := wait(t, r)
			dispose(t, r)
			args := readRecord(t, rec).Args
			i := slices.Index(args, "--permission-mode")
			if i < 0 || !slices.Equal(args[i:min(i+len(tc.want), len(args))], tc.want) {
				t.Errorf("argv %q, want %q", args, tc.want)
			}
			for _, f := range []string{"--allowedTools", "--disallowedTools"} {
				if !slices.Contains(tc.want, f) && slices.Contains(args, f) {
					t.Errorf("argv %q has %s", args, f)
				}
			}
			got := progress.close()
			noted := len(got) > 0 && strings.Contains(got[0], "running as root") && strings.Contains(res.Diagnostic, "refuses bypassPermissions")
			if noted != tc.note {
				t.Errorf("root note %v, want %v: progress %q diagnostic %q", noted, tc.note, got, res.Diagnostic)
			}
		})
	}
}

func TestModelEffortResumeArgv(t *testing.T) {
	const sid = "0b7e5d8e-1111-4222-8333-444455556666"
	rec := filepath.Join(t.TempDir(), "rec.json")
	p := newProvider(t, fake{mode: "ok", record: rec, o: claudecode.Options{Model: "default-model"}})
	req := request(t, sandbox.ReadOnly)
	req.Model, req.Effort = "claude-x", "high"
	r, err := p.StartResume(context.Background(), req, sid)
	if err != nil {
		t.Fatal(err)
	}
	if r.ChildID() != "claude-code/"+sid {
		t.Errorf("child id %q", r.ChildID())
	}
	res := wait(t, r)
	dispose(t, r)
	if res.StopReason != subagent.StopCompleted || res.ChildID != "claude-code/"+sid {
		t.Fatalf("result %+v", res)
	}
	args := readRecord(t, rec).Args
	if flagValue(args, "--model") != "claude-x" || flagValue(args, "--effort") != "high" || flagValue(args, "--resume") != sid {
		t.Errorf("argv %q", args)
	}

	// The configured model applies when the request names none; no effort,
	// no resume.
	r, err = p.Start(context.Background(), request(t, sandbox.ReadOnly))
	if err != nil {
		t.Fatal(err)
	}
	wait(t, r)
	dispose(t, r)
	args = readRecord(t, rec).Args
	if flagValue(args, "--model") != "default-model" || slices.Contains(args, "--effort") || slices.Contains(args, "--resume") {
		t.Errorf("argv %q", args)
	}
}

func TestResumeThroughService(t *testing.T) {
	const sid = "0b7e5d8e-1111-4222-8333-444455556666"
	svc, err := subagent.NewService(subagent.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := svc.Register(newProvider(t, fake{mode: "ok"})); err != nil {
		t.Fatal(err)
	}
	h, err := svc.Start(claudecode.WithResume(context.Background(), sid), claudecode.DefaultName, request(t, ""))
	if err != nil {
		t.Fatal(err)
	}
	defer h.Dispose()
	if h.ChildID() != "claude-code/"+sid {
		t.Errorf("child id %q", h.ChildID())
	}
}

func TestRejectsBeforeStarting(t *testing.T) {
	// The command would fail if it were ever started.
	p, err := claudecode.New(claudecode.Options{Command: "/nonexistent/claude"})
	if err != nil {
		t.Fatal(err)
	}
	for name, mutate := range map[string]func(*subagent.Request) context.Context{
		"effort off":     func(r *subagent.Request) context.Context { r.Effort = "off"; return context.Background() },
		"other provider": func(r *subagent.Request) context.Context { r.Provider = "deepseek"; return context.Background() },
		"bad resume": func(r *subagent.Request) context.Context {
			return claudecode.WithResume(context.Background(), "latest")
		},
		"no prompt": func(r *subagent.Request) context.Context {
			r.Prompt = []llm.Block{llm.TextBlock("  ")}
			return context.Background()
		},
	} {
		req := request(t, "")
		ctx := mutate(&req)
		_, err := p.Start(ctx, req)
		var se *subagent.Error
		if !errors.As(err, &se) || se.Code != subagent.CodeInvalidRequest {
			t.Errorf("%s: Start = %v, want %s", name, err, subagent.CodeInvalidRequest)
		}
	}
	_, err = p.Start(context.Background(), request(t, ""))
	if err == nil || !strings.Contains(err.Error(), "/nonexistent/claude") {
		t.Errorf("Start = %v", err)
	}
}

func TestErrorResults(t *testing.T) {
	for _, tc := range []struct{ mode, want string }{
		{"error", "claude-code result error_max_turns: Reached maximum number of turns (9)"},
		{"apierror", "claude-code result success: API Error: 500 upstream exploded (API status 500)"},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			r, err := newProvider(t, fake{mode: tc.mode}).Start(context.Background(), request(t, ""))
			if err != nil {
				t.Fatal(err)
			}
			res := wait(t, r)
			dispose(t, r)
			if res.StopReason != subagent.StopError || !strings.HasPrefix(res.Diagnostic, tc.want) {
				t.Fatalf("result %+v", res)
			}
		})
	}
}

func TestMaxTokensResult(t *testing.T) {
	r, err := newProvider(t, fake{mode: "maxtokens"}).Start(context.Background(), request(t, ""))
	if err != nil {
		t.Fatal(err)
	}
	res := wait(t, r)
	dispose(t, r)
	if res.StopReason != subagent.StopMaxTokens || res.Text() != "answer to: do it" {
		t.Fatalf("result %+v", res)
	}
}

func TestMalformedLinesSkipped(t *testing.T) {
	r, err := newProvider(t, fake{mode: "malformed"}).Start(context.Background(), request(t, ""))
	if err != nil {
		t.Fatal(err)
	}
	res := wait(t, r)
	dispose(t, r)
	if res.StopReason != subagent.StopCompleted || res.Text() != "answer to: do it" {
		t.Fatalf("result %+v", res)
	}
	if !strings.Contains(res.Diagnostic, "4 malformed stdout lines skipped (first: this is not json)") {
		t.Errorf("diagnostic %q", res.Diagnostic)
	}
}

func TestStructuredOutput(t *testing.T) {
	const sch = `{"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}`
	for _, tc := range []struct {
		mode, stop, structured, diag string
	}{
		{"structured", subagent.StopCompleted, `{"name":"bob"}`, ""},
		{"badstruct", subagent.StopError, "", "does not match the output schema"},
		{"ok", subagent.StopError, "", "no structured output"},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			svc, err := subagent.NewService(subagent.Options{})
			if err != nil {
				t.Fatal(err)
			}
			rec := filepath.Join(t.TempDir(), "rec.json")
			if err := svc.Register(newProvider(t, fake{mode: tc.mode, record: rec})); err != nil {
				t.Fatal(err)
			}
			req := request(t, sandbox.ReadOnly)
			req.OutputSchema = json.RawMessage(sch)
			h, err := svc.Start(context.Background(), claudecode.DefaultName, req)
			if err != nil {
				t.Fatal(err)
			}
			res, err := h.Wait(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if err := h.Dispose(); err != nil {
				t.Fatal(err)
			}
			if res.StopReason != tc.stop || string(res.Structured) != tc.structured || !strings.Contains(res.Diagnostic, tc.diag) {
				t.Fatalf("result %+v", res)
			}
			if flagValue(readRecord(t, rec).Args, "--json-schema") != `{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]}` {
				t.Errorf("argv %q", readRecord(t, rec).Args)
			}
		})
	}
}

func TestNewValidates(t *testing.T) {
	for _, o := range []claudecode.Options{
		{Timeout: -1},
		{InterruptGrace: -1},
		{Dir: "/nonexistent/dir"},
		{Env: proc.EnvPolicy{Set: map[string]string{"A=B": "x"}}},
	} {
		if _, err := claudecode.New(o); err == nil {
			t.Errorf("New(%+v) accepted", o)
		}
	}
	p, err := claudecode.New(claudecode.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if p.Name() != "claude-code" || p.Capabilities() != (subagent.Capabilities{OutputSchema: true}) {
		t.Errorf("name %q caps %+v", p.Name(), p.Capabilities())
	}
}
