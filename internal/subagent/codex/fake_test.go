package codex_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dsh-dev/dsh/internal/leakcheck"
	"github.com/dsh-dev/dsh/internal/proc"
	"github.com/dsh-dev/dsh/internal/subagent/codex"
)

// fakeBin is cmd/dsh-fakecodex, built once for the package's tests.
var fakeBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "codex-fake")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fakeBin = filepath.Join(dir, "codex")
	if out, err := exec.Command("go", "build", "-o", fakeBin, "github.com/dsh-dev/dsh/cmd/dsh-fakecodex").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build dsh-fakecodex: %v\n%s", err, out)
		os.Exit(1)
	}
	code := leakcheck.Run(m)
	os.RemoveAll(dir)
	os.Exit(code)
}

// fake is one scripted app-server setup: a provider whose command is the
// fake, its script and log files and a work directory.
type fake struct {
	t      *testing.T
	p      *codex.Provider
	script string
	log    string
	work   string
}

func newFake(t *testing.T, cfg codex.Config, script string) *fake {
	t.Helper()
	dir := t.TempDir()
	f := &fake{t: t, script: filepath.Join(dir, "script.json"), log: filepath.Join(dir, "log.jsonl"), work: t.TempDir()}
	f.setScript(script)
	cfg.Command = []string{fakeBin}
	cfg.Env = proc.EnvPolicy{Set: map[string]string{
		"CODEX_HOME": filepath.Join(dir, "codex-home"), "DSH_FAKECODEX_SCRIPT": f.script, "DSH_FAKECODEX_LOG": f.log,
	}}
	if cfg.Timeout == 0 {
		cfg.Timeout = 30 * time.Second
	}
	cfg.KillGrace = 500 * time.Millisecond
	p, err := codex.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	f.p = p
	return f
}

func (f *fake) setScript(s string) {
	f.t.Helper()
	if s == "" {
		s = "{}"
	}
	if err := os.WriteFile(f.script, []byte(s), 0o600); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fake) run(ctx context.Context, p codex.Params, obs codex.Observer) codex.Outcome {
	f.t.Helper()
	if p.Description == "" {
		p.Description = "task"
	}
	if p.Prompt == "" {
		p.Prompt = "do it"
	}
	return f.p.Delegate(ctx, p, codex.Caller{Cwd: f.work}, obs)
}

// received returns the client messages the fakes logged, by method.
func (f *fake) received(method string) []map[string]any {
	f.t.Helper()
	b, err := os.ReadFile(f.log)
	if err != nil {
		return nil
	}
	var out []map[string]any
	sc := bufio.NewScanner(strings.NewReader(string(b)))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var m map[string]any
		if json.Unmarshal(sc.Bytes(), &m) == nil && (m["method"] == method || (method == "" && m["method"] == nil && m["fake"] == nil)) {
			out = append(out, m)
		}
	}
	return out
}

// fakeLines returns the fake's own log lines of kind k ("start", "grandchild").
func (f *fake) fakeLines(k string) []map[string]any {
	b, _ := os.ReadFile(f.log)
	var out []map[string]any
	for _, l := range strings.Split(string(b), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) == nil && m["fake"] == k {
			out = append(out, m)
		}
	}
	return out
}

func params(m map[string]any) map[string]any {
	p, _ := m["params"].(map[string]any)
	return p
}

func mustComplete(t *testing.T, out codex.Outcome) {
	t.Helper()
	if out.Status != codex.StatusCompleted {
		t.Fatalf("status %s (%s): %s; stderr %q notes %v", out.Status, out.Category, out.Error, out.Process.Stderr, out.Notes)
	}
	if !out.Cleanup.Confirmed {
		t.Fatalf("cleanup not confirmed: %+v", out.Cleanup)
	}
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestFakeHappyPathWireAndProgress(t *testing.T) {
	f := newFake(t, codex.Config{ModelSelection: true}, `{"turns":[{"items":[
		{"type":"agentMessage","text":"looking around","phase":"commentary"},
		{"type":"commandExecution","command":"/bin/bash -lc 'ls'","output":"a\n","exitCode":0},
		{"type":"fileChange","path":"/tmp/x.txt","kind":"add","diff":"hello\n"}],
		"answer":"all done",
		"usage":[{"total":{"totalTokens":120,"inputTokens":100,"cachedInputTokens":40,"outputTokens":20,"reasoningOutputTokens":5}}],
		"rate_limits":{"limitId":"codex","primary":{"usedPercent":12,"windowDurationMins":300,"resetsAt":1}}}]}`)
	var mu sync.Mutex
	var lines, cps []string
	out := f.run(ctxT(t), codex.Params{Model: "gpt-5.5", Effort: "xhigh"}, codex.Observer{
		Progress:   func(l string) { mu.Lock(); lines = append(lines, l); mu.Unlock() },
		Checkpoint: func(c codex.Checkpoint) { mu.Lock(); cps = append(cps, c.Name); mu.Unlock() },
	})
	mustComplete(t, out)
	if out.Text != "all done" || out.ThreadMode != codex.ThreadEphemeral || out.TurnID == "" {
		t.Fatalf("outcome %+v", out)
	}
	if got := strings.Join(cps, ","); got != "spawned,initialized,thread,turn-started,turn-completed" {
		t.Fatalf("checkpoints %s", got)
	}
	want := []string{"codex: looking around", "$ /bin/bash -lc 'ls' → exit 0", "file change (completed): add /tmp/x.txt"}
	if strings.Join(lines, "|") != strings.Join(want, "|") {
		t.Fatalf("progress %q, want %q", lines, want)
	}
	if out.Activity.Commands != 1 || out.Activity.FileChanges != 1 {
		t.Fatalf("activity %+v", out.Activity)
	}
	if out.Usage.Completeness != codex.UsageComplete || out.Usage.Run.InputTokens != 100 || out.Usage.Run.CachedInputTokens != 40 {
		t.Fatalf("usage %+v", out.Usage)
	}
	if !strings.Contains(string(out.RateLimits), `"usedPercent":12`) {
		t.Fatalf("rate limits %s", out.RateLimits)
	}
	if out.Process.Exit == nil || out.Process.Exit.Code != 0 {
		t.Fatalf("exit %+v", out.Process.Exit)
	}
	start := params(f.received("thread/start")[0])
	if start["model"] != "gpt-5.5" || start["approvalPolicy"] != "never" || start["sandbox"] != "workspace-write" || start["ephemeral"] != true || start["cwd"] != f.work {
		t.Fatalf("thread/start %v", start)
	}
	turn := params(f.received("turn/start")[0])
	if turn["effort"] != "xhigh" || !out.Effort.SentOnTurn {
		t.Fatalf("turn/start %v, effort %+v", turn, out.Effort)
	}
	if len(f.received("thread/name/set")) != 0 {
		t.Fatal("an ephemeral thread was named")
	}
}

func TestFakeFailureCategories(t *testing.T) {
	cases := []struct {
		name, script string
		timeout      time.Duration
		category     string
		contains     string
	}{
		{"start-up hang hits the deadline", `{"hang_at":"initialize"}`, 300 * time.Millisecond, codex.CategoryDeadline, "initialize: the delegation exceeded its 300 ms deadline"},
		{"thread/start hang hits the same deadline", `{"hang_at":"thread/start"}`, 300 * time.Millisecond, codex.CategoryDeadline, "thread/start"},
		{"turn hang hits the deadline", `{"hang_at":"turn"}`, 300 * time.Millisecond, codex.CategoryDeadline, "turn"},
		{"early exit", `{"exit_at":"turn","exit_code":3,"stderr":"boom"}`, 0, codex.CategoryProcessExit, "exit status 3"},
		{"exit during initialize", `{"exit_at":"initialize","exit_code":4}`, 0, codex.CategoryProcessExit, "exit status 4"},
		{"failed turn", `{"turns":[{"error":{"message":"upstream 500","codexErrorInfo":"internalServerError"}}]}`, 0, codex.CategoryTurnFailed, "upstream 500 [internalServerError]"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t, codex.Config{}, tc.script)
			p := codex.Params{}
			if tc.timeout > 0 {
				p.Timeout = &tc.timeout
			}
			out := f.run(ctxT(t), p, codex.Observer{})
			if out.Status != codex.StatusFailed || out.Category != tc.category || !strings.Contains(out.Error, tc.contains) {
				t.Fatalf("got %s/%s %q, want failed/%s containing %q", out.Status, out.Category, out.Error, tc.category, tc.contains)
			}
			if !out.Cleanup.Confirmed {
				t.Fatalf("cleanup %+v", out.Cleanup)
			}
			if tc.category == codex.CategoryProcessExit && strings.Contains(tc.script, "boom") && !strings.Contains(out.Process.Stderr, "boom") {
				t.Fatalf("stderr tail %q", out.Process.Stderr)
			}
		})
	}
}

func TestFakeCallerCancelInterruptsTheTurn(t *testing.T) {
	f := newFake(t, codex.Config{}, `{"turns":[{"wait_for_interrupt":true}]}`)
	ctx, cancel := context.WithCancel(ctxT(t))
	out := f.run(ctx, codex.Params{}, codex.Observer{Checkpoint: func(c codex.Checkpoint) {
		if c.Name == "turn-started" {
			cancel()
		}
	}})
	if out.Status != codex.StatusAborted || out.Category != codex.CategoryCancelled {
		t.Fatalf("got %s/%s: %s", out.Status, out.Category, out.Error)
	}
	if len(f.received("turn/interrupt")) != 1 {
		t.Fatal("turn/interrupt was not sent")
	}
	if !out.Cleanup.Confirmed {
		t.Fatalf("cleanup %+v", out.Cleanup)
	}
}

func TestFakeGrandchildTornDown(t *testing.T) {
	f := newFake(t, codex.Config{}, `{"grandchild":true}`)
	out := f.run(ctxT(t), codex.Params{}, codex.Observer{})
	mustComplete(t, out)
	gc := f.fakeLines("grandchild")
	if len(gc) != 1 {
		t.Fatalf("grandchild lines %v", gc)
	}
	pid := int(gc[0]["pid"].(float64))
	// Gone, or a zombie waiting for init to reap it: either way not running.
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil {
		if f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:])); len(f) > 0 && f[0] != "Z" {
			t.Fatalf("grandchild %d outlived the delegation (state %s)", pid, f[0])
		}
	}
}

func TestFakeResume(t *testing.T) {
	f := newFake(t, codex.Config{ModelSelection: true}, `{"turns":[{"answer":"one","usage":[{"total":{"totalTokens":110,"inputTokens":100,"outputTokens":10}}]}]}`)
	ctx := ctxT(t)
	first := f.run(ctx, codex.Params{ThreadMode: codex.ThreadPersistent, Description: "probe thing"}, codex.Observer{})
	mustComplete(t, first)
	if n := f.received("thread/name/set"); len(n) != 1 || params(n[0])["name"] != "DSH · probe thing" {
		t.Fatalf("thread/name/set %v", n)
	}

	t.Run("usage replay is the baseline; duplicates ignored", func(t *testing.T) {
		snap := `{"total":{"totalTokens":175,"inputTokens":160,"outputTokens":15}}`
		f.setScript(`{"turns":[{"answer":"two","usage":[` + snap + `,` + snap + `]}]}`)
		out := f.run(ctx, codex.Params{ThreadID: first.ThreadID}, codex.Observer{})
		mustComplete(t, out)
		if !out.Resumed || out.ThreadID != first.ThreadID {
			t.Fatalf("resumed %v thread %s", out.Resumed, out.ThreadID)
		}
		if out.Usage.Completeness != codex.UsageComplete || out.Usage.Run == nil || out.Usage.Run.InputTokens != 60 || out.Usage.Run.OutputTokens != 5 {
			t.Fatalf("usage %+v run %+v", out.Usage, out.Usage.Run)
		}
	})
	t.Run("an explicit thread whose resume ignores overrides is an error", func(t *testing.T) {
		f.setScript(`{"resume_ignore_overrides":true}`)
		out := f.run(ctx, codex.Params{ThreadID: first.ThreadID, Model: "other-model"}, codex.Observer{})
		if out.Status != codex.StatusFailed || out.Category != codex.CategoryConfigMismatch || !strings.Contains(out.Error, `model is`) {
			t.Fatalf("got %s/%s %s", out.Status, out.Category, out.Error)
		}
		if len(f.received("turn/start")) != 2 {
			t.Fatal("a turn was sent on a mismatched thread")
		}
	})
	t.Run("an unknown thread is refused, never replaced", func(t *testing.T) {
		f.setScript(`{}`)
		out := f.run(ctx, codex.Params{ThreadID: "0000-nope"}, codex.Observer{})
		if out.Status != codex.StatusFailed || out.Category != codex.CategoryResumeRefused || !strings.Contains(out.Error, "no rollout found") {
			t.Fatalf("got %s/%s %s", out.Status, out.Category, out.Error)
		}
		if len(f.received("thread/start")) != 1 {
			t.Fatal("a fresh thread replaced the requested one")
		}
	})
	t.Run("human text ends with the marker in the tool result", func(t *testing.T) {
		if codex.Marker(first) != "[codex thread "+first.ThreadID+" · persistent · pass it as thread_id to continue]" {
			t.Fatal(codex.Marker(first))
		}
	})
}

func TestFakeSessionThreads(t *testing.T) {
	f := newFake(t, codex.Config{}, `{}`)
	ctx := ctxT(t)
	p := codex.Params{ThreadMode: codex.ThreadSession, SessionKey: "sess-1"}
	a := f.run(ctx, p, codex.Observer{})
	mustComplete(t, a)
	b := f.run(ctx, p, codex.Observer{})
	mustComplete(t, b)
	if !b.Resumed || b.ThreadID != a.ThreadID {
		t.Fatalf("second session call: resumed %v thread %s, want %s", b.Resumed, b.ThreadID, a.ThreadID)
	}

	// A remembered thread busy with another delegation is skipped.
	f.setScript(`{"turns":[{"wait_for_interrupt":true}]}`)
	hctx, hcancel := context.WithCancel(ctx)
	started := make(chan struct{})
	done := make(chan codex.Outcome)
	go func() {
		done <- f.run(hctx, p, codex.Observer{Checkpoint: func(c codex.Checkpoint) {
			if c.Name == "turn-started" {
				close(started)
			}
		}})
	}()
	<-started
	f.setScript(`{}`)
	c := f.run(ctx, p, codex.Observer{})
	hcancel()
	held := <-done
	mustComplete(t, c)
	if held.ThreadID != a.ThreadID || c.ThreadID == a.ThreadID || c.Resumed {
		t.Fatalf("held %s, concurrent call %s (resumed %v)", held.ThreadID, c.ThreadID, c.Resumed)
	}
	if !strings.Contains(strings.Join(c.Notes, "\n"), "busy with another delegation") {
		t.Fatalf("notes %v", c.Notes)
	}

	// A remembered thread that cannot take the configuration is replaced.
	f.setScript(`{"resume_ignore_overrides":true}`)
	d := f.run(ctx, codex.Params{ThreadMode: codex.ThreadSession, SessionKey: "sess-1", PermissionMode: codex.ModeReadOnly}, codex.Observer{})
	mustComplete(t, d)
	if d.Resumed || d.ThreadID == a.ThreadID || !strings.Contains(strings.Join(d.Notes, "\n"), "could not be reused") {
		t.Fatalf("resumed %v thread %s notes %v", d.Resumed, d.ThreadID, d.Notes)
	}
}

func TestFakeRequestsRefusedBeforeSpawn(t *testing.T) {
	f := newFake(t, codex.Config{}, `{}`)
	img := filepath.Join(t.TempDir(), "x.png")
	cases := []struct {
		name string
		p    codex.Params
		want string
	}{
		{"relative image", codex.Params{Images: []string{"x.png"}}, "not an absolute path"},
		{"missing image", codex.Params{Images: []string{img}}, "image " + img},
		{"non-object schema", codex.Params{OutputSchema: json.RawMessage(`{"type":"string"}`)}, "output_schema"},
		{"unsupported schema keyword", codex.Params{OutputSchema: json.RawMessage(`{"type":"object","patternProperties":{}}`)}, "patternProperties"},
		{"widening permission", codex.Params{PermissionMode: codex.ModeFullAccess}, "may only narrow"},
		{"model selection off", codex.Params{Model: "gpt-5.5"}, "model selection is disabled"},
		{"bad cwd", codex.Params{Cwd: "/nonexistent/dir"}, "not an existing directory"},
		{"thread id with ephemeral", codex.Params{ThreadID: "x", ThreadMode: codex.ThreadEphemeral}, "cannot be combined"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out := f.run(ctxT(t), tc.p, codex.Observer{})
			if out.Status != codex.StatusFailed || out.Category != codex.CategoryInvalid || !strings.Contains(out.Error, tc.want) {
				t.Fatalf("got %s/%s %q, want invalid containing %q", out.Status, out.Category, out.Error, tc.want)
			}
		})
	}
	if len(f.fakeLines("start")) != 0 {
		t.Fatal("a refused request spawned the app-server")
	}
}

func TestFakeSchemaViolations(t *testing.T) {
	schema := json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer","minimum":1}},"required":["n"]}`)
	for _, tc := range []struct{ answer, want string }{
		{`not json`, "not valid JSON"},
		{`[1]`, "object"},
		{`{"m":1}`, "required"},
		{`{"n":0}`, ">= 1"},
	} {
		f := newFake(t, codex.Config{}, fmt.Sprintf(`{"turns":[{"answer":%q}]}`, tc.answer))
		out := f.run(ctxT(t), codex.Params{OutputSchema: schema}, codex.Observer{})
		if out.Status != codex.StatusFailed || out.Category != codex.CategorySchema || !strings.Contains(out.Error, tc.want) || out.Text != tc.answer {
			t.Fatalf("answer %s: %s/%s %q text %q", tc.answer, out.Status, out.Category, out.Error, out.Text)
		}
		if got := params(f.received("turn/start")[0])["outputSchema"]; got == nil {
			t.Fatal("outputSchema not sent on the turn")
		}
	}
}

func TestFakeApprovalsAnsweredByMode(t *testing.T) {
	f := newFake(t, codex.Config{}, "")
	inside := filepath.Join(f.work, "new.txt")
	f.setScript(fmt.Sprintf(`{"turns":[{"items":[
		{"type":"approval","kind":"command","command":"rm -rf /"},
		{"type":"approval","kind":"fileChange","path":%q,"change_kind":"add"},
		{"type":"approval","kind":"fileChange","path":"/etc/passwd","change_kind":"update"}]}]}`, inside))
	out := f.run(ctxT(t), codex.Params{}, codex.Observer{})
	mustComplete(t, out)
	var decisions []string
	for _, m := range f.received("") {
		if r, ok := m["result"].(map[string]any); ok {
			if d, ok := r["decision"].(string); ok {
				decisions = append(decisions, d)
			}
		}
	}
	if strings.Join(decisions, ",") != "decline,accept,decline" {
		t.Fatalf("decisions %v", decisions)
	}
	if out.Activity.Approvals != 3 {
		t.Fatalf("activity %+v", out.Activity)
	}
}

// BenchmarkDelegateFake measures one whole delegation against the fake
// app-server: spawn, handshake, thread, turn, confirmed teardown.
func BenchmarkDelegateFake(b *testing.B) {
	dir := b.TempDir()
	script := filepath.Join(dir, "script.json")
	if err := os.WriteFile(script, []byte(`{"turns":[{"warning":""}]}`), 0o600); err != nil {
		b.Fatal(err)
	}
	p, err := codex.New(codex.Config{Command: []string{fakeBin}, Env: proc.EnvPolicy{Set: map[string]string{
		"CODEX_HOME": filepath.Join(dir, "home"), "DSH_FAKECODEX_SCRIPT": script,
	}}})
	if err != nil {
		b.Fatal(err)
	}
	work := b.TempDir()
	for b.Loop() {
		out := p.Delegate(context.Background(), codex.Params{Description: "b", Prompt: "p"}, codex.Caller{Cwd: work}, codex.Observer{})
		if out.Status != codex.StatusCompleted {
			b.Fatalf("%s %s", out.Category, out.Error)
		}
	}
}
