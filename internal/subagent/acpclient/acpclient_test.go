package acpclient_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dsh-dev/dsh/internal/llm"
	"github.com/dsh-dev/dsh/internal/permission"
	"github.com/dsh-dev/dsh/internal/proc"
	"github.com/dsh-dev/dsh/internal/proc/proctest"
	"github.com/dsh-dev/dsh/internal/sandbox"
	"github.com/dsh-dev/dsh/internal/session"
	"github.com/dsh-dev/dsh/internal/subagent"
	"github.com/dsh-dev/dsh/internal/subagent/acpclient"
)

func newProvider(t *testing.T, mode, fifo string) *acpclient.Provider {
	t.Helper()
	return newProviderEnv(t, mode, fifo, nil)
}

// newProviderEnv is newProvider with extra environment for the fake.
func newProviderEnv(t *testing.T, mode, fifo string, env map[string]string) *acpclient.Provider {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	set := map[string]string{fakeEnv: mode, fakeFifo: fifo}
	maps.Copy(set, env)
	p, err := acpclient.New(acpclient.Options{
		Name:      "acp:fake",
		Command:   []string{exe},
		Env:       proc.EnvPolicy{Set: set},
		KillGrace: 500 * time.Millisecond,
	})
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
		Prompt:     []llm.Block{{Type: llm.BlockText, Text: "do it"}},
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

func TestDelegationThroughService(t *testing.T) {
	svc, err := subagent.NewService(subagent.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := svc.Register(newProvider(t, "plain", "")); err != nil {
		t.Fatal(err)
	}
	req := request(t, "")
	rec := record(&req)
	h, err := svc.Start(context.Background(), "acp:fake", req)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, err := h.Wait(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rec.waited()
	if res.StopReason != subagent.StopCompleted || res.Text() != "hello world" {
		t.Fatalf("result %+v", res)
	}
	if res.ChildID != "acp:fake/s1" || h.ChildID() != "acp:fake/s1" {
		t.Errorf("child id %q / %q", res.ChildID, h.ChildID())
	}
	if res.Usage.InputTokens != 7 || res.Usage.OutputTokens != 3 {
		t.Errorf("usage %+v", res.Usage)
	}
	if !strings.Contains(res.Diagnostic, "tool c1 touch x: completed") {
		t.Errorf("activity %q", res.Diagnostic)
	}
	if err := h.Dispose(); err != nil {
		t.Fatal(err)
	}
	rec.check(t, "tool c1 [execute] touch x: started", "agent: hello world", "tool c1 touch x: completed")
}

func TestServiceRefusesOutputSchema(t *testing.T) {
	svc, err := subagent.NewService(subagent.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// The command would fail if it were ever started.
	p, err := acpclient.New(acpclient.Options{Name: "acp:none", Command: []string{"/nonexistent/agent"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := svc.Register(p); err != nil {
		t.Fatal(err)
	}
	req := request(t, "")
	req.OutputSchema = []byte(`{"type":"object"}`)
	_, err = svc.Start(context.Background(), "acp:none", req)
	var se *subagent.Error
	if !errors.As(err, &se) || se.Code != subagent.CodeUnsupportedCapability {
		t.Fatalf("Start = %v, want %s", err, subagent.CodeUnsupportedCapability)
	}
}

func TestPermissionPerMode(t *testing.T) {
	for _, tc := range []struct {
		mode       sandbox.Mode
		want, kind string
	}{
		{sandbox.ReadOnly, "perm=selected:no ", "reject_once"},
		{sandbox.WorkspaceWrite, "perm=selected:no ", "reject_once"},
		{sandbox.DangerFullAccess, "perm=selected:yes ", "allow_once"},
	} {
		t.Run(string(tc.mode), func(t *testing.T) {
			req := request(t, tc.mode)
			rec := record(&req)
			r, err := newProvider(t, "perm", "").Start(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			res := wait(t, r)
			rec.waited()
			if res.StopReason != subagent.StopCompleted || res.Text() != tc.want+"hello world" {
				t.Fatalf("result %+v", res)
			}
			line := "permission c1 touch x: " + tc.kind
			rec.check(t, "tool c1 [execute] touch x: started", line, "agent: "+tc.want+"hello world", "tool c1 touch x: completed")
			if !strings.Contains(res.Diagnostic, line) {
				t.Errorf("diagnostic %q lacks %q", res.Diagnostic, line)
			}
			if err := r.Dispose(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestEarlyExitIsErrorResult(t *testing.T) {
	r, err := newProvider(t, "exit", "").Start(context.Background(), request(t, ""))
	if err != nil {
		t.Fatal(err)
	}
	res := wait(t, r)
	if res.StopReason != subagent.StopError || !strings.Contains(res.Diagnostic, "fatal: boom") {
		t.Fatalf("result %+v", res)
	}
	if len(res.Diagnostic) > subagent.MaxDiagnostic {
		t.Errorf("diagnostic is %d bytes", len(res.Diagnostic))
	}
	if err := r.Dispose(); err != nil {
		t.Fatal(err)
	}
}

func TestHandshakeFailureReleases(t *testing.T) {
	_, err := newProvider(t, "badinit", "").Start(context.Background(), request(t, ""))
	if err == nil || !strings.Contains(err.Error(), "cannot initialize") {
		t.Fatalf("Start = %v", err)
	}
}

func TestCancelCooperative(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	r, err := newProvider(t, "wait", "").Start(ctx, request(t, ""))
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	res := wait(t, r)
	if res.StopReason != subagent.StopAborted {
		t.Fatalf("result %+v", res)
	}
	if err := r.Dispose(); err != nil {
		t.Fatal(err)
	}
}

func TestHangCancelTearsDownGroup(t *testing.T) {
	fifo, lines := proctest.Fifo(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r, err := newProvider(t, "grandchild,hang", fifo).Start(ctx, request(t, ""))
	if err != nil {
		t.Fatal(err)
	}
	grandchild := proctest.Pid(t, <-lines)
	agent := proctest.Pid(t, <-lines)
	cancel()
	res := wait(t, r)
	if res.StopReason != subagent.StopAborted {
		t.Fatalf("result %+v", res)
	}
	for _, pid := range []int{agent, grandchild} {
		if !proctest.WaitExit(pid, 10*time.Second) {
			t.Errorf("pid %d survived", pid)
		}
	}
	errs := make(chan error, 2)
	for range 2 {
		go func() { errs <- r.Dispose() }()
	}
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if err := r.Dispose(); err != nil {
		t.Fatal(err)
	}
}

// TestCancelDeafAgent: an agent that stops reading its input in the
// middle of a large prompt is still cancelled and torn down. Before, the
// session/cancel notification waited behind the prompt's blocked write
// and the run never ended.
func TestCancelDeafAgent(t *testing.T) {
	fifo, lines := proctest.Fifo(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req := request(t, "")
	req.Prompt = []llm.Block{{Type: llm.BlockText, Text: strings.Repeat("x", 1<<20)}}
	r, err := newProvider(t, "deaf", fifo).Start(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if l := <-lines; l != "deaf" {
		t.Fatalf("fake said %q", l)
	}
	cancel()
	if res := wait(t, r); res.StopReason != subagent.StopAborted {
		t.Fatalf("result %+v", res)
	}
	if err := r.Dispose(); err != nil {
		t.Fatal(err)
	}
}

func TestDisposeWhileRunning(t *testing.T) {
	fifo, lines := proctest.Fifo(t)
	r, err := newProvider(t, "hang", fifo).Start(context.Background(), request(t, ""))
	if err != nil {
		t.Fatal(err)
	}
	agent := proctest.Pid(t, <-lines)
	if err := r.Dispose(); err != nil {
		t.Fatal(err)
	}
	if !proctest.WaitExit(agent, 10*time.Second) {
		t.Errorf("agent %d survived", agent)
	}
	if res := wait(t, r); res.StopReason != subagent.StopAborted {
		t.Fatalf("result %+v", res)
	}
}

func TestNewValidates(t *testing.T) {
	for _, o := range []acpclient.Options{
		{Command: []string{"x"}},
		{Name: "acp:x"},
		{Name: "acp:x", Command: []string{"x"}, Dir: "/nonexistent/dir"},
		{Name: "acp:x", Command: []string{"x"}, Timeout: -1},
	} {
		if _, err := acpclient.New(o); err == nil {
			t.Errorf("New(%+v) accepted", o)
		}
	}
}

// recorder collects a request's progress lines and catches any reported
// after Wait returned.
type recorder struct {
	mu    sync.Mutex
	lines []string
	late  []string
	over  atomic.Bool
	seen  chan string // every line, when non-nil (buffered, never blocks)
}

// record installs a recorder as req's Progress.
func record(req *subagent.Request) *recorder {
	rec := &recorder{seen: make(chan string, 1024)}
	req.Progress = rec.progress
	return rec
}

func (r *recorder) progress(line string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.over.Load() {
		r.late = append(r.late, line)
		return
	}
	r.lines = append(r.lines, line)
	select {
	case r.seen <- line:
	default:
	}
}

// waited marks the moment Wait returned: later lines are violations.
func (r *recorder) waited() { r.over.Store(true) }

// snapshot returns the lines reported before Wait returned and after.
func (r *recorder) snapshot() (lines, late []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.lines), slices.Clone(r.late)
}

// check asserts the lines reported, in order, and that none came late.
func (r *recorder) check(t *testing.T, want ...string) {
	t.Helper()
	lines, late := r.snapshot()
	if !slices.Equal(lines, want) {
		t.Errorf("progress:\n%s\nwant:\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}
	if len(late) > 0 {
		t.Errorf("progress after Wait returned: %q", late)
	}
}

// awaitLine blocks until line is reported.
func (r *recorder) awaitLine(t *testing.T, line string) {
	t.Helper()
	timeout := time.After(20 * time.Second)
	for {
		select {
		case l := <-r.seen:
			if l == line {
				return
			}
		case <-timeout:
			t.Fatalf("no progress line %q", line)
		}
	}
}

func TestProgressAndClosing(t *testing.T) {
	req := request(t, "")
	rec := record(&req)
	r, err := newProvider(t, "tools", "").Start(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	res := wait(t, r)
	rec.waited()
	if err := r.Dispose(); err != nil {
		t.Fatal(err)
	}
	rec.check(t, toolsProgress...)
	if res.StopReason != subagent.StopCompleted || res.Text() != toolsOutput {
		t.Errorf("result %+v, want text %q", res, toolsOutput)
	}
	if res.Diagnostic != toolsDiagnostic {
		t.Errorf("diagnostic:\n%s\nwant:\n%s", res.Diagnostic, toolsDiagnostic)
	}
}

func TestCancelClosesOpenToolCalls(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req := request(t, "")
	rec := record(&req)
	r, err := newProvider(t, "wait", "").Start(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	rec.awaitLine(t, "tool c1 [execute] touch x: started")
	cancel()
	res := wait(t, r)
	rec.waited()
	if err := r.Dispose(); err != nil {
		t.Fatal(err)
	}
	if res.StopReason != subagent.StopAborted || res.Text() != "working " {
		t.Fatalf("result %+v", res)
	}
	closed := "tool c1 touch x: closed (prompt ended while pending)"
	rec.check(t, "tool c1 [execute] touch x: started", "agent: working", closed)
	if !strings.HasPrefix(res.Diagnostic, "1 tool call left open when the prompt ended\n") || !strings.HasSuffix(res.Diagnostic, "\n"+closed) {
		t.Errorf("diagnostic %q", res.Diagnostic)
	}
}

func TestExitClosesOpenToolCalls(t *testing.T) {
	req := request(t, "")
	rec := record(&req)
	r, err := newProvider(t, "die", "").Start(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	res := wait(t, r)
	rec.waited()
	if err := r.Dispose(); err != nil {
		t.Fatal(err)
	}
	closed := "tool c1 touch x: closed (prompt ended while pending)"
	rec.check(t, "tool c1 [execute] touch x: started", closed)
	if res.StopReason != subagent.StopError {
		t.Fatalf("result %+v", res)
	}
	for _, want := range []string{"session/prompt: ", "\n1 tool call left open when the prompt ended\n", "fatal: died", "\n" + closed} {
		if !strings.Contains(res.Diagnostic, want) {
			t.Errorf("diagnostic %q lacks %q", res.Diagnostic, want)
		}
	}
}

// TestNoProgressAfterWait runs an agent that keeps announcing tool calls
// after answering the prompt: none may be reported once Wait returned, and
// each one reported before is closed.
func TestNoProgressAfterWait(t *testing.T) {
	for i := range 5 {
		req := request(t, "")
		rec := record(&req)
		r, err := newProvider(t, "late", "").Start(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		res := wait(t, r)
		rec.waited()
		if err := r.Dispose(); err != nil {
			t.Fatal(err)
		}
		lines, late := rec.snapshot()
		if len(late) > 0 {
			t.Fatalf("run %d: %d progress lines after Wait returned, first %q", i, len(late), late[0])
		}
		if res.StopReason != subagent.StopCompleted || res.Text() != "hello world" {
			t.Fatalf("run %d: result %+v", i, res)
		}
		started, closed := 0, 0
		for _, l := range lines {
			switch {
			case strings.HasPrefix(l, "tool late-") && strings.HasSuffix(l, " late: started"):
				started++
			case strings.HasPrefix(l, "tool late-") && strings.HasSuffix(l, " late: closed (prompt ended while in_progress)"):
				closed++
			}
		}
		if started != closed {
			t.Errorf("run %d: %d late calls started, %d closed", i, started, closed)
		}
		want := map[int]string{0: "", 1: "1 tool call left open when the prompt ended"}[started]
		if started > 1 {
			want = fmt.Sprintf("%d tool calls left open when the prompt ended", started)
		}
		if first, _, _ := strings.Cut(res.Diagnostic, "\n"); want != "" && first != want {
			t.Errorf("run %d: diagnostic starts %q, want %q", i, first, want)
		}
		if len(res.Diagnostic) > subagent.MaxDiagnostic {
			t.Errorf("run %d: diagnostic is %d bytes", i, len(res.Diagnostic))
		}
	}
}

func TestStopReasons(t *testing.T) {
	for _, tc := range []struct {
		result, stop, diag string
	}{
		{`{"stopReason":"end_turn"}`, subagent.StopCompleted, ""},
		{`{"stopReason":"max_tokens"}`, subagent.StopMaxTokens, ""},
		{`{"stopReason":"max_turn_requests"}`, subagent.StopMaxTokens, "agent stopped: max_turn_requests"},
		{`{"stopReason":"refusal","_meta":{"x":1}}`, subagent.StopRefusal, ""},
		{`{"stopReason":"cancelled"}`, subagent.StopAborted, "although no cancel was sent"},
		{`{"stopReason":"later"}`, subagent.StopError, `unknown stopReason "later"`},
		{`{"stopReason":7}`, subagent.StopError, "unknown stopReason 7"},
		{`{}`, subagent.StopError, "response has no stopReason"},
		{`"end_turn"`, subagent.StopError, "malformed response"},
	} {
		t.Run(tc.result, func(t *testing.T) {
			r, err := newProviderEnv(t, "plain", "", map[string]string{fakeResult: tc.result}).Start(context.Background(), request(t, ""))
			if err != nil {
				t.Fatal(err)
			}
			res := wait(t, r)
			if err := r.Dispose(); err != nil {
				t.Fatal(err)
			}
			if res.StopReason != tc.stop {
				t.Errorf("stop %q, want %q (%+v)", res.StopReason, tc.stop, res)
			}
			first, _, _ := strings.Cut(res.Diagnostic, "\n")
			if tc.diag == "" && !strings.HasPrefix(first, "tool ") || !strings.Contains(first, tc.diag) {
				t.Errorf("diagnostic %q: first line should say %q", res.Diagnostic, tc.diag)
			}
			if !strings.Contains(res.Diagnostic, "tool c1 touch x: completed") {
				t.Errorf("diagnostic %q lacks the activity", res.Diagnostic)
			}
		})
	}
}

func TestUsage(t *testing.T) {
	for _, tc := range []struct {
		name, usage string
		want        llm.Usage
	}{
		{"disjoint", `{"inputTokens":10,"outputTokens":5,"cachedReadTokens":100,"cachedWriteTokens":20,"totalTokens":135}`,
			llm.Usage{InputTokens: 10, OutputTokens: 5, CacheReadTokens: 100, CacheWriteTokens: 20}},
		{"disjoint-thoughts-apart", `{"inputTokens":10,"outputTokens":5,"thoughtTokens":4,"cachedReadTokens":100,"totalTokens":119}`,
			llm.Usage{InputTokens: 10, OutputTokens: 9, ReasoningTokens: 4, CacheReadTokens: 100}},
		{"inclusive", `{"inputTokens":110,"outputTokens":5,"thoughtTokens":3,"cachedReadTokens":100,"totalTokens":118}`,
			llm.Usage{InputTokens: 10, OutputTokens: 8, ReasoningTokens: 3, CacheReadTokens: 100}},
		{"inclusive-thoughts-within", `{"inputTokens":110,"outputTokens":5,"thoughtTokens":3,"cachedReadTokens":100,"totalTokens":115}`,
			llm.Usage{InputTokens: 10, OutputTokens: 5, ReasoningTokens: 3, CacheReadTokens: 100}},
		{"no-total", `{"inputTokens":7,"outputTokens":3,"thoughtTokens":2,"cachedReadTokens":1}`,
			llm.Usage{InputTokens: 7, OutputTokens: 3, ReasoningTokens: 2, CacheReadTokens: 1}},
		{"no-total-thoughts-exceed", `{"inputTokens":7,"outputTokens":3,"thoughtTokens":5}`,
			llm.Usage{InputTokens: 7, OutputTokens: 8, ReasoningTokens: 5}},
		{"malformed", `{"inputTokens":"x","outputTokens":-1,"thoughtTokens":null,"cachedReadTokens":1.5,"cachedWriteTokens":2,"totalTokens":1e30}`,
			llm.Usage{CacheWriteTokens: 2}},
		{"not-object", `"lots"`, llm.Usage{}},
		{"null", `null`, llm.Usage{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			result := `{"stopReason":"end_turn","usage":` + tc.usage + `}`
			r, err := newProviderEnv(t, "plain", "", map[string]string{fakeResult: result}).Start(context.Background(), request(t, ""))
			if err != nil {
				t.Fatal(err)
			}
			res := wait(t, r)
			if err := r.Dispose(); err != nil {
				t.Fatal(err)
			}
			if res.StopReason != subagent.StopCompleted || res.Usage != tc.want {
				t.Errorf("stop %q usage %+v, want %+v", res.StopReason, res.Usage, tc.want)
			}
		})
	}
}

func TestTimeoutClosesOpenToolCalls(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	p, err := acpclient.New(acpclient.Options{
		Name: "acp:fake", Command: []string{exe}, Timeout: time.Second, KillGrace: 500 * time.Millisecond,
		Env: proc.EnvPolicy{Set: map[string]string{fakeEnv: "wait"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	req := request(t, "")
	rec := record(&req)
	r, err := p.Start(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	res := wait(t, r)
	rec.waited()
	if err := r.Dispose(); err != nil {
		t.Fatal(err)
	}
	closed := "tool c1 touch x: closed (prompt ended while pending)"
	rec.check(t, "tool c1 [execute] touch x: started", "agent: working", closed)
	want := "timed out after 1s\n1 tool call left open when the prompt ended\ntool c1 [execute] touch x: pending\n" + closed
	if res.StopReason != subagent.StopError || res.Diagnostic != want {
		t.Errorf("result %+v, want diagnostic %q", res, want)
	}
}
