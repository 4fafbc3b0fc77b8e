package claudecode

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/dsh-dev/dsh/internal/llm"
	"github.com/dsh-dev/dsh/internal/proc"
	"github.com/dsh-dev/dsh/internal/schema"
	"github.com/dsh-dev/dsh/internal/session"
	"github.com/dsh-dev/dsh/internal/subagent"
)

// maxActivity bounds the activity lines kept for a failure diagnostic.
const maxActivity = 16

// stderrTail is how much of Claude's stderr a diagnostic carries.
const stderrTail = 1024

// interruptLine is the stream-json control request that interrupts the
// running turn (verified live: Claude answers control_response success,
// then a result of subtype error_during_execution).
const interruptLine = `{"type":"control_request","request_id":"dsh-interrupt","request":{"subtype":"interrupt"}}` + "\n"

type run struct {
	p         *Provider
	proc      *proc.Process
	handle    *proc.Handle
	report    func(string) // the request's Progress; may be nil
	schema    *schema.Schema
	note      string // the root fallback notice, if any
	resume    string // the session id being resumed, if any
	stopTimer func() bool

	stdinMu sync.Mutex // serialises writes to Claude's stdin

	sessionOnce  sync.Once
	sessionReady chan struct{} // closed once the session id is known
	resultOnce   sync.Once
	resultReady  chan struct{} // closed once the first result line is read
	readDone     chan struct{} // closed when stdout has ended

	childID string // set by Start before the run is returned

	settle *subagent.Settlement

	mu        sync.Mutex
	sessionID string
	result    *resultEvent
	lastText  string            // the last top-level assistant text
	tools     map[string]string // tool_use id → tool name
	activity  []string
	dropped   int
	malformed int
	badSample string
	oversized int
	published bool
}

func newRun(p *Provider, child *proc.Process, report func(string), sc *schema.Schema, note, resume string) *run {
	return &run{
		p: p, proc: child, handle: proc.NewHandle(child, nil), report: report, schema: sc, note: note, resume: resume,
		stopTimer:    func() bool { return false },
		sessionReady: make(chan struct{}),
		resultReady:  make(chan struct{}),
		readDone:     make(chan struct{}),
		settle:       subagent.NewSettlement(),
		tools:        map[string]string{},
	}
}

// send writes b to Claude's stdin without blocking the caller: a Claude
// that stopped reading cannot stall the run, and teardown closes stdin,
// which ends a pending write.
func (r *run) send(b []byte) {
	go func() {
		r.stdinMu.Lock()
		defer r.stdinMu.Unlock()
		_, _ = r.proc.Stdin().Write(b)
	}()
}

// read consumes Claude's stdout until it ends (EOF, or teardown closing
// the pipe).
func (r *run) read() {
	defer close(r.readDone)
	_ = readLines(r.proc.Stdout(), maxLine, r.line, func(int) {
		r.mu.Lock()
		r.oversized++
		r.mu.Unlock()
	})
}

// line handles one stdout line; anything it does not recognise is
// skipped.
func (r *run) line(b []byte) {
	b = bytes.TrimSpace(b)
	if len(b) == 0 {
		return
	}
	var h head
	if err := json.Unmarshal(b, &h); err != nil {
		r.mu.Lock()
		r.malformed++
		if r.badSample == "" {
			r.badSample = oneLine(string(b), 120)
		}
		r.mu.Unlock()
		return
	}
	switch h.Type {
	case "system":
		if h.Subtype == "init" {
			r.onInit(b)
		}
	case "assistant":
		r.onAssistant(b)
	case "user":
		r.onUser(b)
	case "result":
		r.onResult(b)
	}
}

func (r *run) onInit(b []byte) {
	var e initEvent
	if json.Unmarshal(b, &e) != nil || e.SessionID == "" {
		return
	}
	r.mu.Lock()
	first := r.sessionID == ""
	if first {
		r.sessionID = e.SessionID
	}
	r.mu.Unlock()
	if !first {
		return
	}
	r.progress(fmt.Sprintf("claude-code session %s (model %s, permission mode %s)", e.SessionID, orDash(e.Model), orDash(e.PermissionMode)))
	r.sessionOnce.Do(func() { close(r.sessionReady) })
}

func (r *run) onAssistant(b []byte) {
	var e messageEvent
	if json.Unmarshal(b, &e) != nil {
		return
	}
	nested := e.ParentToolUseID != nil && *e.ParentToolUseID != ""
	for _, bl := range blocks(e.Message.Content) {
		switch bl.Type {
		case "text":
			if strings.TrimSpace(bl.Text) == "" {
				continue
			}
			if !nested {
				r.mu.Lock()
				r.lastText = bl.Text
				r.mu.Unlock()
			}
			r.progress("claude: " + oneLine(bl.Text, 200))
		case "tool_use":
			r.mu.Lock()
			r.tools[bl.ID] = bl.Name
			r.mu.Unlock()
			line := "tool " + oneLine(bl.Name, 60)
			if s := summarize(bl.Input); s != "" {
				line += ": " + s
			}
			r.progress(line)
		}
	}
}

func (r *run) onUser(b []byte) {
	var e messageEvent
	if json.Unmarshal(b, &e) != nil {
		return
	}
	for _, bl := range blocks(e.Message.Content) {
		if bl.Type != "tool_result" {
			continue
		}
		r.mu.Lock()
		name := r.tools[bl.ToolUseID]
		r.mu.Unlock()
		if name == "" {
			name = bl.ToolUseID
		}
		line := "tool " + oneLine(name, 60) + " ok"
		if bl.IsError {
			line = "tool " + oneLine(name, 60) + " error"
			if t := resultText(bl.Content); strings.TrimSpace(t) != "" {
				line += ": " + oneLine(t, 160)
			}
		}
		r.progress(line)
	}
}

func (r *run) onResult(b []byte) {
	e := new(resultEvent)
	if json.Unmarshal(b, e) != nil {
		r.mu.Lock()
		r.malformed++
		if r.badSample == "" {
			r.badSample = oneLine(string(b), 120)
		}
		r.mu.Unlock()
		return
	}
	r.mu.Lock()
	first := r.result == nil
	if first {
		r.result = e
		if r.sessionID == "" {
			// A result before any init: Claude failed before the turn (a
			// resume of an unknown session does this).
			r.sessionID = r.resume
			if r.sessionID == "" {
				r.sessionID = e.SessionID
			}
		}
	}
	r.mu.Unlock()
	if !first {
		return
	}
	r.progress("claude-code result " + e.summary())
	r.sessionOnce.Do(func() { close(r.sessionReady) })
	r.resultOnce.Do(func() { close(r.resultReady) })
}

// progress records an activity line and reports it, never after the
// result is published.
func (r *run) progress(line string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.published {
		return
	}
	r.activity = append(r.activity, line)
	if len(r.activity) > maxActivity {
		r.activity = r.activity[1:]
		r.dropped++
	}
	if r.report != nil {
		r.report(line)
	}
}

// awaitSession waits until Claude announced its session (or already
// answered), and fails when Claude ends first, ctx ends or the run's
// deadline passes.
func (r *run) awaitSession(ctx context.Context, deadline <-chan time.Time) error {
	exited := r.proc.Exited()
	var exitGrace <-chan time.Time
	for {
		select {
		case <-r.sessionReady:
			r.mu.Lock()
			sid := r.sessionID
			r.mu.Unlock()
			if sid == "" {
				sid = "unknown"
			}
			r.childID = r.p.o.Name + "/" + sid
			return nil
		case <-r.readDone:
			select {
			case <-r.sessionReady:
				continue
			default:
			}
			return errors.New("its output ended")
		case <-exited:
			exited = nil
			exitGrace = time.After(ExitGrace)
		case <-exitGrace:
			return errors.New("it exited")
		case <-ctx.Done():
			return fmt.Errorf("cancelled: %w", context.Cause(ctx))
		case <-deadline:
			return fmt.Errorf("timed out after %v", r.p.o.Timeout)
		}
	}
}

// loop waits for the result or a cancellation, tears the process group
// down and publishes the result; it is the only publisher of the settlement.
func (r *run) loop(ctx context.Context, deadline <-chan time.Time) {
	defer r.stopTimer()
	var (
		exited     = r.proc.Exited()
		exitGrace  <-chan time.Time
		cancelWait <-chan time.Time
		cancelled  = ctx.Done()
		disposed   = r.settle.Disposed()
		cause      string // why the run was cancelled; "" while it was not
		gotResult  bool
	)
	cancel := func(why string) {
		cancelled, disposed, deadline = nil, nil, nil
		if cause != "" {
			return
		}
		cause = why
		r.progress("claude-code: interrupting (" + why + ")")
		r.send([]byte(interruptLine))
		cancelWait = time.After(r.p.o.InterruptGrace)
	}
loop:
	for {
		select {
		case <-r.resultReady:
			gotResult = true
			break loop
		case <-r.readDone:
			select {
			case <-r.resultReady:
				gotResult = true
			default:
			}
			break loop
		case <-exited:
			exited = nil
			exitGrace = time.After(ExitGrace)
		case <-exitGrace:
			break loop
		case <-cancelled:
			cancel("parent")
		case <-disposed:
			cancel("disposed")
		case <-deadline:
			cancel("timeout")
		case <-cancelWait:
			break loop
		}
	}
	if gotResult {
		// Claude exits once its input ends; the teardown below then only
		// confirms that the group is gone.
		_ = r.proc.Stdin().Close()
		t := time.NewTimer(ExitGrace)
		select {
		case <-r.proc.Exited():
		case <-t.C:
		case <-r.settle.Disposed():
		}
		t.Stop()
	}
	terr := r.handle.Dispose()
	<-r.readDone
	res := r.outcome(cause, gotResult)
	if terr != nil {
		res.StopReason = subagent.StopError
		res.Diagnostic = appendLine(terr.Error(), res.Diagnostic)
	}
	res.Diagnostic = clip(res.Diagnostic, subagent.MaxDiagnostic)
	res.ChildID = r.childID
	r.mu.Lock()
	r.published = true
	r.mu.Unlock()
	r.settle.Publish(res)
}

// outcome maps what was read to the run's result; called once stdout
// has ended.
func (r *run) outcome(cause string, gotResult bool) subagent.Result {
	r.mu.Lock()
	defer r.mu.Unlock()
	var res subagent.Result
	partial := func() {
		if r.lastText != "" {
			res.Output = []llm.Block{llm.TextBlock(r.lastText)}
		}
	}
	e := r.result
	if !gotResult || e == nil {
		partial()
		msg := "claude-code ended without a result" + r.exitText()
		switch cause {
		case "parent", "disposed":
			res.StopReason = subagent.StopAborted
			msg = "cancelled (" + cause + "): " + msg
		case "timeout":
			res.StopReason = subagent.StopError
			msg = fmt.Sprintf("timed out after %v: %s", r.p.o.Timeout, msg)
		default:
			res.StopReason = subagent.StopError
		}
		res.Diagnostic = appendLine(msg+r.stderrSuffix(), r.notes(true))
		return res
	}
	res.Usage = e.usage()
	if !e.success() {
		partial()
		res.StopReason = subagent.StopError
		if cause == "parent" || cause == "disposed" {
			res.StopReason = subagent.StopAborted
		}
		res.Diagnostic = appendLine(appendLine(e.errorText(), e.summary()), r.notes(true)+r.stderrSuffix())
	} else {
		res.StopReason = subagent.StopCompleted
		if e.StopReason != nil {
			switch *e.StopReason {
			case "max_tokens":
				res.StopReason = subagent.StopMaxTokens
			case "refusal":
				res.StopReason = subagent.StopRefusal
			}
		}
		text := e.Result
		if r.schema != nil || strings.TrimSpace(text) == "" {
			// With a schema the result text is the JSON again.
			text = r.lastText
		}
		if strings.TrimSpace(text) != "" {
			res.Output = []llm.Block{llm.TextBlock(text)}
		}
		res.Diagnostic = appendLine(e.summary(), r.notes(false))
		if r.schema != nil && res.StopReason == subagent.StopCompleted {
			v, err := r.structured(e.StructuredOutput)
			if err != nil {
				res.StopReason = subagent.StopError
				res.Diagnostic = appendLine(err.Error(), res.Diagnostic)
			}
			res.Structured = v
		}
	}
	if cause == "timeout" {
		res.StopReason = subagent.StopError
		res.Diagnostic = appendLine(fmt.Sprintf("timed out after %v", r.p.o.Timeout), res.Diagnostic)
	}
	return res
}

// structured verifies Claude's structured_output against the request's
// schema, failing closed.
func (r *run) structured(raw json.RawMessage) (json.RawMessage, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, errors.New("claude-code returned no structured output although the request has an output schema")
	}
	if err := session.CheckLossless(raw); err != nil {
		return nil, fmt.Errorf("claude-code's structured output is not usable JSON: %w", err)
	}
	if err := r.schema.Validate(raw); err != nil {
		return nil, fmt.Errorf("claude-code's structured output does not match the output schema: %w", err)
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return nil, fmt.Errorf("claude-code's structured output: %w", err)
	}
	return json.RawMessage(buf.Bytes()), nil
}

// notes are the run's side remarks for a diagnostic: the root fallback,
// skipped stdout lines and, with activity, the recent activity lines.
// r.mu must be held.
func (r *run) notes(activity bool) string {
	var lines []string
	if r.note != "" {
		lines = append(lines, r.note)
	}
	if r.resume != "" && r.sessionID != "" && r.sessionID != r.resume {
		lines = append(lines, fmt.Sprintf("resumed session %s reported session id %s", r.resume, r.sessionID))
	}
	if r.malformed > 0 {
		lines = append(lines, fmt.Sprintf("%d malformed stdout lines skipped (first: %s)", r.malformed, r.badSample))
	}
	if r.oversized > 0 {
		lines = append(lines, fmt.Sprintf("%d stdout lines over %d bytes skipped", r.oversized, maxLine))
	}
	if activity && len(r.activity) > 0 {
		lines = append(lines, "recent activity:")
		if r.dropped > 0 {
			lines = append(lines, fmt.Sprintf("(%d earlier lines dropped)", r.dropped))
		}
		lines = append(lines, r.activity...)
	}
	return strings.Join(lines, "\n")
}

func (r *run) exitText() string {
	select {
	case <-r.proc.Exited():
	default:
		return ""
	}
	info, err := r.proc.Wait()
	switch {
	case err != nil:
		return ""
	case info.Signaled:
		return fmt.Sprintf(" (killed by %v)", info.Signal)
	default:
		return fmt.Sprintf(" (exit status %d)", info.Code)
	}
}

func (r *run) stderrSuffix() string {
	s := r.proc.StderrTail(stderrTail)
	if s == "" {
		return ""
	}
	return "\nclaude stderr:\n" + s
}

// ChildID is the provider name and Claude's session id.
func (r *run) ChildID() string { return r.childID }

// Wait blocks until the run's result is published or ctx ends.
func (r *run) Wait(ctx context.Context) (subagent.Result, error) { return r.settle.Wait(ctx) }

// Dispose cancels the run if it is still going, waits for its result and
// the teardown of the process group, and returns the teardown error.
func (r *run) Dispose() error {
	r.settle.RequestDispose()
	return r.handle.Dispose()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
