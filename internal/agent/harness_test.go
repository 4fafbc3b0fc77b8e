package agent_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/dsh-dev/dsh/internal/agent"
	"github.com/dsh-dev/dsh/internal/llm"
	"github.com/dsh-dev/dsh/internal/llm/llmtest"
	"github.com/dsh-dev/dsh/internal/llm/openai"
	"github.com/dsh-dev/dsh/internal/session"
	"github.com/dsh-dev/dsh/internal/tool"
	"github.com/dsh-dev/dsh/internal/tools/bash"
)

// harness is an agent wired to a fake model server over real HTTP, with
// the real tool pipeline and bash tool.
type harness struct {
	t      *testing.T
	srv    *llmtest.Server
	log    *session.Log
	reg    *tool.Registry
	agent  *agent.Agent
	mu     sync.Mutex
	delays []time.Duration
}

func newHarness(t *testing.T, extra ...tool.Definition) *harness {
	t.Helper()
	srv := llmtest.New()
	t.Cleanup(srv.Close)
	h := &harness{t: t, srv: srv, reg: tool.NewRegistry()}
	if err := h.reg.Register("", bash.New(bash.Options{})); err != nil {
		t.Fatal(err)
	}
	for _, d := range extra {
		if err := h.reg.Register("", d); err != nil {
			t.Fatal(err)
		}
	}
	log, err := session.NewLog(session.Header{ID: "test-session", Cwd: t.TempDir()}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	h.log = log
	h.agent = h.newAgent(log)
	return h
}

func (h *harness) newAgent(log *session.Log) *agent.Agent {
	h.t.Helper()
	ad := openai.New(openai.Config{Provider: "deepseek", BaseURL: h.srv.URL(), APIKey: "k", DeepSeek: true, IdleTimeout: 5 * time.Second})
	a, err := agent.New(agent.Config{
		Log:      log,
		Route:    agent.Route{Provider: "deepseek", Model: llm.ModelInfo{ID: "deepseek-v4-flash", ContextWindow: 1000}, Adapter: ad, Retry: llm.DefaultRetryPolicy()},
		Tools:    h.reg,
		Pipeline: tool.NewPipeline(h.reg),
		System:   "You are a test agent.",
		Sleep: func(ctx context.Context, d time.Duration) error {
			h.mu.Lock()
			h.delays = append(h.delays, d)
			h.mu.Unlock()
			return ctx.Err()
		},
	})
	if err != nil {
		h.t.Fatal(err)
	}
	return a
}

// run queues prompt and runs the agent to idle.
func (h *harness) run(ctx context.Context, prompt string) agent.Outcome {
	h.t.Helper()
	if err := h.agent.Queue(agent.NewUserMessage(prompt)); err != nil {
		h.t.Fatal(err)
	}
	out, err := h.agent.Run(ctx)
	if err != nil {
		h.t.Fatalf("Run: %v", err)
	}
	return out
}

func bashCall(cmd string) llmtest.ToolCall {
	b, _ := json.Marshal(map[string]string{"command": cmd, "description": "test"})
	return llmtest.ToolCall{Name: "bash", Arguments: string(b)}
}

// eventsOf returns the decoded payloads of every event of type typ.
func eventsOf[T any](t *testing.T, events []session.Event, typ string) []T {
	t.Helper()
	var out []T
	for _, e := range events {
		if e.Type != typ {
			continue
		}
		var v T
		if err := e.Decode(&v); err != nil {
			t.Fatal(err)
		}
		out = append(out, v)
	}
	return out
}

// checkBalanced asserts the log invariants: contiguous seq, paired turns
// and steps, exactly one tool/result after each tool/call, every tool call
// the model made answered, and nothing for crash repair to close.
func checkBalanced(t *testing.T, events []session.Event) {
	t.Helper()
	openTurn, openStep := false, false
	calls := map[string]int{}
	requested := map[string]bool{}
	for i, e := range events {
		if e.Seq != int64(i) {
			t.Fatalf("seq %d at position %d", e.Seq, i)
		}
		if err := e.Validate(); err != nil {
			t.Fatal(err)
		}
		switch e.Type {
		case session.TypeTurnStart:
			if openTurn {
				t.Fatalf("seq %d: turn/start inside a turn", e.Seq)
			}
			openTurn = true
		case session.TypeTurnEnd:
			if !openTurn || openStep {
				t.Fatalf("seq %d: unbalanced turn/end", e.Seq)
			}
			openTurn = false
		case session.TypeStepStart:
			if !openTurn || openStep {
				t.Fatalf("seq %d: unbalanced step/start", e.Seq)
			}
			openStep = true
		case session.TypeStepEnd:
			if !openStep {
				t.Fatalf("seq %d: step/end without step/start", e.Seq)
			}
			openStep = false
		case session.TypeAssistantMsg:
			var am session.AssistantMessage
			_ = e.Decode(&am)
			for _, c := range am.Message.ToolCalls() {
				requested[c.ID] = true
			}
		case session.TypeToolCall:
			var c session.ToolCall
			_ = e.Decode(&c)
			if !requested[c.CallID] {
				t.Fatalf("seq %d: tool/call %s the model never requested", e.Seq, c.CallID)
			}
			calls[c.CallID]++
		case session.TypeToolResult:
			var r session.ToolResult
			_ = e.Decode(&r)
			if calls[r.CallID] != 1 {
				t.Fatalf("seq %d: tool/result %s without exactly one tool/call", e.Seq, r.CallID)
			}
			calls[r.CallID] = 2
		}
	}
	if openTurn || openStep {
		t.Fatal("log ends inside a turn or step")
	}
	for id, n := range calls {
		if n != 2 {
			t.Fatalf("tool call %s has no result", id)
		}
		delete(requested, id)
	}
	if len(requested) > 0 {
		t.Fatalf("requested calls never logged: %v", requested)
	}
	if cl := session.Closers(events); cl != nil {
		t.Fatalf("balanced log still has closers: %+v", cl)
	}
}

func toolResults(t *testing.T, events []session.Event) []session.ToolResult {
	return eventsOf[session.ToolResult](t, events, session.TypeToolResult)
}

func resultText(r session.ToolResult) string {
	s := ""
	for _, b := range r.Content {
		s += b.Text
	}
	return s
}

func msgText(m map[string]any) string {
	switch c := m["content"].(type) {
	case string:
		return c
	case nil:
		return ""
	default:
		return fmt.Sprint(c)
	}
}
