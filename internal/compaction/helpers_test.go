package compaction_test

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dsh-dev/dsh/internal/agent"
	"github.com/dsh-dev/dsh/internal/compaction"
	"github.com/dsh-dev/dsh/internal/llm"
	"github.com/dsh-dev/dsh/internal/llm/llmtest"
	"github.com/dsh-dev/dsh/internal/llm/openai"
	"github.com/dsh-dev/dsh/internal/session"
	"github.com/dsh-dev/dsh/internal/tool"
	"github.com/dsh-dev/dsh/internal/tools/bash"
)

const system = "You are a test agent."

// recorder wraps adapters to keep every llm.Request, tagged by caller, in
// the order the calls were made.
type recorder struct {
	mu   sync.Mutex
	reqs []tagged
}

type tagged struct {
	tag string // "agent" or "summary"
	req llm.Request
}

type recAdapter struct {
	rec   *recorder
	tag   string
	inner llm.Adapter
}

func (a recAdapter) Stream(ctx context.Context, req llm.Request) iter.Seq2[llm.Chunk, error] {
	a.rec.mu.Lock()
	a.rec.reqs = append(a.rec.reqs, tagged{a.tag, req})
	a.rec.mu.Unlock()
	return a.inner.Stream(ctx, req)
}

func (r *recorder) all() []tagged {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]tagged(nil), r.reqs...)
}

// harness is an agent and a compactor over one log, both talking to the
// fake model server over real HTTP through the OpenAI-compatible adapter.
type harness struct {
	t     *testing.T
	srv   *llmtest.Server
	rec   *recorder
	reg   *tool.Registry
	log   *session.Log
	comp  *compaction.Compactor
	agent *agent.Agent
}

// newHarness wires the compactor's hooks into the agent. window is the
// route's context window (logged in request/context); opts may set the
// compactor's own options (Log and Adapter are filled in).
func newHarness(t *testing.T, window int, opts compaction.Options) *harness {
	t.Helper()
	srv := llmtest.New()
	t.Cleanup(srv.Close)
	h := &harness{t: t, srv: srv, rec: &recorder{}, reg: tool.NewRegistry()}
	if err := h.reg.Register("", bash.New(bash.Options{})); err != nil {
		t.Fatal(err)
	}
	log, err := session.NewLog(session.Header{ID: "test-session", Cwd: t.TempDir()}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	h.log = log
	ad := openai.New(openai.Config{Provider: "deepseek", BaseURL: srv.URL(), APIKey: "k", DeepSeek: true, IdleTimeout: 5 * time.Second})
	opts.Log, opts.Adapter = log, recAdapter{h.rec, "summary", ad}
	h.comp = compaction.New(opts)
	h.agent, err = agent.New(agent.Config{
		Log:      log,
		Route:    agent.Route{Provider: "deepseek", Model: llm.ModelInfo{ID: "deepseek-v4-flash", ContextWindow: window}, Adapter: recAdapter{h.rec, "agent", ad}, Retry: llm.DefaultRetryPolicy()},
		Tools:    h.reg,
		Pipeline: tool.NewPipeline(h.reg),
		System:   system,
		Hooks: agent.Hooks{
			PreStep:      []func(context.Context, agent.PreStep) ([]llm.Message, bool, error){h.comp.PreStep},
			RequestError: []func(context.Context, agent.RequestError) bool{h.comp.RequestError},
		},
		// Retries are not under test: fail fast instead of sleeping.
		Sleep: func(ctx context.Context, d time.Duration) error { return ctx.Err() },
	})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func (h *harness) run(prompt string) agent.Outcome {
	h.t.Helper()
	if err := h.agent.Queue(agent.NewUserMessage(prompt)); err != nil {
		h.t.Fatal(err)
	}
	out, err := h.agent.Run(h.t.Context())
	if err != nil {
		h.t.Fatalf("Run: %v", err)
	}
	return out
}

func bashCall(cmd string) llmtest.ToolCall {
	b, _ := json.Marshal(map[string]string{"command": cmd, "description": "test"})
	return llmtest.ToolCall{Name: "bash", Arguments: string(b)}
}

// isSummaryRequest tells the compactor's calls apart on the wire: their
// last message is the summary instruction.
func isSummaryRequest(r llmtest.Request) bool {
	msgs := r.Messages()
	if len(msgs) == 0 {
		return false
	}
	s, _ := msgs[len(msgs)-1]["content"].(string)
	return s == compaction.Instruction
}

// verboseCommand prints about 350 bytes tagged with n.
func verboseCommand(n int) string {
	return fmt.Sprintf(`for i in $(seq 1 6); do echo "step %d line $i: the quick brown fox jumps over the lazy dog"; done`, n)
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

// checkLog asserts what every compaction must preserve: contiguous valid
// events, and history derived from the events alone equal to the live one.
func checkLog(t *testing.T, log *session.Log) {
	t.Helper()
	events := log.Events()
	for i, e := range events {
		if e.Seq != int64(i) {
			t.Fatalf("seq %d at position %d", e.Seq, i)
		}
		if err := e.Validate(); err != nil {
			t.Fatal(err)
		}
	}
	derived, err := session.DeriveMessages(events)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(derived, log.Messages()) {
		t.Fatalf("DeriveMessages(events) != log.Messages()\nderived: %+v\nlive:    %+v", derived, log.Messages())
	}
	// Brackets pair up.
	open := map[string]bool{}
	for _, e := range events {
		switch e.Type {
		case session.TypeCompactionStart:
			var p compaction.StartPayload
			_ = e.Decode(&p)
			open[p.CompactionID] = true
		case session.TypeCompactionEnd:
			var p compaction.EndPayload
			_ = e.Decode(&p)
			if !open[p.CompactionID] {
				t.Fatalf("compaction/end %s without start", p.CompactionID)
			}
			delete(open, p.CompactionID)
		}
	}
	if len(open) > 0 {
		t.Fatalf("unfinished compactions %v", open)
	}
}

// surfaceAt returns the history as it was just before event seq.
func surfaceAt(t *testing.T, events []session.Event, seq int64) []session.SurfaceNode {
	t.Helper()
	l, err := session.NewLog(session.Header{ID: "replay"}, events[:seq], nil)
	if err != nil {
		t.Fatal(err)
	}
	return l.Surface()
}

func messagesOf(nodes []session.SurfaceNode) []llm.Message {
	out := make([]llm.Message, len(nodes))
	for i, n := range nodes {
		out[i] = n.Message
	}
	return out
}

func seqOf(t *testing.T, events []session.Event, typ, compactionID string) int64 {
	t.Helper()
	for _, e := range events {
		if e.Type == typ && strings.Contains(string(e.Data), `"compactionId":"`+compactionID+`"`) {
			return e.Seq
		}
	}
	t.Fatalf("no %s for %s", typ, compactionID)
	return -1
}
