package subagent_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dsh-dev/dsh/internal/agent"
	"github.com/dsh-dev/dsh/internal/llm"
	"github.com/dsh-dev/dsh/internal/llm/llmtest"
	"github.com/dsh-dev/dsh/internal/llm/openai"
	"github.com/dsh-dev/dsh/internal/session"
	"github.com/dsh-dev/dsh/internal/session/sessiontest"
	"github.com/dsh-dev/dsh/internal/subagent"
	"github.com/dsh-dev/dsh/internal/tool"
	"github.com/dsh-dev/dsh/internal/tools/bash"
)

// world is a parent agent and every child it delegates to, all real
// agents talking to one fake model server over HTTP. It is also the
// test Factory: children get in-memory logs and the same tools as the
// parent (bash and both delegation tools), so they can delegate too.
type world struct {
	t      *testing.T
	srv    *llmtest.Server
	svc    *subagent.Service
	parent *session.Log
	agent  *agent.Agent
	tools  []tool.Definition // offered to every agent, before filtering

	mu       sync.Mutex
	logs     map[string]*session.Log // guarded by mu; every session by id
	specs    []subagent.ChildSpec    // guarded by mu
	children []*testChild            // guarded by mu
	failNext error                   // guarded by mu; the next NewChild fails with it
}

type worldOptions struct {
	maxDepth *int
	// spawn adjusts the subagent tool's options.
	spawn func(*subagent.ToolOptions)
}

func newWorld(t *testing.T, o worldOptions) *world {
	t.Helper()
	srv := llmtest.New()
	t.Cleanup(srv.Close)
	svc, err := subagent.NewService(subagent.Options{MaxDepth: o.maxDepth})
	if err != nil {
		t.Fatal(err)
	}
	w := &world{t: t, srv: srv, svc: svc, logs: map[string]*session.Log{}}
	for _, p := range []subagent.Provider{subagent.Spawn(w), subagent.Fork(w)} {
		if err := svc.Register(p); err != nil {
			t.Fatal(err)
		}
	}
	spawnOpts := subagent.ToolOptions{Service: svc, Provider: subagent.ProviderSpawn, ResolveLog: w.resolve}
	if o.spawn != nil {
		o.spawn(&spawnOpts)
	}
	spawn, err := subagent.NewTool(spawnOpts)
	if err != nil {
		t.Fatal(err)
	}
	fork, err := subagent.NewTool(subagent.ToolOptions{Service: svc, Provider: subagent.ProviderFork, ResolveLog: w.resolve})
	if err != nil {
		t.Fatal(err)
	}
	w.tools = []tool.Definition{bash.New(bash.Options{}), spawn, fork}
	w.parent, err = session.NewLog(session.Header{Version: session.FormatVersion, ID: "parent", Cwd: t.TempDir(), AgentPreset: "standard"}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	w.logs["parent"] = w.parent
	w.agent = w.newAgent(w.parent, w.registry(subagent.ToolFilter{}, nil), "deepseek-v4-flash", "")
	return w
}

func (w *world) newAgent(log *session.Log, reg *tool.Registry, model, persona string) *agent.Agent {
	w.t.Helper()
	ad := openai.New(openai.Config{Provider: "deepseek", BaseURL: w.srv.URL(), APIKey: "k", DeepSeek: true, IdleTimeout: 10 * time.Second})
	a, err := agent.New(agent.Config{
		Log:      log,
		Route:    agent.Route{Provider: "deepseek", Model: llm.ModelInfo{ID: model, ContextWindow: 100000}, Adapter: ad, Retry: llm.DefaultRetryPolicy()},
		Tools:    reg,
		Pipeline: tool.NewPipeline(reg),
		System:   strings.TrimSpace("You are a test agent. " + persona),
		Sleep:    func(ctx context.Context, _ time.Duration) error { return ctx.Err() },
	})
	if err != nil {
		w.t.Fatal(err)
	}
	return a
}

func (w *world) registry(filter subagent.ToolFilter, extra []tool.Definition) *tool.Registry {
	reg := tool.NewRegistry()
	for _, d := range w.tools {
		if filter.Permits(d.Name) {
			if err := reg.Register("", d); err != nil {
				w.t.Fatal(err)
			}
		}
	}
	for _, d := range extra {
		if err := reg.Register("", d); err != nil {
			w.t.Fatal(err)
		}
	}
	return reg
}

// resolve is the tools' log resolver: the composition root's job.
func (w *world) resolve(c *tool.Call) (*session.Log, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if log, ok := w.logs[c.SessionID]; ok {
		return log, nil
	}
	return nil, fmt.Errorf("no live session %q", c.SessionID)
}

// NewChild implements subagent.Factory as the package documentation
// asks of the composition root.
func (w *world) NewChild(_ context.Context, spec subagent.ChildSpec) (subagent.Child, error) {
	w.mu.Lock()
	if err := w.failNext; err != nil {
		w.failNext = nil
		w.mu.Unlock()
		return nil, err
	}
	id := fmt.Sprintf("child-%d", len(w.specs)+1)
	w.specs = append(w.specs, spec)
	w.mu.Unlock()

	log, err := subagent.NewChildLog(context.Background(), nil, spec, id)
	if err != nil {
		return nil, err
	}
	model := spec.Model
	if model == "" {
		model = "deepseek-v4-flash"
	}
	// The agent comes right after session/end-seed: it adds its own marker
	// on first write unless the log's last event is one.
	c := &testChild{id: id, log: log, agent: w.newAgent(log, w.registry(spec.Tools, spec.ExtraTools), model, spec.Persona)}
	if err := subagent.ApplyPermission(log, spec.Permission); err != nil {
		return nil, err
	}
	w.mu.Lock()
	w.logs[id] = log
	w.children = append(w.children, c)
	w.mu.Unlock()
	return c, nil
}

type testChild struct {
	id     string
	log    *session.Log
	agent  *agent.Agent
	mu     sync.Mutex
	closes int
}

func (c *testChild) ID() string          { return c.id }
func (c *testChild) Log() *session.Log   { return c.log }
func (c *testChild) Agent() *agent.Agent { return c.agent }
func (c *testChild) closeCount() int     { c.mu.Lock(); defer c.mu.Unlock(); return c.closes }
func (c *testChild) Close() error        { c.mu.Lock(); c.closes++; c.mu.Unlock(); return nil }
func (w *world) child(i int) *testChild  { w.mu.Lock(); defer w.mu.Unlock(); return w.children[i] }
func (w *world) spec(i int) subagent.ChildSpec {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.specs[i]
}

func (w *world) childCount() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.children)
}

// run queues prompt on the parent and runs it to idle.
func (w *world) run(ctx context.Context, prompts ...string) agent.Outcome {
	w.t.Helper()
	for _, p := range prompts {
		if err := w.agent.Queue(agent.NewUserMessage(p)); err != nil {
			w.t.Fatal(err)
		}
	}
	out, err := w.agent.Run(ctx)
	if err != nil {
		w.t.Fatalf("Run: %v", err)
	}
	return out
}

// --- fake model routing -------------------------------------------------

func sessionOf(r llmtest.Request) string { return r.Header.Get("x-deepseek-harness-session-id") }

// userTexts returns the text of every user message of the request.
func userTexts(r llmtest.Request) []string {
	var out []string
	for _, m := range r.Messages() {
		if m["role"] == "user" {
			s, _ := m["content"].(string)
			out = append(out, s)
		}
	}
	return out
}

// hasUserText reports whether a user message of the request contains
// marker; delegation prompts carry unique markers so the fallback can
// tell the conversations apart.
func hasUserText(r llmtest.Request, marker string) bool {
	for _, s := range userTexts(r) {
		if strings.Contains(s, marker) {
			return true
		}
	}
	return false
}

// toolResults returns the "tool" messages' contents in order.
func toolResults(r llmtest.Request) []string {
	var out []string
	for _, m := range r.Messages() {
		if m["role"] == "tool" {
			s, _ := m["content"].(string)
			out = append(out, s)
		}
	}
	return out
}

func call(name string, args any) llmtest.ToolCall {
	b, _ := json.Marshal(args)
	return llmtest.ToolCall{Name: name, Arguments: string(b)}
}

func delegate(name, description, prompt string) llmtest.ToolCall {
	return call(name, map[string]string{"description": description, "prompt": prompt})
}

func bashCall(cmd string) llmtest.ToolCall {
	return call("bash", map[string]string{"command": cmd, "description": "test"})
}

func failResponse(format string, args ...any) llmtest.Response {
	return llmtest.Response{Status: 400, ErrorBody: fmt.Sprintf(`{"error":{"message":%q}}`, fmt.Sprintf(format, args...))}
}

// --- log checks ---------------------------------------------------------

func eventsOf[T any](t *testing.T, events []session.Event, typ string) []T {
	t.Helper()
	return sessiontest.EventsOf[T](t, events, typ)
}

// checkBalanced asserts the structural invariants of a log.
func checkBalanced(t *testing.T, events []session.Event) {
	t.Helper()
	sessiontest.CheckBalanced(t, events)
}

// checkLifecycle asserts that every subagent/start on log is followed by
// exactly one subagent/end with the same run id and child, and returns
// the ends by run id.
func checkLifecycle(t *testing.T, log *session.Log) (map[string]subagent.StartEvent, map[string]subagent.EndEvent) {
	t.Helper()
	starts := map[string]subagent.StartEvent{}
	ends := map[string]subagent.EndEvent{}
	for _, e := range log.Events() {
		if e.SurfaceOp != nil && (e.Type == session.TypeSubagentStart || e.Type == session.TypeSubagentEnd) {
			t.Fatalf("lifecycle event %d has a surface op", e.Seq)
		}
		switch e.Type {
		case session.TypeSubagentStart:
			var s subagent.StartEvent
			_ = e.Decode(&s)
			if _, dup := starts[s.RunID]; dup || s.RunID == "" || s.Mode != subagent.ModeOneShot {
				t.Fatalf("bad subagent/start %+v", s)
			}
			starts[s.RunID] = s
		case session.TypeSubagentEnd:
			var en subagent.EndEvent
			_ = e.Decode(&en)
			s, ok := starts[en.RunID]
			if _, dup := ends[en.RunID]; !ok || dup || s.ChildID != en.ChildID {
				t.Fatalf("subagent/end %+v without a matching start", en)
			}
			ends[en.RunID] = en
		}
	}
	if len(starts) != len(ends) {
		t.Fatalf("%d starts, %d ends", len(starts), len(ends))
	}
	return starts, ends
}

func resultsOf(t *testing.T, log *session.Log) []session.ToolResult {
	return eventsOf[session.ToolResult](t, log.Events(), session.TypeToolResult)
}

func text(blocks []llm.Block) string {
	var b strings.Builder
	for _, bl := range blocks {
		b.WriteString(bl.Text)
	}
	return b.String()
}

// waitForEvent blocks until log holds an event matching pred.
func waitForEvent(t *testing.T, log *session.Log, pred func(session.Event) bool) {
	t.Helper()
	seen := make(chan struct{})
	var once sync.Once
	signal := func(e session.Event) {
		if pred(e) {
			once.Do(func() { close(seen) })
		}
	}
	log.Observe(signal)
	for _, e := range log.Events() { // appended before Observe
		signal(e)
	}
	select {
	case <-seen:
	case <-t.Context().Done():
		t.Fatal("the awaited event never came")
	}
}

func isCode(err error, code string) bool {
	var se *subagent.Error
	return errors.As(err, &se) && se.Code == code
}
