package compaction_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/dsh-dev/dsh/internal/compaction"
	"github.com/dsh-dev/dsh/internal/llm"
	"github.com/dsh-dev/dsh/internal/session"
)

// logBuilder appends events to a real log and remembers their payload
// sizes, so expectations are computed from what was actually logged.
type logBuilder struct {
	t   *testing.T
	log *session.Log
}

func newLogBuilder(t *testing.T) *logBuilder {
	t.Helper()
	l, err := session.NewLog(session.Header{ID: "meter"}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return &logBuilder{t, l}
}

// The heuristic measures what the model reads, 4 bytes a token: text,
// tool names and arguments, the system prompt and tool schemas, plus 16
// bytes a message; never the log's JSON envelopes.
const perMessage = 16

// add appends an event.
func (b *logBuilder) add(typ string, data any, opts ...session.AppendOption) {
	b.t.Helper()
	if _, err := b.log.Append(typ, data, opts...); err != nil {
		b.t.Fatal(err)
	}
}

// header logs a request header and returns its heuristic size in bytes.
func (b *logBuilder) header() int {
	system, params := "system prompt "+strings.Repeat("s", 100), `{"type":"object"}`
	b.add(session.TypeRequestHeader, session.RequestHeader{Reason: "initial", Header: session.RequestHeaderData{
		Config: session.CallConfig{Provider: "deepseek", Model: "m"},
		System: system,
		Tools:  []llm.ToolSchema{{Name: "bash", Description: "run", Parameters: json.RawMessage(params)}},
	}})
	return len(system) + len("bash") + len("run") + len(params)
}

func (b *logBuilder) window(n int) {
	b.add(session.TypeRequestContext, session.RequestContext{Provider: "deepseek", Model: "m", ContextWindow: n})
}

// user, assistant, call and result log a message and return its
// heuristic size in bytes.
func (b *logBuilder) user(text string) int {
	b.add(session.TypeUserMessage, llm.Message{ID: "u", Role: llm.RoleUser, Content: []llm.Block{llm.TextBlock(text)}, Source: llm.Source{Kind: "user"}}, session.Surface())
	return len(text) + perMessage
}

func (b *logBuilder) assistant(text string, usage *llm.Usage) int {
	b.add(session.TypeAssistantMsg, session.AssistantMessage{Turn: 1, Step: 1, Usage: usage,
		Message: llm.Message{ID: "a", Role: llm.RoleAssistant, Content: []llm.Block{llm.TextBlock(text)}, Source: llm.Source{Kind: "model"}}}, session.Surface())
	return len(text) + perMessage
}

func (b *logBuilder) call(id string, usage *llm.Usage) int {
	args := `{"command":"true"}`
	b.add(session.TypeAssistantMsg, session.AssistantMessage{Turn: 1, Step: 1, Usage: usage,
		Message: llm.Message{ID: "a-" + id, Role: llm.RoleAssistant, Content: []llm.Block{{Type: llm.BlockToolCall, ID: id, Name: "bash", Arguments: args}}, Source: llm.Source{Kind: "model"}}}, session.Surface())
	return len("bash") + len(args) + perMessage
}

func (b *logBuilder) result(id, text string) int {
	b.add(session.TypeToolResult, session.ToolResult{Turn: 1, Step: 1, CallID: id, Name: "bash", Content: []llm.Block{llm.TextBlock(text)}}, session.Surface())
	return len(text) + perMessage
}

func ceil4(n int) int { return (n + 3) / 4 }

func TestEstimate(t *testing.T) {
	usage := &llm.Usage{InputTokens: 3000, CacheReadTokens: 50, CacheWriteTokens: 5, OutputTokens: 20} // 3075
	enter := llm.Message{ID: "e", Role: llm.RoleUser, Content: []llm.Block{llm.TextBlock("entering " + strings.Repeat("e", 37))}, Source: llm.Source{Kind: "user"}}
	enterBytes := len("entering ") + 37 + perMessage
	for _, tc := range []struct {
		name  string
		build func(b *logBuilder) (want int, entering []llm.Message)
	}{
		{"empty log", func(b *logBuilder) (int, []llm.Message) { return 0, nil }},
		{"no usage: heuristic over header and surface", func(b *logBuilder) (int, []llm.Message) {
			n := b.header() + b.user("hello") + b.assistant("hi there", nil)
			return ceil4(n), nil
		}},
		{"entering messages are counted", func(b *logBuilder) (int, []llm.Message) {
			n := b.header() + b.user("hello")
			return ceil4(n + enterBytes), []llm.Message{enter}
		}},
		{"anchor plus what came after it", func(b *logBuilder) (int, []llm.Message) {
			b.header()
			b.user(strings.Repeat("x", 4000)) // covered by the anchor
			b.call("c1", usage)
			n := b.result("c1", strings.Repeat("y", 999))
			return 3075 + ceil4(n), nil
		}},
		{"latest usage wins", func(b *logBuilder) (int, []llm.Message) {
			b.header()
			b.user("hello")
			b.call("c1", &llm.Usage{InputTokens: 9999})
			b.result("c1", "out")
			b.call("c2", usage)
			n := b.result("c2", "out2")
			return 3075 + ceil4(n+enterBytes), []llm.Message{enter}
		}},
		{"a message without usage does not move the anchor", func(b *logBuilder) (int, []llm.Message) {
			b.header()
			b.user("hello")
			b.call("c1", usage)
			n := b.result("c1", "out") + b.assistant("no usage reported", nil)
			return 3075 + ceil4(n), nil
		}},
		{"a provider that under-reports: the heuristic is the larger", func(b *logBuilder) (int, []llm.Message) {
			n := b.header() + b.user(strings.Repeat("x", 4000))
			n += b.call("c1", &llm.Usage{InputTokens: 10, OutputTokens: 5})
			n += b.result("c1", strings.Repeat("y", 999))
			return ceil4(n + enterBytes), []llm.Message{enter}
		}},
		{"an image counts as 1600 tokens, not its data", func(b *logBuilder) (int, []llm.Message) {
			img := llm.Block{Type: llm.BlockImage, MediaType: "image/png", Data: strings.Repeat("A", 300_000)}
			n := b.header()
			b.add(session.TypeUserMessage, llm.Message{ID: "u", Role: llm.RoleUser, Content: []llm.Block{llm.TextBlock("look"), img}, Source: llm.Source{Kind: "user"}}, session.Surface())
			n += b.call("c1", nil)
			b.add(session.TypeToolResult, session.ToolResult{Turn: 1, Step: 1, CallID: "c1", Name: "read_image", Content: []llm.Block{img}}, session.Surface())
			n += len("look") + 2*perMessage // the user message and the tool result, besides their images
			// Three images: two logged, one entering.
			e := llm.Message{ID: "e", Role: llm.RoleUser, Content: []llm.Block{img}, Source: llm.Source{Kind: "user"}}
			return ceil4(n+perMessage) + 3*1600, []llm.Message{e}
		}},
		{"a replace after the anchor falls back to the heuristic", func(b *logBuilder) (int, []llm.Message) {
			h := b.header()
			b.user("hello")
			b.call("c1", usage)
			b.result("c1", "out")
			sum := compaction.SummaryMessage("x", []llm.Block{llm.TextBlock("short")})
			b.add(session.TypeUserMessage, sum, func(e *session.Event) {
				e.SurfaceOp = &session.SurfaceOp{Replace: true, Start: 0, End: 2}
				e.SourceEventSeqs = []int64{1, 2, 3}
			})
			return ceil4(h + len(sum.Text()) + perMessage), nil
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Metering must agree whether the compactor observed the
			// appends live or folded them as a backlog (a resumed log).
			b := newLogBuilder(t)
			live := compaction.New(compaction.Options{Log: b.log})
			want, entering := tc.build(b)
			backlog := compaction.New(compaction.Options{Log: b.log})
			for name, c := range map[string]*compaction.Compactor{"live": live, "backlog": backlog} {
				if got := c.Estimate(entering); got != want {
					t.Errorf("%s: Estimate = %d, want %d", name, got, want)
				}
			}
		})
	}
}

func TestPressureAndWindow(t *testing.T) {
	for _, tc := range []struct {
		name       string
		option     int // Options.ContextWindow
		logged     int // request/context window, 0 = none logged
		wantWindow int
	}{
		{"no window known", 0, 0, 0},
		{"window from request/context", 0, 1000, 1000},
		{"option overrides the log", 500, 1000, 500},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newLogBuilder(t)
			est := ceil4(b.header() + b.user(strings.Repeat("p", 300)))
			c := compaction.New(compaction.Options{Log: b.log, ContextWindow: tc.option})
			if tc.logged > 0 {
				b.window(tc.logged)
			}
			if got := c.Window(); got != tc.wantWindow {
				t.Fatalf("Window = %d, want %d", got, tc.wantWindow)
			}
			want := 0.0
			if tc.wantWindow > 0 {
				want = float64(est) / float64(tc.wantWindow)
			}
			if got := c.Pressure(); got != want {
				t.Errorf("Pressure = %v, want %v", got, want)
			}
		})
	}
}
