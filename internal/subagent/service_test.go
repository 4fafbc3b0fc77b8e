package subagent_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/dsh-dev/dsh/internal/llm"
	"github.com/dsh-dev/dsh/internal/llm/llmtest"
	"github.com/dsh-dev/dsh/internal/permission"
	"github.com/dsh-dev/dsh/internal/sandbox"
	"github.com/dsh-dev/dsh/internal/session"
	"github.com/dsh-dev/dsh/internal/subagent"
)

// fakeProvider records what it was asked and returns runs the test
// finishes by hand.
type fakeProvider struct {
	name     string
	caps     subagent.Capabilities
	startErr error
	result   subagent.Result
	waitErr  error

	mu   sync.Mutex
	reqs []subagent.Request
	runs []*fakeRun
}

func (p *fakeProvider) Name() string                        { return p.name }
func (p *fakeProvider) Capabilities() subagent.Capabilities { return p.caps }

func (p *fakeProvider) Start(_ context.Context, req subagent.Request) (subagent.Run, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.reqs = append(p.reqs, req)
	if p.startErr != nil {
		return nil, p.startErr
	}
	r := &fakeRun{done: make(chan struct{}), res: p.result, err: p.waitErr}
	p.runs = append(p.runs, r)
	return r, nil
}

func (p *fakeProvider) started() []subagent.Request {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]subagent.Request(nil), p.reqs...)
}

type fakeRun struct {
	done     chan struct{}
	once     sync.Once
	res      subagent.Result
	err      error
	mu       sync.Mutex
	disposes int
}

func (r *fakeRun) ChildID() string { return "fake-child" }
func (r *fakeRun) finish()         { r.once.Do(func() { close(r.done) }) }
func (r *fakeRun) Wait(ctx context.Context) (subagent.Result, error) {
	select {
	case <-r.done:
		return r.res, r.err
	case <-ctx.Done():
		return subagent.Result{}, ctx.Err()
	}
}
func (r *fakeRun) Dispose() error {
	r.mu.Lock()
	r.disposes++
	r.mu.Unlock()
	r.finish()
	return nil
}

func newLog(t *testing.T, id string, depth int) *session.Log {
	t.Helper()
	log, err := session.NewLog(session.Header{Version: session.FormatVersion, ID: id, Cwd: t.TempDir(), DelegationDepth: depth}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return log
}

func newService(t *testing.T, maxDepth *int, ps ...subagent.Provider) *subagent.Service {
	t.Helper()
	svc, err := subagent.NewService(subagent.Options{MaxDepth: maxDepth})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range ps {
		if err := svc.Register(p); err != nil {
			t.Fatal(err)
		}
	}
	return svc
}

var (
	allCaps     = subagent.Capabilities{OutputSchema: true, MaxDepth: true, ToolFilter: true, Persona: true}
	answerShape = json.RawMessage(`{"type":"object","properties":{"answer":{"type":"string"}},"required":["answer"],"additionalProperties":false}`)
	prompt      = []llm.Block{llm.TextBlock("do it")}
)

func TestStartRejectsBeforeStart(t *testing.T) {
	for _, tc := range []struct {
		name        string
		provider    string
		caps        subagent.Capabilities
		serviceCap  *int
		parentDepth int
		req         func(*subagent.Request)
		code        string
	}{
		{"unknown provider", "nope", allCaps, nil, 0, nil, subagent.CodeUnknownProvider},
		{"no parent", "p", allCaps, nil, 0, func(r *subagent.Request) { r.Parent = nil }, subagent.CodeInvalidRequest},
		{"empty prompt", "p", allCaps, nil, 0, func(r *subagent.Request) { r.Prompt = []llm.Block{llm.TextBlock("  ")} }, subagent.CodeInvalidRequest},
		{"outputSchema unsupported", "p", subagent.Capabilities{}, nil, 0, func(r *subagent.Request) { r.OutputSchema = answerShape }, subagent.CodeUnsupportedCapability},
		{"maxDepth unsupported", "p", subagent.Capabilities{}, nil, 0, func(r *subagent.Request) { r.MaxDepth = new(2) }, subagent.CodeUnsupportedCapability},
		{"tool filter unsupported", "p", subagent.Capabilities{}, nil, 0, func(r *subagent.Request) { r.Tools.Deny = []string{"bash"} }, subagent.CodeUnsupportedCapability},
		{"persona unsupported", "p", subagent.Capabilities{}, nil, 0, func(r *subagent.Request) { r.Persona = "You review." }, subagent.CodeUnsupportedCapability},
		{"schema not object-rooted", "p", allCaps, nil, 0, func(r *subagent.Request) { r.OutputSchema = json.RawMessage(`{"type":"string"}`) }, subagent.CodeInvalidRequest},
		{"schema with unsupported keyword", "p", allCaps, nil, 0, func(r *subagent.Request) { r.OutputSchema = json.RawMessage(`{"type":"object","anyOf":[]}`) }, subagent.CodeInvalidRequest},
		{"child of depth 3 at default cap", "p", allCaps, nil, 3, nil, subagent.CodeDepthExceeded},
		{"service cap 0", "p", allCaps, new(0), 0, nil, subagent.CodeDepthExceeded},
		{"request lowers the cap", "p", allCaps, nil, 1, func(r *subagent.Request) { r.MaxDepth = new(1) }, subagent.CodeDepthExceeded},
		{"request cannot raise the cap", "p", allCaps, nil, 3, func(r *subagent.Request) { r.MaxDepth = new(10) }, subagent.CodeDepthExceeded},
		{"negative maxDepth", "p", allCaps, nil, 0, func(r *subagent.Request) { r.MaxDepth = new(-1) }, subagent.CodeInvalidRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &fakeProvider{name: "p", caps: tc.caps}
			svc := newService(t, tc.serviceCap, p)
			parent := newLog(t, "parent", tc.parentDepth)
			req := subagent.Request{Prompt: prompt, Parent: parent}
			if tc.req != nil {
				tc.req(&req)
			}
			h, err := svc.Start(t.Context(), tc.provider, req)
			if h != nil || !isCode(err, tc.code) {
				t.Fatalf("Start = %v, %v; want code %s", h, err, tc.code)
			}
			if n := len(p.started()); n != 0 {
				t.Errorf("provider started %d runs", n)
			}
			if n := parent.Len(); n != 0 {
				t.Errorf("parent log got %d events", n)
			}
		})
	}
}

func TestStartAdmits(t *testing.T) {
	for _, tc := range []struct {
		name        string
		parentDepth int
		maxDepth    *int
		wantDepth   int
	}{
		{"top level", 0, nil, 1},
		{"child at the cap", 2, nil, 3},
		{"lowered cap reached exactly", 1, new(2), 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &fakeProvider{name: "p", caps: allCaps, result: subagent.Result{StopReason: subagent.StopCompleted}}
			svc := newService(t, nil, p)
			parent := newLog(t, "parent", tc.parentDepth)
			h, err := svc.Start(t.Context(), "p", subagent.Request{
				Label: "lbl", Prompt: prompt, Parent: parent, MaxDepth: tc.maxDepth,
				Depth: -5, RunID: "forged", // replaced by the service
			})
			if err != nil {
				t.Fatal(err)
			}
			got := p.started()[0]
			if got.Depth != tc.wantDepth || got.RunID == "forged" || got.RunID != h.RunID() {
				t.Errorf("provider got depth %d run %q (handle %q)", got.Depth, got.RunID, h.RunID())
			}
			p.runs[0].finish()
			if _, err := h.Wait(t.Context()); err != nil {
				t.Fatal(err)
			}
			starts, ends := checkLifecycle(t, parent)
			if s := starts[h.RunID()]; s.Depth != tc.wantDepth || s.Label != "lbl" || s.ChildID != "fake-child" || s.Provider != "p" {
				t.Errorf("start %+v", s)
			}
			if e := ends[h.RunID()]; e.StopReason != subagent.StopCompleted || e.Usage != nil {
				t.Errorf("end %+v", e)
			}
		})
	}
}

func TestLifecycleOnFailures(t *testing.T) {
	t.Run("start failure logs nothing", func(t *testing.T) {
		w := newWorld(t, worldOptions{})
		w.mu.Lock()
		w.failNext = errors.New("no route")
		w.mu.Unlock()
		_, err := w.svc.Start(t.Context(), subagent.ProviderSpawn, subagent.Request{Prompt: prompt, Parent: w.parent})
		if err == nil || !strings.Contains(err.Error(), "no route") {
			t.Fatalf("Start = %v", err)
		}
		if w.parent.Len() != 0 {
			t.Errorf("parent log got %d events", w.parent.Len())
		}
	})
	t.Run("infrastructure failure closes the pair", func(t *testing.T) {
		p := &fakeProvider{name: "p", result: subagent.Result{StopReason: subagent.StopCompleted}, waitErr: errors.New("disk full")}
		svc := newService(t, nil, p)
		parent := newLog(t, "parent", 0)
		h, err := svc.Start(t.Context(), "p", subagent.Request{Prompt: prompt, Parent: parent})
		if err != nil {
			t.Fatal(err)
		}
		p.runs[0].finish()
		res, err := h.Wait(t.Context())
		if err == nil || res.StopReason != subagent.StopError || res.Diagnostic != "disk full" || res.ChildID != "fake-child" {
			t.Fatalf("Wait = %+v, %v", res, err)
		}
		_, ends := checkLifecycle(t, parent)
		if e := ends[h.RunID()]; e.StopReason != subagent.StopError || e.Diagnostic != "disk full" {
			t.Errorf("end %+v", e)
		}
	})
	t.Run("diagnostic is bounded", func(t *testing.T) {
		p := &fakeProvider{name: "p", result: subagent.Result{StopReason: subagent.StopError, Diagnostic: strings.Repeat("é", subagent.MaxDiagnostic)}}
		svc := newService(t, nil, p)
		h, err := svc.Start(t.Context(), "p", subagent.Request{Prompt: prompt, Parent: newLog(t, "parent", 0)})
		if err != nil {
			t.Fatal(err)
		}
		p.runs[0].finish()
		res, _ := h.Wait(t.Context())
		if len(res.Diagnostic) > subagent.MaxDiagnostic || !strings.HasSuffix(res.Diagnostic, "…") {
			t.Errorf("diagnostic of %d bytes", len(res.Diagnostic))
		}
	})
}

func TestDelegatedPermission(t *testing.T) {
	for _, tc := range []struct {
		parent string
		child  permission.State
	}{
		{permission.PresetReadOnly, permission.State{Preset: permission.PresetCustom, Mode: sandbox.ReadOnly, Approval: permission.ApprovalNever}},
		{permission.PresetWorkspaceWrite, permission.State{Preset: permission.PresetCustom, Mode: sandbox.WorkspaceWrite, Approval: permission.ApprovalNever}},
		{permission.PresetAuto, permission.State{Preset: permission.PresetAuto, Mode: sandbox.WorkspaceWrite, Approval: permission.ApprovalAsk}},
		{permission.PresetFullAccess, permission.State{Preset: permission.PresetFullAccess, Mode: sandbox.DangerFullAccess, Approval: permission.ApprovalNever}},
	} {
		t.Run(tc.parent, func(t *testing.T) {
			w := newWorld(t, worldOptions{})
			if err := permission.Select(w.parent, tc.parent, "user"); err != nil {
				t.Fatal(err)
			}
			w.srv.SetFallback(func(llmtest.Request) llmtest.Response { return llmtest.Response{Text: "ok"} })
			h, err := w.svc.Start(t.Context(), subagent.ProviderSpawn, subagent.Request{Prompt: prompt, Parent: w.parent})
			if err != nil {
				t.Fatal(err)
			}
			// Captured at start: a later change of the parent's preset does
			// not reach the child.
			if err := permission.Select(w.parent, permission.PresetFullAccess, "user"); err != nil {
				t.Fatal(err)
			}
			if _, err := h.Wait(t.Context()); err != nil {
				t.Fatal(err)
			}
			if err := h.Dispose(); err != nil {
				t.Fatal(err)
			}
			if got := w.spec(0).Permission; got.Preset != tc.parent {
				t.Errorf("captured %+v", got)
			}
			if got := permission.Current(w.child(0).log); got != tc.child {
				t.Errorf("child state %+v, want %+v", got, tc.child)
			}
		})
	}
	t.Run("nothing captured fails closed", func(t *testing.T) {
		log := newLog(t, "c", 1)
		if err := subagent.ApplyPermission(log, permission.State{}); err != nil {
			t.Fatal(err)
		}
		if got := permission.Current(log); got.Mode != sandbox.ReadOnly || got.Approval != permission.ApprovalNever {
			t.Errorf("state %+v", got)
		}
	})
}

func TestDisposeIsIdempotent(t *testing.T) {
	w := newWorld(t, worldOptions{})
	const full = "partial answer that the child never finishes"
	w.srv.SetFallback(func(llmtest.Request) llmtest.Response {
		// The role chunk and two text deltas, then nothing.
		return llmtest.Response{Text: full, StallAfter: 3}
	})
	h, err := w.svc.Start(t.Context(), subagent.ProviderSpawn, subagent.Request{Label: "stalled", Prompt: prompt, Parent: w.parent})
	if err != nil {
		t.Fatal(err)
	}
	waitForEvent(t, w.child(0).log, func(e session.Event) bool {
		var c session.AssistantChunk
		return e.Type == session.TypeAssistantChunk && e.Decode(&c) == nil && c.Chunk.Type == llm.ChunkTextDelta
	})
	for i := range 3 {
		if err := h.Dispose(); err != nil {
			t.Fatalf("Dispose #%d: %v", i+1, err)
		}
	}
	res, err := h.Wait(t.Context())
	if err != nil || res.StopReason != subagent.StopAborted || res.Diagnostic != "cause: disposed" {
		t.Fatalf("Wait = %+v, %v", res, err)
	}
	// What the child had streamed before it was cut off is its output.
	if got := res.Text(); got == "" || !strings.HasPrefix(full, got) {
		t.Errorf("output %q", got)
	}
	c := w.child(0)
	if c.closeCount() != 1 {
		t.Errorf("child closed %d times", c.closeCount())
	}
	checkBalanced(t, c.log.Events())
	if starts, ends := checkLifecycle(t, w.parent); len(starts) != 1 || ends[h.RunID()].StopReason != subagent.StopAborted {
		t.Errorf("lifecycle %+v %+v", starts, ends)
	}
}

func TestPersonaAndToolFilterReachTheChild(t *testing.T) {
	w := newWorld(t, worldOptions{})
	var mu sync.Mutex
	var got llmtest.Request
	w.srv.SetFallback(func(r llmtest.Request) llmtest.Response {
		mu.Lock()
		got = r
		mu.Unlock()
		return llmtest.Response{Text: "reviewed"}
	})
	h, err := w.svc.Start(t.Context(), subagent.ProviderSpawn, subagent.Request{
		Prompt: prompt, Parent: w.parent, Persona: "You are a careful reviewer.",
		Tools: subagent.ToolFilter{Allow: []string{"bash", "subagent"}, Deny: []string{"subagent"}},
		Model: "deepseek-v4-pro",
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := h.Dispose(); err != nil {
			t.Error(err)
		}
	}()
	res, err := h.Wait(t.Context())
	if err != nil || res.Text() != "reviewed" {
		t.Fatalf("Wait = %+v, %v", res, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if names := got.ToolNames(); len(names) != 1 || names[0] != "bash" {
		t.Errorf("child tools %v", names)
	}
	if sys, _ := got.Messages()[0]["content"].(string); !strings.Contains(sys, "careful reviewer") {
		t.Errorf("system prompt %q", sys)
	}
	if got.Model() != "deepseek-v4-pro" {
		t.Errorf("model %q", got.Model())
	}
}

func TestServiceRegistry(t *testing.T) {
	svc := newService(t, nil, &fakeProvider{name: "b"}, &fakeProvider{name: "a"})
	if err := svc.Register(&fakeProvider{name: "a"}); err == nil {
		t.Error("duplicate provider registered")
	}
	if err := svc.Register(&fakeProvider{}); err == nil {
		t.Error("nameless provider registered")
	}
	if got := strings.Join(svc.Providers(), ","); got != "a,b" {
		t.Errorf("providers %s", got)
	}
	if !svc.Unregister("a") || svc.Unregister("a") {
		t.Error("Unregister")
	}
	if svc.MaxDepth() != subagent.DefaultMaxDepth {
		t.Errorf("MaxDepth %d", svc.MaxDepth())
	}
	if _, err := subagent.NewService(subagent.Options{MaxDepth: new(-1)}); err == nil {
		t.Error("negative cap accepted")
	}
}
