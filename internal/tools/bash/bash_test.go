package bash

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/dsh-dev/dsh/internal/proc/proctest"
	"github.com/dsh-dev/dsh/internal/tool"
)

// exitWait bounds waits for killed processes; only reached on failure.
const exitWait = 10 * time.Second

// harness runs the bash tool through a real pipeline, the way the agent
// loop does.
type harness struct {
	p   *tool.Pipeline
	cwd string
}

func newHarness(t *testing.T, opts Options) *harness {
	t.Helper()
	reg := tool.NewRegistry()
	if err := reg.Register("", New(opts)); err != nil {
		t.Fatal(err)
	}
	return &harness{p: tool.NewPipeline(reg), cwd: t.TempDir()}
}

func (h *harness) run(ctx context.Context, t *testing.T, args map[string]any) tool.Result {
	t.Helper()
	raw, err := json.Marshal(args)
	if err != nil {
		t.Fatal(err)
	}
	return h.p.Run(ctx, &tool.Call{ID: "c1", Name: Name, RawArguments: string(raw), Cwd: h.cwd, SessionID: "sess-42"})
}

func text(r tool.Result) string {
	var b strings.Builder
	for _, bl := range r.Content {
		b.WriteString(bl.Text)
	}
	return b.String()
}

func code(r tool.Result) string {
	if r.Error == nil {
		return ""
	}
	return r.Error.Code
}

func metaOf(t *testing.T, r tool.Result) meta {
	t.Helper()
	var m meta
	if err := json.Unmarshal(r.Meta, &m); err != nil {
		t.Fatalf("meta %s: %v", r.Meta, err)
	}
	return m
}

func TestDefinition(t *testing.T) {
	def := New(Options{})
	// The pipeline's limit is a backstop above the tool's own maximum.
	if def.Name != "bash" || def.ConcurrencySafe != nil || def.Timeout != DefaultMaxTimeout+pipelineBackstop {
		t.Fatalf("definition %+v", def)
	}
	if strings.Contains(def.Description, "{{") || !strings.Contains(def.Description, "[exit code: N]") ||
		!strings.Contains(def.Description, "120000") || !strings.Contains(def.Description, "600000") ||
		!strings.Contains(def.Description, "30000 bytes") {
		t.Fatalf("description not rendered with defaults:\n%s", def.Description)
	}
	var schema struct {
		Type       string                     `json:"type"`
		Required   []string                   `json:"required"`
		Properties map[string]json.RawMessage `json:"properties"`
	}
	if err := json.Unmarshal(def.Parameters, &schema); err != nil {
		t.Fatal(err)
	}
	if schema.Type != "object" || len(schema.Required) != 1 || schema.Required[0] != "command" || len(schema.Properties) != 4 {
		t.Fatalf("schema %s", def.Parameters)
	}
	if !strings.Contains(string(schema.Properties["timeout_ms"]), `"maximum":600000`) {
		t.Fatalf("timeout_ms schema %s", schema.Properties["timeout_ms"])
	}
	if d := New(Options{MaxTimeout: time.Second}); !strings.Contains(string(d.Parameters), `"maximum":1000`) ||
		!strings.Contains(d.Description, "defaults to 1000 (1s)") {
		t.Fatal("a MaxTimeout below the default timeout must lower the default too")
	}
}

func TestCommands(t *testing.T) {
	h := newHarness(t, Options{})
	if err := os.Mkdir(filepath.Join(h.cwd, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	other := t.TempDir()
	tests := []struct {
		name     string
		args     map[string]any
		want     string // exact content
		wantCode int
	}{
		{"echo", map[string]any{"command": "echo hi", "description": "Say hi"}, "hi\n\n[exit code: 0]", 0},
		{"non-zero exit is a normal result", map[string]any{"command": "echo oops >&2; exit 3"}, "oops\n\n[exit code: 3]", 3},
		{"no output", map[string]any{"command": "true"}, "(no output)\n\n[exit code: 0]", 0},
		{"interleaved", map[string]any{"command": "echo 1; echo 2 >&2; echo 3"}, "1\n2\n3\n\n[exit code: 0]", 0},
		{"default workdir is the session cwd", map[string]any{"command": "pwd"}, h.cwd + "\n\n[exit code: 0]", 0},
		{"relative workdir", map[string]any{"command": "pwd", "workdir": "sub"}, filepath.Join(h.cwd, "sub") + "\n\n[exit code: 0]", 0},
		{"absolute workdir", map[string]any{"command": "pwd", "workdir": other}, other + "\n\n[exit code: 0]", 0},
		{"session id in env", map[string]any{"command": "echo $DSH_SESSION_ID"}, "sess-42\n\n[exit code: 0]", 0},
		{"stdin is empty", map[string]any{"command": "cat"}, "(no output)\n\n[exit code: 0]", 0},
		{"no state between calls", map[string]any{"command": "echo ${SET_BY_EARLIER:-unset}"}, "unset\n\n[exit code: 0]", 0},
		{"killed by a signal", map[string]any{"command": "echo x; kill -KILL $$"}, "x\n\n[killed by signal 9 (killed)]\n[exit code: 137]", 137},
		{"null optional fields", map[string]any{"command": "echo ok", "timeout_ms": nil, "workdir": nil}, "ok\n\n[exit code: 0]", 0},
		{"integral float timeout", map[string]any{"command": "echo ok", "timeout_ms": 5000.0}, "ok\n\n[exit code: 0]", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := h.run(context.Background(), t, tt.args)
			if r.IsError || text(r) != tt.want {
				t.Fatalf("got isError=%v %q, want %q", r.IsError, text(r), tt.want)
			}
			if m := metaOf(t, r); m.ExitCode != tt.wantCode || m.TimedOut || m.Cancelled {
				t.Fatalf("meta %+v", m)
			}
		})
	}
	// Makes the "no state between calls" case meaningful.
	h.run(context.Background(), t, map[string]any{"command": "export SET_BY_EARLIER=1; cd /"})
	if r := h.run(context.Background(), t, map[string]any{"command": "echo ${SET_BY_EARLIER:-unset}; pwd"}); text(r) != "unset\n"+h.cwd+"\n\n[exit code: 0]" {
		t.Fatalf("state leaked between calls: %q", text(r))
	}
}

func TestInvalidArgs(t *testing.T) {
	h := newHarness(t, Options{})
	file := filepath.Join(h.cwd, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args map[string]any
		want string
	}{
		{"missing command", map[string]any{}, "command is required"},
		{"empty command", map[string]any{"command": ""}, "command is required"},
		{"blank command", map[string]any{"command": "  \n"}, "command is required"},
		{"command not a string", map[string]any{"command": 42}, "command must be a string"},
		{"description not a string", map[string]any{"command": "true", "description": []int{1}}, "description must be a string"},
		{"workdir not a string", map[string]any{"command": "true", "workdir": true}, "workdir must be a string"},
		{"timeout not a number", map[string]any{"command": "true", "timeout_ms": "10"}, "timeout_ms must be an integer"},
		{"fractional timeout", map[string]any{"command": "true", "timeout_ms": 1.5}, "timeout_ms must be an integer"},
		{"zero timeout", map[string]any{"command": "true", "timeout_ms": 0}, "at least 1"},
		{"negative timeout", map[string]any{"command": "true", "timeout_ms": -5}, "at least 1"},
		{"missing workdir", map[string]any{"command": "true", "workdir": "nope"}, "workdir " + filepath.Join(h.cwd, "nope") + " does not exist"},
		{"workdir is a file", map[string]any{"command": "true", "workdir": file}, "is not a directory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := h.run(context.Background(), t, tt.args)
			if !r.IsError || code(r) != tool.CodeInvalidArgs || !strings.Contains(text(r), tt.want) {
				t.Fatalf("got isError=%v code=%q %q; want INVALID_ARGS containing %q", r.IsError, code(r), text(r), tt.want)
			}
		})
	}
	// Malformed JSON never reaches the tool: the pipeline rejects it.
	r := h.p.Run(context.Background(), &tool.Call{Name: Name, RawArguments: `{"command": "ls`})
	if code(r) != tool.CodeInvalidArgs || !strings.Contains(text(r), "not valid JSON") {
		t.Fatalf("malformed JSON: %q", text(r))
	}
}

func TestTimeoutClamped(t *testing.T) {
	h := newHarness(t, Options{MaxTimeout: 2 * time.Second})
	r := h.run(context.Background(), t, map[string]any{"command": "echo ok", "timeout_ms": 900000})
	want := "ok\n\n[timeout_ms 900000 is over the maximum of 2000; used 2000]\n[exit code: 0]"
	if r.IsError || text(r) != want {
		t.Fatalf("got %q, want %q", text(r), want)
	}
}

func TestTimeoutKillsProcessGroup(t *testing.T) {
	h := newHarness(t, Options{})
	fifo, lines := proctest.Fifo(t)
	pids := make(chan int, 1)
	go func() {
		if line, ok := <-lines; ok {
			pids <- proctest.Pid(t, line)
		}
	}()
	// The 1 s timeout is the mechanism under test, so it is real; the
	// background pid is written long before it fires.
	r := h.run(context.Background(), t, map[string]any{
		"command":    "echo before; sleep 100 & echo $! > " + fifo + "; wait",
		"timeout_ms": 1000,
	})
	want := "before\n\n[timed out after 1s; process group killed]"
	if !r.IsError || code(r) != tool.CodeTimeout || text(r) != want {
		t.Fatalf("got isError=%v code=%q %q; want %q", r.IsError, code(r), text(r), want)
	}
	if m := metaOf(t, r); !m.TimedOut || m.ExitCode != 143 {
		t.Fatalf("meta %+v", m)
	}
	if pid := readPid(t, pids); !proctest.WaitExit(pid, exitWait) {
		t.Fatalf("background process %d survived the timeout", pid)
	}
}

// readPid waits for the fifo reader to deliver the pid that the command
// wrote before it was killed; the bound only matters if the command is
// broken and never wrote it.
func readPid(t *testing.T, pids <-chan int) int {
	t.Helper()
	select {
	case pid := <-pids:
		return pid
	case <-time.After(exitWait):
		t.Fatal("the command never reported its background pid")
		return 0
	}
}

func TestCancelKillsProcessGroup(t *testing.T) {
	h := newHarness(t, Options{})
	fifo, lines := proctest.Fifo(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pids := make(chan int, 1)
	go func() {
		if line, ok := <-lines; ok {
			pids <- proctest.Pid(t, line)
		}
		cancel() // the turn is interrupted while the command runs
	}()
	r := h.run(ctx, t, map[string]any{"command": "echo started; sleep 100 & echo $! > " + fifo + "; wait"})
	want := "started\n\n[cancelled; process group killed]"
	if !r.IsError || code(r) != tool.CodeAborted || text(r) != want {
		t.Fatalf("got isError=%v code=%q %q; want %q", r.IsError, code(r), text(r), want)
	}
	if m := metaOf(t, r); !m.Cancelled {
		t.Fatalf("meta %+v", m)
	}
	if pid := readPid(t, pids); !proctest.WaitExit(pid, exitWait) {
		t.Fatalf("background process %d survived the cancel", pid)
	}
}

func TestBigOutputBounded(t *testing.T) {
	h := newHarness(t, Options{OutputLimit: 2000})
	r := h.run(context.Background(), t, map[string]any{"command": "seq 1 100000"})
	got := text(r)
	if r.IsError || !strings.HasPrefix(got, "1\n2\n3\n") || !strings.HasSuffix(got, "99999\n100000\n\n[exit code: 0]") {
		t.Fatalf("unexpected ends: %q … %q", got[:20], got[len(got)-40:])
	}
	if !regexp.MustCompile(`\n\[… \d+ bytes elided …\]\n`).MatchString(got) || len(got) > 2100 {
		t.Fatalf("output not bounded (%d bytes) or no marker", len(got))
	}
	m := metaOf(t, r)
	if m.TotalBytes != 588895 || m.ElidedBytes < 588895-2000 {
		t.Fatalf("meta %+v", m)
	}
}

func TestExecuteDirectly(t *testing.T) {
	// Without the pipeline the body reports argument errors as Go errors
	// carrying the code; the pipeline turns them into results.
	def := New(Options{})
	_, err := def.Execute(context.Background(), &tool.Call{Arguments: json.RawMessage(`{}`)})
	var te *tool.Error
	if !errors.As(err, &te) || te.Code != tool.CodeInvalidArgs {
		t.Fatalf("error %v", err)
	}
	// Without a session id the environment is passed through unchanged.
	t.Setenv(SessionEnv, "inherited")
	r, err := def.Execute(context.Background(), &tool.Call{Arguments: json.RawMessage(`{"command":"echo $DSH_SESSION_ID"}`)})
	if err != nil || text(r) != "inherited\n\n[exit code: 0]" {
		t.Fatalf("got %q, %v", text(r), err)
	}
}
