package session

import (
	"encoding/json"

	"github.com/dsh-dev/dsh/internal/llm"
)

// Tool error codes synthesized by crash repair.
const (
	CodeToolOutcomeUnknown = "TOOL_OUTCOME_UNKNOWN"
	CodeToolNotStarted     = "TOOL_NOT_STARTED"
)

// Closers returns the events that close a log left open by a crash, with
// the same pairing the live path keeps: for every call of the open step
// that has no tool/result, in model order, a tool/result
// (TOOL_OUTCOME_UNKNOWN when its tool/call was logged, so it may have
// run), or a tool/call followed by its tool/result (TOOL_NOT_STARTED when
// it never started, as the live path's ABORTED_BEFORE_DISPATCH pair);
// then step/end and turn/end {interrupted}. Every tool/result of the
// repaired log therefore has exactly one tool/call before it. The events
// carry seq and time following the log's last event. A balanced log gets
// nil. Repair never removes anything.
func Closers(events []Event) []Event {
	// The fold's state after the last turn/start or turn/end depends on
	// nothing before it, and after the last step/start following that,
	// on nothing before it but the turn: decode only that tail.
	turn := 0
	for i := len(events) - 1; i >= 0; i-- {
		if t := events[i].Type; t == TypeTurnStart || t == TypeTurnEnd {
			turn = i
			break
		}
	}
	from := turn + 1
	for i := len(events) - 1; i > turn; i-- {
		if events[i].Type == TypeStepStart {
			from = i
			break
		}
	}
	var b Balance
	if len(events) > 0 {
		b.Add(events[turn])
	}
	for _, e := range events[min(from, len(events)):] {
		b.Add(e)
	}
	return b.Closers()
}

// Balance folds a log, in seq order, into what [Closers] needs, so that
// a log read in pages can be balanced without holding it: only the open
// step's calls are kept. The zero value is an empty log.
type Balance struct {
	turn, step int
	started    bool // turn and step are valid once an event was added
	stepOpen   bool
	calls      []llm.Block     // tool calls requested in the open step
	logged     map[string]bool // callIds with a tool/call
	done       map[string]bool // callIds with a tool/result
	next, at   int64           // seq and time after the last event
}

// Add folds the next event of the log.
func (b *Balance) Add(e Event) {
	if !b.started {
		b.turn, b.step, b.started = -1, -1, true
		b.logged, b.done = map[string]bool{}, map[string]bool{}
	}
	b.next, b.at = e.Seq+1, e.Time
	switch e.Type {
	case TypeTurnStart:
		var p TurnStart
		if e.Decode(&p) == nil {
			b.turn, b.step, b.stepOpen = p.Turn, -1, false
		}
	case TypeTurnEnd:
		b.turn, b.stepOpen = -1, false
	case TypeStepStart:
		var p StepRef
		if e.Decode(&p) == nil {
			b.step, b.stepOpen = p.Step, true
			b.calls = nil
			clear(b.logged)
			clear(b.done)
		}
	case TypeStepEnd:
		b.stepOpen = false
	case TypeAssistantMsg:
		var p AssistantMessage
		if e.Decode(&p) == nil && b.stepOpen {
			b.calls = append(b.calls, p.Message.ToolCalls()...)
		}
	case TypeToolCall:
		var p ToolCall
		if e.Decode(&p) == nil {
			b.logged[p.CallID] = true
		}
	case TypeToolResult:
		var p ToolResult
		if e.Decode(&p) == nil {
			b.done[p.CallID] = true
		}
	}
}

// Closers returns the closers of the log added so far, as [Closers] does.
func (b *Balance) Closers() []Event {
	if !b.started {
		return nil
	}
	turn, step, stepOpen, calls, logged, done := b.turn, b.step, b.stepOpen, b.calls, b.logged, b.done
	if turn < 0 {
		return nil
	}
	var out []Event
	add := func(typ string, data any) {
		raw, _ := json.Marshal(data)
		e := Event{Type: typ, Data: raw}
		if IsSurfaceType(typ) {
			e.SurfaceOp = Append
		}
		out = append(out, e)
	}
	if stepOpen {
		for _, c := range calls {
			if done[c.ID] {
				continue
			}
			code, text := CodeToolNotStarted, "Error: the session stopped before this tool call started; it did not run."
			if logged[c.ID] {
				code, text = CodeToolOutcomeUnknown, "Error: the session stopped while this tool call was running; its outcome is unknown. Retry it only if it is idempotent, after checking its effects."
			} else {
				add(TypeToolCall, ToolCall{Turn: turn, Step: step, CallID: c.ID, Name: c.Name, Arguments: c.Arguments})
			}
			add(TypeToolResult, ToolResult{
				Turn: turn, Step: step, CallID: c.ID, Name: c.Name,
				Content: []llm.Block{llm.TextBlock(text)}, IsError: true,
				Error: &ToolError{Name: "ToolInterruptedError", Code: code},
			})
		}
		add(TypeStepEnd, StepRef{Turn: turn, Step: step})
	}
	add(TypeTurnEnd, TurnEnd{Turn: turn, Reason: TurnEndReason{Kind: EndInterrupted}})
	next, at := b.next, b.at
	for i := range out {
		out[i].Seq = next + int64(i)
		out[i].Time = at
	}
	return out
}
