package projection

import (
	"slices"

	"github.com/dsh-dev/dsh/internal/llm"
	"github.com/dsh-dev/dsh/internal/session"
)

// Keys of the built-in units.
const (
	KeyTodos           = "todos"
	KeyTokenUsage      = "tokenUsage"
	KeyContextPressure = "contextPressure"
)

// RegisterBuiltins registers the todos, tokenUsage and contextPressure
// units; contextWindow is the default window for the pressure fraction.
func RegisterBuiltins(r *Registry, contextWindow int64) error {
	for _, u := range []Unit{TodosUnit(), TokenUsageUnit(), ContextPressureUnit(contextWindow)} {
		if err := r.Register(u); err != nil {
			return err
		}
	}
	return nil
}

// Todo statuses.
const (
	TodoPending    = "pending"
	TodoInProgress = "in_progress"
	TodoCompleted  = "completed"
)

// Todo priorities (optional; ACP's plan entries use the same three).
const (
	TodoHigh   = "high"
	TodoMedium = "medium"
	TodoLow    = "low"
)

// Todo is one item of the session's todo list.
type Todo struct {
	Content string `json:"content"`
	Status  string `json:"status"`
	// ActiveForm is the present-continuous phrasing shown while the item
	// is in progress ("Running tests").
	ActiveForm string `json:"activeForm,omitempty"`
	// Priority is high, medium or low when the model gave one.
	Priority string `json:"priority,omitempty"`
}

// TodoWrite is the payload of todo/write: the whole list, replacing the
// previous one.
type TodoWrite struct {
	Todos []Todo `json:"todos"`
}

// TodosUnit folds todo/write events: the last list written wins. Its
// state is a []Todo (nil before the first write).
func TodosUnit() Unit {
	return Typed(KeyTodos, []string{session.TypeTodoWrite}, func() []Todo { return nil }, func(s []Todo, e session.Event) []Todo {
		if e.Type != session.TypeTodoWrite {
			return s
		}
		var p TodoWrite
		if e.Decode(&p) != nil {
			// A fold cannot fail; a malformed event changes nothing.
			return s
		}
		if p.Todos == nil {
			p.Todos = []Todo{}
		}
		return p.Todos
	})
}

// TurnUsage is the token usage of one turn.
type TurnUsage struct {
	Turn  int       `json:"turn"`
	Usage llm.Usage `json:"usage"`
	// Calls counts the model calls that reported usage.
	Calls int `json:"calls"`
}

// TokenUsage is the state of the tokenUsage unit: the sum of the usage
// reported on assistant/message events, in total and per turn.
type TokenUsage struct {
	Total llm.Usage `json:"total"`
	Calls int       `json:"calls"`
	// Turns holds one entry per turn that reported usage, in log order.
	Turns []TurnUsage `json:"turns"`
}

// TokenUsageUnit folds assistant/message usage. Every reported usage is
// added, including that of interrupted messages: those tokens were spent.
func TokenUsageUnit() Unit {
	return Typed(KeyTokenUsage, []string{session.TypeAssistantMsg}, func() TokenUsage { return TokenUsage{} }, func(s TokenUsage, e session.Event) TokenUsage {
		if e.Type != session.TypeAssistantMsg {
			return s
		}
		p, err := session.PeekAssistant(e.Data)
		if err != nil || p.Usage == nil || p.Usage.IsZero() {
			return s
		}
		s.Total.Add(*p.Usage)
		s.Calls++
		i := slices.IndexFunc(s.Turns, func(t TurnUsage) bool { return t.Turn == p.Turn })
		if i < 0 {
			// Appending never writes an element an earlier state can see.
			s.Turns = append(s.Turns, TurnUsage{Turn: p.Turn, Usage: *p.Usage, Calls: 1})
			return s
		}
		s.Turns = slices.Clone(s.Turns) // earlier states share the element
		s.Turns[i].Usage.Add(*p.Usage)
		s.Turns[i].Calls++
		return s
	})
}

// BytesPerToken is the heuristic behind the context-pressure estimate:
// about four bytes of JSON per token. It only covers what was appended
// since the last provider-reported prompt size, so its error stays small.
const BytesPerToken = 4

// ContextPressure is the state of the contextPressure unit: an estimate
// of the next request's prompt size, anchored on the last provider
// report.
type ContextPressure struct {
	// ContextWindow is the window the fraction is computed against: the
	// one given at construction, replaced by a logged request/context
	// window when there is one. 0 means unknown.
	ContextWindow int64 `json:"contextWindow"`
	// AnchorSeq is the seq of the assistant/message whose usage anchors
	// the estimate; -1 before any.
	AnchorSeq int64 `json:"anchorSeq"`
	// LastInputTokens is the prompt size of that call (uncached input +
	// cache read + cache write).
	LastInputTokens int64 `json:"lastInputTokens"`
	// LastOutputTokens is that call's output, now part of the history.
	LastOutputTokens int64 `json:"lastOutputTokens"`
	// BytesSince is the JSON size of the surface events appended after
	// the anchor.
	BytesSince int64 `json:"bytesSince"`
	// ShadowedBytes is the JSON size of history that a compaction
	// (surface replace) after the anchor removed from the model's view.
	ShadowedBytes int64 `json:"shadowedBytes"`
	// EstimatedTokens is LastInputTokens + LastOutputTokens +
	// (BytesSince - ShadowedBytes) / BytesPerToken, never below zero.
	EstimatedTokens int64 `json:"estimatedTokens"`
	// Fraction is EstimatedTokens / ContextWindow (0 when unknown).
	Fraction float64 `json:"fraction"`

	// nodes mirrors the derived history: the JSON size of the event
	// behind each surface node, so that a replace knows how many bytes it
	// shadowed. Not serialised; a state without it (restored from JSON)
	// treats replaced ranges as empty.
	nodes []int64
}

// ContextPressureUnit folds usage and surface events into a
// [ContextPressure] against contextWindow (0 = unknown until a
// request/context event reports one).
func ContextPressureUnit(contextWindow int64) Unit {
	return Typed(KeyContextPressure,
		[]string{session.TypeRequestContext, session.TypeUserMessage, session.TypeToolResult, session.TypeAssistantMsg},
		func() ContextPressure { return ContextPressure{ContextWindow: contextWindow, AnchorSeq: -1} },
		applyPressure)
}

func applyPressure(s ContextPressure, e session.Event) ContextPressure {
	switch e.Type {
	case session.TypeRequestContext:
		var p session.RequestContext
		if e.Decode(&p) != nil || p.ContextWindow <= 0 || int64(p.ContextWindow) == s.ContextWindow {
			return s
		}
		s.ContextWindow = int64(p.ContextWindow)
		return s.estimate()
	case session.TypeUserMessage, session.TypeToolResult:
		return s.surface(e, true).estimate()
	case session.TypeAssistantMsg:
		p, err := session.PeekAssistant(e.Data)
		if err != nil {
			return s
		}
		isNode := !p.Empty
		if p.Usage == nil || p.Usage.IsZero() {
			return s.surface(e, isNode).estimate()
		}
		s = s.surface(e, isNode)
		// The reported prompt already holds everything before this
		// message; only what follows needs estimating.
		s.AnchorSeq = e.Seq
		s.LastInputTokens = p.Usage.InputTokens + p.Usage.CacheReadTokens + p.Usage.CacheWriteTokens
		s.LastOutputTokens = p.Usage.OutputTokens
		s.BytesSince, s.ShadowedBytes = 0, 0
		return s.estimate()
	}
	return s
}

// surface applies a surface event's effect on the node sizes and the
// byte counters. isNode says whether the event yields a history message
// (an empty assistant message does not).
func (s ContextPressure) surface(e session.Event, isNode bool) ContextPressure {
	if e.SurfaceOp == nil {
		return s
	}
	size := int64(len(e.Data))
	if !e.SurfaceOp.Replace {
		if isNode {
			s.nodes = append(s.nodes, size)
			s.BytesSince += size
		}
		return s
	}
	op := *e.SurfaceOp
	var shadowed int64
	next := make([]int64, 0, len(s.nodes)+1)
	if op.Start >= 0 && op.End >= op.Start && op.End < len(s.nodes) {
		for _, n := range s.nodes[op.Start : op.End+1] {
			shadowed += n
		}
		next = append(next, s.nodes[:op.Start]...)
		if isNode {
			next = append(next, size)
		}
		next = append(next, s.nodes[op.End+1:]...)
	} else {
		next = append(next, s.nodes...) // sizes unknown (restored state)
	}
	s.nodes = next
	s.ShadowedBytes += shadowed
	if isNode {
		s.BytesSince += size
	}
	return s
}

func (s ContextPressure) estimate() ContextPressure {
	s.EstimatedTokens = max(0, s.LastInputTokens+s.LastOutputTokens+(s.BytesSince-s.ShadowedBytes)/BytesPerToken)
	s.Fraction = 0
	if s.ContextWindow > 0 {
		s.Fraction = float64(s.EstimatedTokens) / float64(s.ContextWindow)
	}
	return s
}
