package sessionquery_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dsh-dev/dsh/internal/app"
	"github.com/dsh-dev/dsh/internal/host"
	"github.com/dsh-dev/dsh/internal/leakcheck"
	"github.com/dsh-dev/dsh/internal/llm"
	"github.com/dsh-dev/dsh/internal/llm/llmtest"
	"github.com/dsh-dev/dsh/internal/session"
)

func TestMain(m *testing.M) { os.Exit(leakcheck.Run(m)) }

// enableTools turns the five tools on in the standard preset (and only
// them, to keep the requests small).
const enableTools = `
profile:
  - id: preset.standard
    module: agent-preset
    config:
      name: standard
      tools: [session_search, session_event_search, session_event_read, session_trace, session_event_trace]
`

type fixture struct {
	t   *testing.T
	srv *llmtest.Server
	app *app.App
	h   *host.Host
}

func newFixture(t *testing.T) *fixture {
	srv := llmtest.New()
	t.Cleanup(srv.Close)
	home := t.TempDir()
	if err := os.WriteFile(filepath.Join(home, "config.yaml"), []byte(enableTools), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("DSH_HOME", home)
	t.Setenv("DEEPSEEK_API_KEY", "test-key")
	t.Setenv("DEEPSEEK_BASE_URL", srv.URL())
	a, err := app.Open(t.Context(), app.Options{})
	if err != nil {
		t.Fatal(err)
	}
	h, err := host.New(host.Config{App: a, Holder: "sessionquery test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := h.Close(ctx); err != nil {
			t.Errorf("host close: %v", err)
		}
		if err := a.Close(); err != nil {
			t.Errorf("app close: %v", err)
		}
	})
	return &fixture{t: t, srv: srv, app: a, h: h}
}

// session runs one prompt in a new session of cwd to its end; the model
// answers with rs.
func (f *fixture) session(cwd, prompt string, rs ...llmtest.Response) string {
	f.t.Helper()
	info, err := f.h.Create(f.t.Context(), host.CreateRequest{Cwd: cwd})
	if err != nil {
		f.t.Fatal(err)
	}
	f.run(info.Header.ID, prompt, rs...)
	return info.Header.ID
}

func (f *fixture) run(id, prompt string, rs ...llmtest.Response) {
	f.t.Helper()
	f.srv.Enqueue(rs...)
	if err := f.h.Send(f.t.Context(), id, llm.Message{Role: llm.RoleUser, Content: []llm.Block{llm.TextBlock(prompt)}}, host.DeliveryQueue); err != nil {
		f.t.Fatal(err)
	}
	if _, err := f.h.RunUntilIdle(f.t.Context(), id); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) events(id string) []session.Event {
	f.t.Helper()
	events, _, err := f.h.Events(f.t.Context(), id, -1, 0)
	if err != nil {
		f.t.Fatal(err)
	}
	return events
}

func call(name string, args any) llmtest.ToolCall {
	b, _ := json.Marshal(args)
	return llmtest.ToolCall{Name: name, Arguments: string(b)}
}

// results returns the tool results of session id in log order.
func (f *fixture) results(id string) []session.ToolResult {
	var out []session.ToolResult
	for _, e := range f.events(id) {
		if e.Type == session.TypeToolResult {
			var r session.ToolResult
			if err := e.Decode(&r); err != nil {
				f.t.Fatal(err)
			}
			out = append(out, r)
		}
	}
	return out
}

func text(r session.ToolResult) string {
	var b strings.Builder
	for _, c := range r.Content {
		b.WriteString(c.Text)
	}
	return b.String()
}

func seqOf(t *testing.T, events []session.Event, typ string) int64 {
	t.Helper()
	for _, e := range events {
		if e.Type == typ {
			return e.Seq
		}
	}
	t.Fatalf("no %s event", typ)
	return -1
}

// check is one expectation on a tool result: an error code, or text it
// contains (and text it must not).
type check struct {
	code    string
	has     []string
	hasNot  []string
	comment string
}

// TestSessionQueryToolsScripted drives all five tools through the real
// agent loop with the scripted model: sessions of two workspaces, a fork
// and a child in another workspace, then one session whose model calls
// every tool with good and bad arguments. A session sees its workspace
// and its lineage, and nothing of the other workspace.
func TestSessionQueryToolsScripted(t *testing.T) {
	f := newFixture(t)
	dirA, dirB := t.TempDir(), t.TempDir()
	ctx := t.Context()

	// a1 in workspace A: a prompt, a tool call (session_search) and a reply.
	a1 := f.session(dirA, "plan the quokka migration",
		llmtest.Response{Reasoning: "look for earlier quokka work", ToolCalls: []llmtest.ToolCall{call("session_search", map[string]any{"query": "wombat"})}},
		llmtest.Response{Text: "The quokka migration plan is ready."})
	a1Events := f.events(a1)
	a1Call := seqOf(t, a1Events, session.TypeToolCall)
	a1Result := seqOf(t, a1Events, session.TypeToolResult)
	// b1 in workspace B must stay invisible from A.
	b1 := f.session(dirB, "quokka secrets of workspace B", llmtest.Response{Text: "noted the quokka secrets"})

	// The caller in A, with a child in workspace B (its lineage) and a fork.
	c := f.session(dirA, "start the wombat audit", llmtest.Response{Text: "wombat audit started"})
	child := session.Header{Version: session.FormatVersion, ID: c + "-child", CreatedAt: time.Now().UnixMilli(), Cwd: dirB,
		ParentSession: c, Origin: "subagent", DelegationDepth: 1, AgentPreset: "standard"}
	if err := f.app.Store.Create(ctx, child); err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(llm.Message{ID: "m", Role: llm.RoleUser, Content: []llm.Block{llm.TextBlock("child quokka task in B")}, Source: llm.Source{Kind: "user"}})
	if err := f.app.Store.Append(ctx, child.ID, []session.Event{{Type: session.TypeUserMessage, Seq: 0, Time: time.Now().UnixMilli(), Data: raw, SurfaceOp: session.Append}}); err != nil {
		t.Fatal(err)
	}
	fork, err := f.h.Fork(ctx, a1)
	if err != nil {
		t.Fatal(err)
	}

	calls := []struct {
		tc llmtest.ToolCall
		check
	}{
		{call("session_search", map[string]any{"query": "quokka"}), check{has: []string{a1, child.ID, "**quokka**"}, hasNot: []string{b1}}},
		{call("session_search", map[string]any{"query": "secrets"}), check{has: []string{"No session matches"}, comment: "B's words are not found from A"}},
		{call("session_search", map[string]any{"query": `"( )" *`}), check{code: "SEARCH_INVALID_QUERY"}},
		{call("session_search", map[string]any{"query": `quokka OR "migration plan" NOT(x`}), check{has: []string{a1}}},
		{call("session_search", map[string]any{}), check{code: "INVALID_ARGS"}},
		{call("session_search", map[string]any{"query": "x", "bogus": 1}), check{code: "INVALID_ARGS"}},
		{call("session_event_search", map[string]any{"query": "quokka", "session_id": a1, "types": []string{"assistant/message"}}),
			check{has: []string{"seq", "assistant/message", "migration plan"}, hasNot: []string{"user/message"}}},
		{call("session_event_search", map[string]any{"query": "quokka", "session_id": b1}), check{code: "SESSION_NOT_FOUND"}},
		{call("session_event_search", map[string]any{"query": "quokka", "session_id": "ffffffff-no-such"}), check{code: "SESSION_NOT_FOUND"}},
		{call("session_event_search", map[string]any{"query": "quokka", "types": []string{"no/such"}}), check{code: "INVALID_ARGS"}},
		{call("session_event_search", map[string]any{"query": "quokka", "since": "yesterday"}), check{code: "INVALID_ARGS"}},
		{call("session_event_search", map[string]any{"query": "quokka", "since": "2000-01-01T00:00:00Z", "seq_from": 0, "seq_to": 2}), check{has: []string{"user/message"}, hasNot: []string{"assistant/message"}}},
		{call("session_event_read", map[string]any{"session_id": a1, "seqs": []int64{a1Call, 9999}}), check{has: []string{"tool/call", `"name":"session_search"`, "no event at seq 9999"}}},
		{call("session_event_read", map[string]any{"session_id": a1[:24], "from": 0, "to": 1}), check{has: []string{"--- seq 0", "--- seq 1"}, hasNot: []string{"--- seq 2"}}},
		{call("session_event_read", map[string]any{"session_id": b1, "seqs": []int64{0}}), check{code: "SESSION_NOT_FOUND"}},
		{call("session_event_read", map[string]any{"session_id": a1, "seqs": []int64{0}, "from": 0}), check{code: "INVALID_ARGS"}},
		{call("session_event_read", map[string]any{"session_id": a1, "from": 5, "to": 2}), check{code: "INVALID_ARGUMENT"}},
		{call("session_trace", map[string]any{"session_id": a1}), check{has: []string{"No parent", fork.Header.ID, "fork"}}},
		{call("session_trace", map[string]any{"session_id": child.ID}), check{has: []string{"Ancestors", c, "← you", "subagent"}}},
		{call("session_trace", map[string]any{"session_id": b1}), check{code: "SESSION_NOT_FOUND"}},
		{call("session_event_trace", map[string]any{"session_id": a1, "seq": a1Call}), check{has: []string{"result: seq " + fmt.Sprint(a1Result), "requested-by"}}},
		{call("session_event_trace", map[string]any{"session_id": a1, "seq": a1Result}), check{has: []string{"call: seq " + fmt.Sprint(a1Call)}}},
		{call("session_event_trace", map[string]any{"session_id": a1, "seq": 0}), check{has: []string{"entered-as"}, comment: "the queued prompt and its user/message"}},
		{call("session_event_trace", map[string]any{"session_id": a1, "seq": 100000}), check{code: "SESSION_EVENT_NOT_FOUND"}},
		{call("session_event_trace", map[string]any{"session_id": b1, "seq": 0}), check{code: "SESSION_NOT_FOUND"}},
		{call("session_event_trace", map[string]any{"session_id": a1}), check{code: "INVALID_ARGS"}},
	}
	tcs := make([]llmtest.ToolCall, len(calls))
	for i, c := range calls {
		tcs[i] = c.tc
	}
	f.run(c, "what did we do about quokkas?", llmtest.Response{ToolCalls: tcs}, llmtest.Response{Text: "done"})
	results := f.results(c)
	if len(results) != len(calls) {
		t.Fatalf("%d results for %d calls", len(results), len(calls))
	}
	for i, want := range calls {
		r := results[i]
		got := text(r)
		label := fmt.Sprintf("call %d %s %s", i, want.tc.Name, want.tc.Arguments)
		switch {
		case want.code != "":
			if !r.IsError || r.Error == nil || r.Error.Code != want.code {
				t.Errorf("%s: want %s, got error=%v %+v: %s", label, want.code, r.IsError, r.Error, got)
			}
		case r.IsError:
			t.Errorf("%s: failed: %s", label, got)
		}
		for _, s := range want.has {
			if !strings.Contains(got, s) {
				t.Errorf("%s: result lacks %q:\n%s", label, s, got)
			}
		}
		for _, s := range want.hasNot {
			if strings.Contains(got, s) {
				t.Errorf("%s: result has %q:\n%s", label, s, got)
			}
		}
		// Nothing of workspace B's own session leaks, not even its id.
		if strings.Contains(got, b1) && want.code == "" {
			t.Errorf("%s: names the other workspace's session %s", label, b1)
		}
	}
}
