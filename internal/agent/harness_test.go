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
	"github.com/dsh-dev/dsh/internal/session/sessiontest"
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
	return h.newAgentWith(log, nil)
}

// newAgentWith is newAgent with the config adjusted by edit (if not nil).
func (h *harness) newAgentWith(log *session.Log, edit func(*agent.Config)) *agent.Agent {
	h.t.Helper()
	ad := openai.New(openai.Config{Provider: "deepseek", BaseURL: h.srv.URL(), APIKey: "k", DeepSeek: true, IdleTimeout: 5 * time.Second})
	cfg := agent.Config{
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
	}
	if edit != nil {
		edit(&cfg)
	}
	a, err := agent.New(cfg)
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

func eventsOf[T any](t *testing.T, events []session.Event, typ string) []T {
	t.Helper()
	return sessiontest.EventsOf[T](t, events, typ)
}

func checkBalanced(t *testing.T, events []session.Event) {
	t.Helper()
	sessiontest.CheckBalanced(t, events)
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
