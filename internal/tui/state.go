package tui

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/dsh-dev/dsh/internal/llm"
	"github.com/dsh-dev/dsh/internal/permission"
	"github.com/dsh-dev/dsh/internal/session"
	"github.com/dsh-dev/dsh/internal/subagent"
	"github.com/dsh-dev/dsh/internal/tool"
)

// state is what the UI shows of one session, folded from its log events
// alone: the live part (the streaming answer, running tools and children,
// whether a turn runs) and the status facts (model, effort, preset,
// usage). Finished items are not kept here: [state.apply] returns them as
// blocks, which the UI prints once into the scrollback.
type state struct {
	provider, model string
	effort          string
	preset          string
	window          int64
	usage           llm.Usage
	// lastInput is the prompt size of the latest request, the context
	// the next one starts from.
	lastInput int64
	title     string

	running   bool
	turnStart int64 // ms
	stepStart int64 // ms; 0 when the step has produced something
	text      strings.Builder
	reasoning strings.Builder
	// reasoningStart is when the current reasoning began (ms).
	reasoningStart int64

	calls    map[string]*toolRow
	order    []string // running call ids, in call order
	children map[string]*childRow
	kids     []string // child run ids, in start order
	// asked holds the approval/asked payloads not decided yet, by id,
	// so a decision can be shown with its command.
	asked map[string]permission.ApprovalAsked
	// queue is the next-turn inbox: messages sent while a turn ran,
	// waiting for the next one.
	queue []llm.Message
	// questions holds the question/ask payloads not answered yet, by
	// question id; askCalls the calls that asked one (their tool rows
	// give way to the answer's block).
	questions map[string]questionAsked
	askCalls  map[string]bool
	// planMode is what the log's latest plan/mode says; planKnown is set
	// once one was read (or the host said so at open).
	planMode, planKnown bool
	// lastSeq is the seq of the last event applied.
	lastSeq int64
}

type toolRow struct {
	id, name, args string
	started        int64
}

type childRow struct {
	runID, childID, label, provider, mode string
	started, ended                        int64
	stop                                  string
	usage                                 llm.Usage
	model                                 string
}

func newState() *state {
	return &state{calls: map[string]*toolRow{}, children: map[string]*childRow{},
		asked: map[string]permission.ApprovalAsked{}, questions: map[string]questionAsked{},
		askCalls: map[string]bool{}, lastSeq: -1}
}

// blockKind says how a finished item is drawn.
type blockKind int

const (
	bUser blockKind = iota
	bAssistant
	bReasoning
	bTool
	bApproval
	bChild
	bTurnEnd
	bNotice
	bError
	bCompaction
	bAnswer
	bPlanMode
)

// block is one finished item of the transcript.
type block struct {
	kind blockKind
	text string
	// tool result
	call   toolRow
	result *session.ToolResult
	// approval decision, turn end, child end
	ok     bool
	detail string
	child  *childRow
	// ms is a duration shown with the item (reasoning time).
	ms int64
	// an answered question or plan
	asked    *questionAsked
	answered *questionAnswered
}

// apply folds one event and returns the blocks it finishes.
func (s *state) apply(e session.Event) []block {
	if e.Seq <= s.lastSeq {
		return nil // a replay overlap: already applied
	}
	s.lastSeq = e.Seq
	switch e.Type {
	case session.TypeRequestHeader:
		var p session.RequestHeader
		if e.Decode(&p) == nil {
			s.provider, s.model = p.Header.Config.Provider, p.Header.Config.Model
			s.effort = string(p.Header.Config.Effort)
		}
	case session.TypeRequestContext:
		var p session.RequestContext
		if e.Decode(&p) == nil {
			s.provider, s.model = p.Provider, p.Model
			if p.ContextWindow > 0 {
				s.window = int64(p.ContextWindow)
			}
		}
	case session.TypePermissionPreset:
		var p permission.PresetSelected
		if e.Decode(&p) == nil {
			s.preset = p.Preset
		}
	case session.TypeTitle:
		var p struct {
			Title string `json:"title"`
		}
		if e.Decode(&p) == nil {
			s.title = p.Title
		}
	case session.TypeInboxSpliced:
		var p session.InboxSpliced
		if e.Decode(&p) == nil && p.Target == session.TargetNextTurn {
			s.queue = splice(s.queue, p)
		}
	case session.TypeTurnStart:
		s.running, s.turnStart = true, e.Time
	case session.TypeStepStart:
		s.stepStart = e.Time
		s.text.Reset()
		s.reasoning.Reset()
		s.reasoningStart = 0
	case session.TypeAssistantChunk:
		var p session.AssistantChunk
		if e.Decode(&p) != nil {
			return nil
		}
		s.stepStart = 0
		switch p.Chunk.Type {
		case llm.ChunkTextDelta:
			s.text.WriteString(p.Chunk.Text)
		case llm.ChunkReasoningDelta:
			if s.reasoningStart == 0 {
				s.reasoningStart = e.Time
			}
			s.reasoning.WriteString(p.Chunk.Text)
		}
	case session.TypeUserMessage:
		var m llm.Message
		// Only what a person typed is shown as theirs; harness-injected
		// context (reminders, notices) is not part of the conversation
		// they see.
		if e.Decode(&m) != nil {
			return nil
		}
		switch t := m.Text(); {
		case t == "":
		case m.Source.Kind == "" || m.Source.Kind == "user":
			return []block{{kind: bUser, text: t}}
		case m.Source.Kind == "goal":
			// The driver's round prompt: a marker, not the prompt itself.
			return []block{{kind: bNotice, text: fmt.Sprintf("── goal round %d ──", m.Source.Round)}}
		case m.Source.Kind == subagent.SourceParent:
			// A child's task, as its parent delegated it.
			return []block{{kind: bUser, text: t, detail: "from the parent"}}
		}
	case session.TypeAssistantMsg:
		return s.assistant(e)
	case session.TypeToolCall:
		var p session.ToolCall
		if e.Decode(&p) == nil {
			s.calls[p.CallID] = &toolRow{id: p.CallID, name: p.Name, args: p.Arguments, started: e.Time}
			s.order = append(s.order, p.CallID)
		}
	case session.TypeToolResult:
		var p session.ToolResult
		if e.Decode(&p) != nil {
			return nil
		}
		row := toolRow{id: p.CallID, name: p.Name, started: e.Time}
		if r, ok := s.calls[p.CallID]; ok {
			row = *r
			delete(s.calls, p.CallID)
			s.order = remove(s.order, p.CallID)
		}
		if s.askCalls[p.CallID] {
			// The question's own block said what was asked and answered.
			delete(s.askCalls, p.CallID)
			return nil
		}
		return []block{{kind: bTool, call: row, result: &p, ms: e.Time - row.started}}
	case session.TypeApprovalAsked:
		var p permission.ApprovalAsked
		if e.Decode(&p) == nil {
			s.asked[p.ID] = p
		}
	case session.TypeApprovalDecided:
		var p permission.ApprovalDecided
		if e.Decode(&p) != nil {
			return nil
		}
		q, ok := s.asked[p.ID]
		delete(s.asked, p.ID)
		if !ok {
			return nil
		}
		what := q.Command
		if what == "" {
			what = q.ToolName
		}
		allowed := p.Outcome == tool.AllowedOnce
		return []block{{kind: bApproval, text: what, ok: allowed, detail: string(p.Outcome) + " by " + orDefault(p.By, p.Answerer)}}
	case session.TypeSubagentStart:
		var p subagent.StartEvent
		if e.Decode(&p) == nil {
			s.children[p.RunID] = &childRow{runID: p.RunID, childID: p.ChildID, label: p.Label, provider: p.Provider, mode: p.Mode, started: e.Time}
			s.kids = append(s.kids, p.RunID)
		}
	case session.TypeSubagentEnd:
		var p subagent.EndEvent
		if e.Decode(&p) != nil {
			return nil
		}
		c, ok := s.children[p.RunID]
		if !ok {
			c = &childRow{runID: p.RunID, childID: p.ChildID, started: e.Time}
		}
		c.ended, c.stop = e.Time, p.StopReason
		if p.Usage != nil {
			c.usage = *p.Usage
		}
		delete(s.children, p.RunID)
		s.kids = remove(s.kids, p.RunID)
		return []block{{kind: bChild, child: c, detail: p.Diagnostic, ok: p.StopReason == "completed"}}
	case session.TypeTurnEnd:
		var p session.TurnEnd
		s.running = false
		s.stepStart = 0
		s.text.Reset()
		s.reasoning.Reset()
		if e.Decode(&p) != nil || p.Reason.Kind == session.EndCompleted {
			return nil
		}
		detail := p.Reason.Kind
		switch {
		case p.Reason.Kind == session.EndAborted && p.Reason.Cause == "user":
			detail = "interrupted"
		case p.Reason.Cause != "":
			detail += " (" + p.Reason.Cause + ")"
		}
		if p.Reason.Failure != nil {
			detail += ": " + p.Reason.Failure.Error()
		}
		return []block{{kind: bTurnEnd, text: detail}}
	case session.TypeGoalChange:
		return goalChange(e)
	case session.TypeCompactionEnd:
		var p map[string]any
		if e.Decode(&p) == nil {
			return []block{{kind: bCompaction, text: "context compacted"}}
		}
	case typeQuestionAsk, typeQuestionAnswer, typePlanMode:
		return s.applyAsk(e)
	case session.TypeLLMRetry:
		var p session.LLMRetry
		if e.Decode(&p) == nil {
			msg := "retrying the model request"
			if p.Failure != nil {
				msg += " after " + p.Failure.Error()
			}
			return []block{{kind: bNotice, text: msg}}
		}
	}
	return nil
}

// assistant finishes a step's message: its reasoning (collapsed unless
// expanded) and its text; the tool calls follow as their own rows.
func (s *state) assistant(e session.Event) []block {
	var p session.AssistantMessage
	if e.Decode(&p) != nil {
		return nil
	}
	if p.Usage != nil {
		s.usage.Add(*p.Usage)
		s.lastInput = p.Usage.InputTokens + p.Usage.CacheReadTokens + p.Usage.CacheWriteTokens + p.Usage.OutputTokens
	}
	var out []block
	var reasoning, text strings.Builder
	for _, b := range p.Message.Content {
		switch b.Type {
		case llm.BlockReasoning:
			reasoning.WriteString(b.Text)
		case llm.BlockText:
			text.WriteString(b.Text)
		}
	}
	if r := strings.TrimSpace(reasoning.String()); r != "" {
		ms := int64(0)
		if s.reasoningStart > 0 {
			ms = e.Time - s.reasoningStart
		}
		out = append(out, block{kind: bReasoning, text: r, ms: ms})
	}
	if t := strings.TrimSpace(text.String()); t != "" {
		out = append(out, block{kind: bAssistant, text: t, ok: !p.Interrupted})
	}
	s.text.Reset()
	s.reasoning.Reset()
	s.reasoningStart = 0
	return out
}

// setModel sets the model shown before the log names one.
func (s *state) setModel(pm string) {
	if p, m, ok := strings.Cut(pm, "/"); ok {
		s.provider, s.model = p, m
	}
}

// contextPercent is the share of the window the next request starts
// from, or -1 when unknown.
func (s *state) contextPercent() int {
	if s.window <= 0 || s.lastInput <= 0 {
		return -1
	}
	return int(min(100, s.lastInput*100/s.window))
}

// splice applies one inbox mutation, clamped to the list it has.
func splice(q []llm.Message, p session.InboxSpliced) []llm.Message {
	start := min(max(p.Start, 0), len(q))
	end := min(start+max(p.RemovedCount, 0), len(q))
	out := append([]llm.Message{}, q[:start]...)
	out = append(out, p.Inserted...)
	return append(out, q[end:]...)
}

func remove(xs []string, x string) []string {
	for i, v := range xs {
		if v == x {
			return append(xs[:i:i], xs[i+1:]...)
		}
	}
	return xs
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

// argsOf parses a tool call's raw arguments (nil when not an object).
func argsOf(raw string) map[string]any {
	var m map[string]any
	_ = json.Unmarshal([]byte(raw), &m)
	return m
}
