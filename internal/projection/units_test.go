package projection

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/dsh-dev/dsh/internal/llm"
	"github.com/dsh-dev/dsh/internal/session"
)

// attachBuiltins returns a log with the built-in units attached.
func attachBuiltins(t *testing.T, window int64) (*session.Log, *Projections) {
	t.Helper()
	l := newLog(t)
	r := NewRegistry()
	if err := RegisterBuiltins(r, window); err != nil {
		t.Fatal(err)
	}
	if err := RegisterBuiltins(r, window); err == nil {
		t.Fatal("registering the built-ins twice succeeded")
	}
	return l, r.Attach(l)
}

func mustAppend(t *testing.T, l *session.Log, typ string, data any, opts ...session.AppendOption) session.Event {
	t.Helper()
	e, err := l.Append(typ, data, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func TestTodosUnit(t *testing.T) {
	a := []Todo{{Content: "a", Status: TodoPending}}
	b := []Todo{{Content: "b", Status: TodoInProgress, ActiveForm: "Doing b"}, {Content: "c", Status: TodoCompleted}}
	tests := []struct {
		name   string
		writes []any // payloads of todo/write, in order
		want   []Todo
	}{
		{"none", nil, nil},
		{"one", []any{TodoWrite{Todos: a}}, a},
		{"last wins", []any{TodoWrite{Todos: a}, TodoWrite{Todos: b}}, b},
		{"cleared", []any{TodoWrite{Todos: a}, TodoWrite{}}, []Todo{}},
		{"malformed ignored", []any{TodoWrite{Todos: a}, json.RawMessage(`{"todos":"nope"}`)}, a},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, p := attachBuiltins(t, 0)
			mustAppend(t, l, session.TypeTurnStart, session.TurnStart{Turn: 1})
			for _, w := range tt.writes {
				mustAppend(t, l, session.TypeTodoWrite, w)
			}
			got, _, ok := GetAs[[]Todo](p, KeyTodos)
			if !ok || !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("todos = %#v, want %#v", got, tt.want)
			}
		})
	}
}

func assistant(turn, step int, text string, u *llm.Usage) session.AssistantMessage {
	m := llm.Message{ID: "m", Role: llm.RoleAssistant, Source: llm.Source{Kind: "model"}}
	if text != "" {
		m.Content = []llm.Block{llm.TextBlock(text)}
	}
	return session.AssistantMessage{Turn: turn, Step: step, Message: m, Usage: u}
}

func TestTokenUsageUnit(t *testing.T) {
	u := func(in, cr, cw, out int64) *llm.Usage {
		return &llm.Usage{InputTokens: in, CacheReadTokens: cr, CacheWriteTokens: cw, OutputTokens: out}
	}
	type call struct {
		turn  int
		usage *llm.Usage
	}
	tests := []struct {
		name  string
		calls []call
		want  TokenUsage
	}{
		{"none", nil, TokenUsage{}},
		{"no usage reported", []call{{1, nil}, {1, &llm.Usage{}}}, TokenUsage{}},
		{"one turn two steps", []call{{1, u(10, 5, 1, 3)}, {1, u(2, 15, 0, 4)}}, TokenUsage{
			Total: *u(12, 20, 1, 7), Calls: 2,
			Turns: []TurnUsage{{Turn: 1, Usage: *u(12, 20, 1, 7), Calls: 2}},
		}},
		{"two turns", []call{{1, u(10, 0, 0, 1)}, {2, u(1, 10, 0, 2)}, {2, u(1, 11, 0, 3)}}, TokenUsage{
			Total: *u(12, 21, 0, 6), Calls: 3,
			Turns: []TurnUsage{{Turn: 1, Usage: *u(10, 0, 0, 1), Calls: 1}, {Turn: 2, Usage: *u(2, 21, 0, 5), Calls: 2}},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, p := attachBuiltins(t, 0)
			var states []TokenUsage
			for i, c := range tt.calls {
				mustAppend(t, l, session.TypeAssistantMsg, assistant(c.turn, i+1, "hi", c.usage))
				s, _, _ := GetAs[TokenUsage](p, KeyTokenUsage)
				states = append(states, s)
			}
			got, _, _ := GetAs[TokenUsage](p, KeyTokenUsage)
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("usage = %+v, want %+v", got, tt.want)
			}
			// The first state handed to a reader must not have changed.
			if first := tt.calls; len(first) > 0 && first[0].usage != nil && !first[0].usage.IsZero() {
				s := states[0]
				if s.Calls != 1 || len(s.Turns) != 1 || s.Turns[0].Calls != 1 || s.Turns[0].Usage != *first[0].usage {
					t.Fatalf("an earlier state was mutated: %+v", s)
				}
			}
		})
	}
}

// op is one step of a context-pressure scenario.
type op struct {
	kind       string // user, tool, assistant, empty-assistant, replace, window
	usage      *llm.Usage
	start, end int // replace range
	window     int
}

func TestContextPressureUnit(t *testing.T) {
	usage := &llm.Usage{InputTokens: 100, CacheReadTokens: 900, CacheWriteTokens: 50, OutputTokens: 20}
	const anchorIn, anchorOut = 1050, 20
	tests := []struct {
		name      string
		window    int64
		ops       []op
		anchor    int   // index of the anchoring op; -1 none
		since     []int // ops whose bytes count in BytesSince
		shadowed  []int // ops whose bytes a replace shadowed
		wantWin   int64
		wantNodes int
	}{
		{"empty", 1000, nil, -1, nil, nil, 1000, 0},
		{"no anchor yet", 1000, []op{{kind: "user"}, {kind: "tool"}}, -1, []int{0, 1}, nil, 1000, 2},
		{"anchor only", 4000, []op{{kind: "user"}, {kind: "assistant", usage: usage}}, 1, nil, nil, 4000, 2},
		{"bytes after anchor", 4000, []op{{kind: "user"}, {kind: "assistant", usage: usage}, {kind: "tool"}, {kind: "user"}}, 1, []int{2, 3}, nil, 4000, 4},
		{"assistant without usage counts as bytes", 0, []op{{kind: "assistant", usage: usage}, {kind: "assistant"}}, 0, []int{1}, nil, 0, 2},
		{"empty assistant is no node", 0, []op{{kind: "user"}, {kind: "empty-assistant", usage: usage}, {kind: "tool"}}, 1, []int{2}, nil, 0, 2},
		{"logged window wins", 1000, []op{{kind: "window", window: 64000}, {kind: "user"}}, -1, []int{1}, nil, 64000, 1},
		{"compaction shadows", 4000, []op{
			{kind: "user"}, {kind: "assistant", usage: usage}, {kind: "tool"}, {kind: "user"},
			{kind: "replace", start: 0, end: 2},
		}, 1, []int{2, 3, 4}, []int{0, 1, 2}, 4000, 2},
		{"new anchor resets", 4000, []op{
			{kind: "user"}, {kind: "assistant", usage: usage}, {kind: "tool"},
			{kind: "replace", start: 0, end: 1}, {kind: "assistant", usage: usage}, {kind: "user"},
		}, 4, []int{5}, nil, 4000, 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, p := attachBuiltins(t, tt.window)
			var events []session.Event
			for _, o := range tt.ops {
				var e session.Event
				switch o.kind {
				case "user":
					e = mustAppend(t, l, session.TypeUserMessage, llm.Message{ID: "u", Role: llm.RoleUser, Content: []llm.Block{llm.TextBlock("hello there")}, Source: llm.Source{Kind: "user"}})
				case "tool":
					e = mustAppend(t, l, session.TypeToolResult, session.ToolResult{CallID: "c", Name: "bash", Content: []llm.Block{llm.TextBlock("some output of a tool")}})
				case "assistant":
					e = mustAppend(t, l, session.TypeAssistantMsg, assistant(1, 1, "an answer", o.usage), session.Surface())
				case "empty-assistant":
					e = mustAppend(t, l, session.TypeAssistantMsg, assistant(1, 1, "", o.usage), session.Surface())
				case "replace":
					replace := func(ev *session.Event) {
						ev.SurfaceOp = &session.SurfaceOp{Replace: true, Start: o.start, End: o.end}
					}
					e = mustAppend(t, l, session.TypeUserMessage, llm.Message{ID: "s", Role: llm.RoleUser, Content: []llm.Block{llm.TextBlock("summary")}, Source: llm.Source{Kind: "plugin"}}, replace)
				case "window":
					e = mustAppend(t, l, session.TypeRequestContext, session.RequestContext{Provider: "p", Model: "m", ContextWindow: o.window})
				}
				events = append(events, e)
			}
			got, _, ok := GetAs[ContextPressure](p, KeyContextPressure)
			if !ok {
				t.Fatal("no contextPressure state")
			}
			sum := func(idx []int) (n int64) {
				for _, i := range idx {
					n += int64(len(events[i].Data))
				}
				return n
			}
			want := ContextPressure{ContextWindow: tt.wantWin, AnchorSeq: -1, BytesSince: sum(tt.since), ShadowedBytes: sum(tt.shadowed)}
			if tt.anchor >= 0 {
				want.AnchorSeq = events[tt.anchor].Seq
				want.LastInputTokens, want.LastOutputTokens = anchorIn, anchorOut
			}
			want.EstimatedTokens = max(0, want.LastInputTokens+want.LastOutputTokens+(want.BytesSince-want.ShadowedBytes)/BytesPerToken)
			if want.ContextWindow > 0 {
				want.Fraction = float64(want.EstimatedTokens) / float64(want.ContextWindow)
			}
			if len(got.nodes) != tt.wantNodes {
				t.Errorf("%d nodes tracked, want %d (log has %d)", len(got.nodes), tt.wantNodes, len(l.Messages()))
			}
			if len(l.Messages()) != tt.wantNodes {
				t.Errorf("test setup: log has %d surface nodes, want %d", len(l.Messages()), tt.wantNodes)
			}
			got.nodes = nil
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("pressure\n got %+v\nwant %+v", got, want)
			}
		})
	}
}

// TestContextPressureRestoredState checks that a state restored from JSON
// (without node sizes) survives a replace instead of panicking.
func TestContextPressureRestoredState(t *testing.T) {
	s := ContextPressure{AnchorSeq: 3, LastInputTokens: 100}
	e := session.Event{Type: session.TypeUserMessage, Seq: 9, Data: json.RawMessage(`{"id":"s","role":"user","content":[],"source":{"kind":"plugin"}}`),
		SurfaceOp: &session.SurfaceOp{Replace: true, Start: 0, End: 4}}
	got := applyPressure(s, e)
	if got.ShadowedBytes != 0 || got.BytesSince != int64(len(e.Data)) || got.EstimatedTokens != 100+int64(len(e.Data))/BytesPerToken {
		t.Fatalf("restored replace: %+v", got)
	}
}
