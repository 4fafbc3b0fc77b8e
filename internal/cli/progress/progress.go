// Package progress renders a session's event log as the human progress
// stream dsh run writes to stderr on a terminal: the answer text as it
// arrives, reasoning dimmed (or summarised without colour), one line per
// tool call with its outcome, compact edit diffs, retry notices, a
// transient "waiting" line while a request has produced nothing yet, and
// a closing usage line. How a turn ended (an error, an abort) is left to
// dsh run's own last lines, which say it once.
//
// The renderer reads only events, never the agent, so it shows exactly
// what the log says; it is a deterministic function from an event
// sequence (plus [Renderer.Tick] times) to bytes, which keeps it
// golden-testable.
package progress

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/dsh-dev/dsh/internal/llm"
	"github.com/dsh-dev/dsh/internal/session"
	"github.com/dsh-dev/dsh/internal/subagent"
)

// Options shape the output.
type Options struct {
	// Color enables SGR colours and dimming (off for NO_COLOR).
	Color bool
	// Transient enables the erasable status line (carriage return and
	// erase-line): only on a terminal.
	Transient bool
	// Width truncates status lines to this many columns; 0 means no
	// limit.
	Width int
	// DiffLines caps the diff lines shown per edit; 0 means 12.
	DiffLines int
}

// Renderer turns events into output bytes. It is used by one goroutine.
type Renderer struct {
	o Options
	// col0 says the cursor is at the start of a line.
	col0 bool
	// status is the transient line currently shown ("" when none).
	status string
	// waitSince is the append time (ms) of the step/start whose request
	// has produced nothing yet; 0 when not waiting.
	waitSince int64
	model     string
	blocks    map[int]llm.BlockType // open blocks of the current step
	calls     map[string]string     // callId → one-line summary of the call
	labels    map[string]string     // subagent runId → label
	usage     llm.Usage
	steps     int
	tools     int
	// retryAt is when the pending retry starts (ms), retryN its number;
	// 0 when none is pending.
	retryAt int64
	retryN  int
	// mayAsk is set when the approval policy lets a call ask on the
	// terminal.
	mayAsk bool
}

// New returns a renderer.
func New(o Options) *Renderer {
	if o.DiffLines <= 0 {
		o.DiffLines = 12
	}
	return &Renderer{o: o, col0: true, blocks: map[int]llm.BlockType{}, calls: map[string]string{}, labels: map[string]string{}}
}

// SetWidth changes the width lines are cut to (the terminal was
// resized); 0 means no limit.
func (r *Renderer) SetWidth(cols int) { r.o.Width = max(cols, 0) }

// Render runs a whole event sequence through a new renderer, closing
// line included.
func Render(o Options, events []session.Event) []byte {
	r := New(o)
	var out []byte
	for _, e := range events {
		out = append(out, r.Event(e)...)
	}
	return append(out, r.Close()...)
}

// SGR codes.
const (
	dim    = "2"
	bold   = "1"
	red    = "31"
	green  = "32"
	yellow = "33"
	cyan   = "36"
)

func (r *Renderer) paint(code, s string) string {
	if !r.o.Color || code == "" || s == "" {
		return s
	}
	return "\x1b[" + code + "m" + s + "\x1b[0m"
}

// w collects one call's output.
type w struct {
	r *Renderer
	b strings.Builder
}

// clear erases the transient line before anything else is written.
func (o *w) clear() {
	if o.r.status != "" {
		o.b.WriteString("\r\x1b[K")
		o.r.status = ""
	}
}

// text writes streamed text as is.
func (o *w) text(s string) {
	if s == "" {
		return
	}
	o.clear()
	o.b.WriteString(s)
	o.r.col0 = strings.HasSuffix(s, "\n")
}

// span is a run of text in one SGR style ("" for none).
type span struct{ code, text string }

// line writes one whole line of spans, starting a new line first if
// needed, cut to the width (keeping the colours of what remains).
func (o *w) line(spans ...span) {
	o.write(true, spans)
}

// wrapLine is line without the cut: for text whose end matters (the
// reason of a retry), the terminal wraps it.
func (o *w) wrapLine(spans ...span) {
	o.write(false, spans)
}

func (o *w) write(cut bool, spans []span) {
	o.clear()
	if !o.r.col0 {
		o.b.WriteByte('\n')
	}
	left := -1 // runes left on the line; -1 is no limit
	if cut && o.r.o.Width > 0 {
		n := 0
		for _, sp := range spans {
			n += utf8.RuneCountInString(sp.text)
		}
		if n > o.r.o.Width {
			left = o.r.o.Width - 1
		}
	}
	for _, sp := range spans {
		t := sp.text
		if left >= 0 {
			if rs := []rune(t); len(rs) > left {
				t = string(rs[:left]) + "…"
				left = 0
			} else {
				left -= len(rs)
			}
		}
		o.b.WriteString(o.r.paint(sp.code, t))
		if left == 0 {
			break
		}
	}
	o.b.WriteByte('\n')
	o.r.col0 = true
}

// setStatus shows s as the transient line (terminals only).
func (o *w) setStatus(s string) {
	if !o.r.o.Transient {
		return
	}
	if o.r.o.Width > 0 && len([]rune(s)) > o.r.o.Width-1 {
		s = string([]rune(s)[:max(o.r.o.Width-2, 1)]) + "…"
	}
	if !o.r.col0 {
		o.b.WriteByte('\n')
		o.r.col0 = true
	}
	o.b.WriteString("\r\x1b[K" + o.r.paint(dim, s))
	o.r.status = s
}

// Event renders one event.
func (r *Renderer) Event(e session.Event) []byte {
	o := &w{r: r}
	switch e.Type {
	case session.TypeRequestContext:
		var p session.RequestContext
		if e.Decode(&p) == nil {
			r.model = p.Provider + "/" + p.Model
			if r.waitSince != 0 {
				o.setStatus("waiting for " + r.model + "…")
			}
		}
	case session.TypeStepStart:
		r.steps++
		r.waitSince = e.Time
		clear(r.blocks)
		o.setStatus("waiting for the model…")
	case session.TypeAssistantChunk:
		var p session.AssistantChunk
		if e.Decode(&p) == nil {
			r.waitSince = 0
			r.chunk(o, p.Chunk)
		}
	case session.TypeAssistantMsg:
		var p session.AssistantMessage
		if e.Decode(&p) == nil && p.Usage != nil {
			r.usage.Add(*p.Usage)
		}
		r.waitSince = 0
		if o.r.status != "" {
			o.clear()
		}
	case session.TypeToolCall:
		var p session.ToolCall
		if e.Decode(&p) == nil {
			s := callSummary(p.Name, p.Arguments)
			r.calls[p.CallID] = s
			// A terminal approval prompt may follow the call; a status
			// line written late (the renderer runs behind the log)
			// would erase it, so calls that may ask show none.
			if !r.mayAsk {
				o.setStatus("running " + s + " …")
			}
		}
	case session.TypeToolResult:
		var p session.ToolResult
		if e.Decode(&p) == nil {
			r.tools++
			r.result(o, p)
		}
	case session.TypeLLMRetry:
		var p session.LLMRetry
		if e.Decode(&p) == nil {
			r.waitSince = 0
			why := "request failed"
			if p.Failure != nil {
				why = p.Failure.Error()
			}
			s := clean(fmt.Sprintf("↻ retry %d/%d in %s: %s", p.Retry, p.MaxRetries, seconds(p.DelayMs), why))
			o.wrapLine(span{yellow, s})
			r.retryAt = e.Time + p.DelayMs
			r.retryN = p.Retry
			o.setStatus(fmt.Sprintf("retry %d in %ds…", p.Retry, (p.DelayMs+999)/1000))
		}
	case session.TypeLLMRetryStart:
		r.retryAt = 0
		r.waitSince = e.Time
		o.setStatus("retrying…")
	case session.TypeSubagentStart:
		var p subagent.StartEvent
		if e.Decode(&p) == nil {
			r.labels[p.RunID] = p.Label
			s := clean(fmt.Sprintf("▸ subagent %q started (%s, session %s)", p.Label, p.Mode, p.ChildID))
			o.line(span{cyan, s})
		}
	case session.TypeSubagentEnd:
		var p subagent.EndEvent
		if e.Decode(&p) == nil {
			s := fmt.Sprintf("◂ subagent %q %s", r.labels[p.RunID], p.StopReason)
			if p.Usage != nil {
				s += " · " + tokens(*p.Usage)
			}
			if p.Diagnostic != "" {
				s += ": " + firstLine(p.Diagnostic)
			}
			delete(r.labels, p.RunID)
			s = clean(s)
			o.line(span{cyan, s})
		}
	case session.TypeApprovalPolicy:
		var p struct {
			Policy string `json:"policy"`
		}
		if e.Decode(&p) == nil {
			r.mayAsk = p.Policy != "never"
		}
	case session.TypeApprovalAsked, session.TypeQuestionAsk:
		// The question (an approval, an ask_user_question form, a plan)
		// goes to the terminal from another writer, which
		// starts its own line and leaves the cursor at the start of one
		// once answered: keep the status line as it is, never erase
		// the prompt.
		r.status, r.col0 = "", true
	case session.TypeCompactionStart:
		o.line(span{dim, "· compacting the conversation…"})
	}
	return []byte(o.b.String())
}

// Tick refreshes the transient line on a terminal: the countdown to a
// pending retry, or the time a request has waited for its first byte. It
// returns nothing when neither is pending or there is no terminal.
func (r *Renderer) Tick(now time.Time) []byte {
	if !r.o.Transient {
		return nil
	}
	o := &w{r: r}
	if r.retryAt != 0 {
		left := max(r.retryAt-now.UnixMilli(), 0)
		o.setStatus(fmt.Sprintf("retry %d in %ds…", r.retryN, (left+999)/1000))
		return []byte(o.b.String())
	}
	if r.waitSince == 0 {
		return nil
	}
	waited := now.UnixMilli() - r.waitSince
	who := "the model"
	if r.model != "" {
		who = r.model
	}
	o.setStatus(fmt.Sprintf("waiting for %s… %ds", who, waited/1000))
	return []byte(o.b.String())
}

// Close ends the stream: it erases the transient line and writes the
// closing usage line. Prices are not in the model catalog, so no cost is
// shown.
func (r *Renderer) Close() []byte {
	o := &w{r: r}
	o.clear()
	s := fmt.Sprintf("── %s · %s · %s", plural(r.steps, "step"), plural(r.tools, "tool call"), tokens(r.usage))
	o.line(span{dim, s})
	return []byte(o.b.String())
}

func (r *Renderer) chunk(o *w, c llm.Chunk) {
	switch c.Type {
	case llm.ChunkBlockStart:
		r.blocks[c.Index] = c.BlockType
		if c.BlockType == llm.BlockText && !r.col0 {
			o.text("\n")
		}
		if r.status != "" {
			o.clear()
		}
	case llm.ChunkTextDelta:
		o.text(clean(c.Text))
	case llm.ChunkReasoningDelta:
		if r.o.Color {
			o.text(r.paint(dim, clean(c.Text)))
		}
	case llm.ChunkBlockEnd:
		if c.Block == nil {
			return
		}
		switch c.Block.Type {
		case llm.BlockReasoning:
			if !r.o.Color {
				// Without dimming, streamed reasoning would read as the
				// answer: summarise it instead.
				s := "· thinking: " + clean(firstLine(c.Block.Text))
				o.line(span{"", s})
			} else if !r.col0 {
				o.text("\n")
			}
		case llm.BlockText:
			if !r.col0 {
				o.text("\n")
			}
		}
	}
}

// result renders a tool outcome line and, for edits, the diff.
func (r *Renderer) result(o *w, p session.ToolResult) {
	call := r.calls[p.CallID]
	delete(r.calls, p.CallID)
	if call == "" {
		call = clean(p.Name)
	}
	outcome, ok, diff := outcomeOf(p)
	mark, code := "✓", green
	if !ok {
		mark, code = "✗", red
	}
	o.line(span{code, mark}, span{"", " "}, span{bold, call}, span{"", " "}, span{dim, "— " + outcome})
	if diff != "" {
		r.diff(o, diff)
	}
}

// diff shows a unified diff compactly: no file headers, at most
// DiffLines lines, indented, coloured by kind.
func (r *Renderer) diff(o *w, d string) {
	lines := strings.Split(strings.TrimRight(d, "\n"), "\n")
	shown := 0
	for i, l := range lines {
		if strings.HasPrefix(l, "--- ") || strings.HasPrefix(l, "+++ ") {
			continue
		}
		if shown == r.o.DiffLines {
			rest := 0
			for _, m := range lines[i:] {
				if !strings.HasPrefix(m, "--- ") && !strings.HasPrefix(m, "+++ ") {
					rest++
				}
			}
			s := fmt.Sprintf("    … %d more diff lines", rest)
			o.line(span{dim, s})
			return
		}
		shown++
		plain := "    " + strings.ReplaceAll(l, "\t", "    ")
		code := dim
		switch {
		case strings.HasPrefix(l, "+"):
			code = green
		case strings.HasPrefix(l, "-"):
			code = red
		case strings.HasPrefix(l, "@@"):
			code = cyan
		}
		o.line(span{code, plain})
	}
}

// ParseArgs decodes tool arguments leniently: a model may send anything.
func parseArgs(s string) map[string]any {
	var m map[string]any
	if json.Unmarshal([]byte(s), &m) != nil {
		return nil
	}
	return m
}

func str(m map[string]any, keys ...string) string {
	for _, k := range keys {
		if v, ok := m[k].(string); ok && v != "" {
			return v
		}
	}
	return ""
}
