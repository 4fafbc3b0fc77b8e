package acpclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/dsh-dev/dsh/internal/jsonrpc"
	"github.com/dsh-dev/dsh/internal/llm"
	"github.com/dsh-dev/dsh/internal/permission"
	"github.com/dsh-dev/dsh/internal/proc"
	"github.com/dsh-dev/dsh/internal/sandbox"
	"github.com/dsh-dev/dsh/internal/subagent"
)

// maxActivity bounds the activity log kept from tool call updates.
const maxActivity = 32

// maxCalls bounds how many distinct tool calls a run tracks; calls beyond
// it are counted but neither tracked nor reported.
const maxCalls = 4096

// Clipping bounds, in bytes, of the parts of activity and progress lines.
const (
	maxTitle      = 200 // a tool call title
	maxCommentary = 200 // a commentary line's text
	maxPlanEntry  = 80  // one plan entry
	maxPlanLine   = 400 // a whole plan line
)

// exitGrace bounds how long a failed run waits for the agent to exit
// before quoting its stderr.
const exitGrace = time.Second

// stderrTail is how much of the agent's stderr a diagnostic carries.
const stderrTail = 1024

// Tool call statuses of ACP (ToolCallStatus); only the last two are
// terminal.
const (
	statusPending   = "pending"
	statusCompleted = "completed"
	statusFailed    = "failed"
)

// toolCall is what the run knows of one of the agent's tool calls.
type toolCall struct {
	id, title, kind, status string
}

type run struct {
	p         *Provider
	proc      *proc.Process
	handle    *proc.Handle
	conn      *jsonrpc.Conn
	perm      permission.State
	cwd       string
	progress  func(line string) // nil when the request has none
	stopTimer func() bool

	sessionID string // set by handshake, then read-only
	childID   string

	settle *subagent.Settlement

	// mu guards everything below and every call of progress: a progress
	// line is only ever reported with mu held and ended false, and ended
	// is set (under mu) before the result is published.
	mu         sync.Mutex
	text       strings.Builder // the whole answer (Result.Output)
	pending    strings.Builder // commentary not reported yet
	pendingCut bool            // pending was bounded: more text followed
	boundary   bool            // a message boundary passed since the last chunk
	msgID      string          // messageId of the last agent_message_chunk
	activity   []string
	dropped    int
	calls      map[string]*toolCall // by toolCallId
	order      []*toolCall          // calls in first-seen order
	untracked  int                  // calls beyond maxCalls
	plan       string               // the last plan line reported
	cancelling bool
	ended      bool
}

func newRun(p *Provider, child *proc.Process, perm permission.State, cwd string, progress func(string)) *run {
	r := &run{
		p: p, proc: child, perm: perm, cwd: cwd, progress: progress,
		stopTimer: func() bool { return false },
		settle:    subagent.NewSettlement(),
		calls:     map[string]*toolCall{},
	}
	r.handle = proc.NewHandle(child, nil)
	r.conn = jsonrpc.NewConn(child.Stdout(), child.Stdin(), jsonrpc.Options{
		Dialect:        jsonrpc.V2,
		OnNotification: r.onNotification,
		OnRequest:      r.onRequest,
	})
	return r
}

func (r *run) handshake(ctx context.Context) error {
	var init struct {
		ProtocolVersion int `json:"protocolVersion"`
	}
	err := r.conn.Call(ctx, "initialize", map[string]any{
		"protocolVersion": ProtocolVersion,
		"clientCapabilities": map[string]any{
			"fs":       map[string]bool{"readTextFile": false, "writeTextFile": false},
			"terminal": false,
		},
		"clientInfo": map[string]string{"name": "dsh", "version": "0"},
	}, &init)
	if err != nil {
		return fmt.Errorf("initialize: %w", err)
	}
	if init.ProtocolVersion != ProtocolVersion {
		return fmt.Errorf("initialize: agent speaks protocol version %d, want %d", init.ProtocolVersion, ProtocolVersion)
	}
	var sess struct {
		SessionID string `json:"sessionId"`
	}
	if err := r.conn.Call(ctx, "session/new", map[string]any{"cwd": r.cwd, "mcpServers": []any{}}, &sess); err != nil {
		return fmt.Errorf("session/new: %w", err)
	}
	if sess.SessionID == "" {
		return errors.New("session/new: empty sessionId")
	}
	r.mu.Lock()
	r.sessionID = sess.SessionID
	r.mu.Unlock()
	r.childID = r.p.o.Name + "/" + sess.SessionID
	return nil
}

// promptOutcome is what session/prompt returned: its raw result or the
// call's error.
type promptOutcome struct {
	result json.RawMessage
	err    error
}

// loop drives the turn and publishes the result; it is the only writer of
// the settlement.
func (r *run) loop(ctx context.Context, deadline <-chan time.Time, text string) {
	defer r.stopTimer()
	pctx, pcancel := context.WithCancel(context.Background())
	defer pcancel()
	prompted := make(chan promptOutcome, 1)
	go func() {
		var o promptOutcome
		o.err = r.conn.Call(pctx, "session/prompt", map[string]any{
			"sessionId": r.sessionID,
			"prompt":    []map[string]string{{"type": "text", "text": text}},
		}, &o.result)
		prompted <- o
	}()

	var (
		exited     = r.proc.Exited()
		exitGrace  <-chan time.Time
		cancelWait <-chan time.Time
		cancelled  = ctx.Done()
		disposed   = r.settle.Disposed()
		cause      string // why the run was cancelled; "" while it was not
		outcome    *promptOutcome
		failMsg    string        // why the run ended without an outcome
		notified   chan struct{} // closed when session/cancel was written (or failed)
	)
	cancel := func(why string) {
		cancelled, disposed, deadline = nil, nil, nil
		if cause != "" {
			return
		}
		cause = why
		r.mu.Lock()
		r.cancelling = true
		r.mu.Unlock()
		// Sent off the loop: an agent that stopped reading its input
		// blocks the write (behind the prompt's, if that is still being
		// written), and the loop must still reach cancelWait and tear the
		// agent down. The write fails once the connection closes below.
		notified = make(chan struct{})
		go func() {
			defer close(notified)
			_ = r.conn.Notify("session/cancel", map[string]string{"sessionId": r.sessionID})
		}()
		cancelWait = time.After(CancelGrace)
	}
loop:
	for {
		select {
		case o := <-prompted:
			outcome = &o
			break loop
		case <-exited:
			exited = nil
			exitGrace = time.After(ExitGrace)
		case <-exitGrace:
			failMsg = "agent exited without answering the prompt" + r.exitText()
			break loop
		case <-cancelled:
			cancel("parent")
		case <-disposed:
			cancel("disposed")
		case <-deadline:
			cancel("timeout")
		case <-cancelWait:
			failMsg = "agent did not answer session/cancel"
			break loop
		}
	}
	pcancel()
	open := r.end()
	var res subagent.Result
	if outcome != nil {
		res = r.finish(*outcome, cause, open)
	} else {
		res = r.failure(cause, failMsg, open)
	}
	if err := r.handle.Dispose(); err != nil {
		res.StopReason = subagent.StopError
		res.Diagnostic = clip(appendLine(err.Error(), res.Diagnostic), subagent.MaxDiagnostic)
	}
	r.conn.Close()
	if notified != nil {
		<-notified // the write has failed by now if it had not ended
	}
	res.ChildID = r.childID
	r.settle.Publish(res)
}

// end closes the turn's bookkeeping: it reports the pending commentary,
// closes every tool call not in a terminal status and stops all further
// progress reports and updates. It returns how many calls it closed.
func (r *run) end() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.flush()
	open := 0
	for _, c := range r.order {
		if terminal(c.status) {
			continue
		}
		open++
		line := "tool " + c.id
		if c.title != "" {
			line += " " + c.title
		}
		line += ": closed (prompt ended while " + c.status + ")"
		r.record(line)
		r.report(line)
	}
	r.ended = true
	return open
}

// openLine is the diagnostic line counting the calls end closed.
func openLine(open int) string {
	switch open {
	case 0:
		return ""
	case 1:
		return "1 tool call left open when the prompt ended"
	}
	return fmt.Sprintf("%d tool calls left open when the prompt ended", open)
}

// finish maps the prompt's outcome.
func (r *run) finish(o promptOutcome, cause string, open int) subagent.Result {
	if o.err != nil {
		return r.failure(cause, "session/prompt: "+o.err.Error()+r.exitText(), open)
	}
	var resp struct {
		StopReason json.RawMessage `json:"stopReason"`
		Usage      json.RawMessage `json:"usage"`
	}
	if err := json.Unmarshal(o.result, &resp); err != nil {
		return r.failure(cause, fmt.Sprintf("session/prompt: malformed response: %v", err), open)
	}
	var head []string
	stop, stopReason := "", str(resp.StopReason)
	switch stopReason {
	case "end_turn":
		stop = subagent.StopCompleted
	case "max_tokens":
		stop = subagent.StopMaxTokens
	case "max_turn_requests":
		stop = subagent.StopMaxTokens
		head = append(head, "agent stopped: max_turn_requests (its limit of model requests for one turn)")
	case "refusal":
		stop = subagent.StopRefusal
	case "cancelled":
		stop = subagent.StopAborted
		if cause == "" {
			head = append(head, "agent ended the turn as cancelled although no cancel was sent")
		}
	default:
		stop = subagent.StopError
		if len(resp.StopReason) == 0 {
			head = append(head, "session/prompt: response has no stopReason")
		} else {
			head = append(head, "unknown stopReason "+clip(oneLine(string(resp.StopReason)), 100))
		}
	}
	if cause == "timeout" {
		stop = subagent.StopError
		head = append(head, fmt.Sprintf("timed out after %v", r.p.o.Timeout))
	}
	res := r.collect(append(head, openLine(open), r.untrackedLine())...)
	res.StopReason = stop
	res.Usage = decodeUsage(resp.Usage)
	return res
}

// failure is the result of a run that ended without a usable answer: aborted
// when it was cancelled by the parent or disposed, else an error.
func (r *run) failure(cause, msg string, open int) subagent.Result {
	stop := subagent.StopError
	switch cause {
	case "parent", "disposed":
		stop = subagent.StopAborted
		msg = "cancelled (" + cause + "): " + msg
	case "timeout":
		msg = fmt.Sprintf("timed out after %v: %s", r.p.o.Timeout, msg)
	default:
		// The connection usually closes because the agent is exiting:
		// its last stderr lines (the reason) are complete only once it
		// has, which the stderr tail then waits for.
		t := time.NewTimer(exitGrace)
		select {
		case <-r.proc.Exited():
		case <-t.C:
		}
		t.Stop()
	}
	res := r.collect(msg, openLine(open), r.untrackedLine(), strings.TrimPrefix(stderrSuffix(r.proc), "\n"))
	res.StopReason = stop
	return res
}

func (r *run) untrackedLine() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.untracked == 0 {
		return ""
	}
	return fmt.Sprintf("%d further tool calls were not tracked (more than %d)", r.untracked, maxCalls)
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
		return fmt.Sprintf(" (agent killed by %v)", info.Signal)
	default:
		return fmt.Sprintf(" (agent exited with status %d)", info.Code)
	}
}

// collect snapshots the streamed output and builds the diagnostic: the
// non-empty head lines first, then as many of the newest activity lines
// as fit in subagent.MaxDiagnostic.
func (r *run) collect(head ...string) subagent.Result {
	r.mu.Lock()
	defer r.mu.Unlock()
	var res subagent.Result
	if r.text.Len() > 0 {
		res.Output = []llm.Block{{Type: llm.BlockText, Text: r.text.String()}}
	}
	var h []string
	for _, l := range head {
		if l != "" {
			h = append(h, l)
		}
	}
	res.Diagnostic = fitDiagnostic(strings.Join(h, "\n"), r.activity, r.dropped)
	return res
}

// fitDiagnostic joins head and the newest activity lines, dropping the
// oldest ones (and saying how many were dropped in all) until the text fits
// in subagent.MaxDiagnostic; head is clipped only when it alone is too long.
func fitDiagnostic(head string, activity []string, dropped int) string {
	for i := 0; ; i++ {
		lines := activity[i:]
		if n := dropped + i; n > 0 {
			lines = append([]string{fmt.Sprintf("(%d earlier tool updates dropped)", n)}, lines...)
		}
		d := appendLine(head, strings.Join(lines, "\n"))
		if len(d) <= subagent.MaxDiagnostic || i == len(activity) {
			return clip(d, subagent.MaxDiagnostic)
		}
	}
}

// decodeUsage reads the prompt response's usage (unstable in ACP, so read
// leniently: a malformed counter counts 0) into llm.Usage, whose counters
// are disjoint. ACP does not say whether inputTokens includes the cached
// tokens nor whether outputTokens includes thoughtTokens; totalTokens
// decides when it matches exactly one reading (preferring cache excluded
// from input and thoughts included in output, llm.Usage's own shape), else
// cache is taken as excluded and thoughts as included unless they exceed
// the output.
func decodeUsage(raw json.RawMessage) llm.Usage {
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil {
		return llm.Usage{}
	}
	count := func(k string) int64 {
		var v uint64
		if json.Unmarshal(m[k], &v) != nil || v > 1<<53 {
			return 0
		}
		return int64(v)
	}
	in, out, th := count("inputTokens"), count("outputTokens"), count("thoughtTokens")
	cr, cw, total := count("cachedReadTokens"), count("cachedWriteTokens"), count("totalTokens")
	cache := cr + cw
	inclusive, separate := false, th > out
	switch {
	case total == 0:
	case th <= out && total == in+out+cache:
	case total == in+out+th+cache:
		separate = true
	case in >= cache && th <= out && total == in+out:
		inclusive = true
	case in >= cache && total == in+out+th:
		inclusive, separate = true, true
	}
	u := llm.Usage{InputTokens: in, OutputTokens: out, ReasoningTokens: th, CacheReadTokens: cr, CacheWriteTokens: cw}
	if inclusive {
		u.InputTokens -= cache
	}
	if separate {
		u.OutputTokens += th
	}
	return u
}

// str decodes a JSON string, "" for anything else.
func str(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return ""
	}
	return s
}

// onNotification folds session/update notifications into the run. Fields
// are read one by one so that a malformed optional field loses only
// itself. Variants other than agent_message_chunk, tool_call,
// tool_call_update and plan (user_message_chunk, agent_thought_chunk,
// available_commands_update, current_mode_update, config_option_update,
// session_info_update, usage_update, future ones) are ignored.
func (r *run) onNotification(method string, params json.RawMessage) {
	if method != "session/update" {
		return
	}
	var n struct {
		SessionID string          `json:"sessionId"`
		Update    json.RawMessage `json:"update"`
	}
	if json.Unmarshal(params, &n) != nil {
		return
	}
	var u map[string]json.RawMessage
	if json.Unmarshal(n.Update, &u) != nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ended || (r.sessionID != "" && n.SessionID != r.sessionID) {
		return
	}
	switch str(u["sessionUpdate"]) {
	case "agent_message_chunk":
		r.onChunk(u)
	case "tool_call", "tool_call_update":
		r.onToolCall(u)
	case "plan":
		r.onPlan(u["entries"])
	}
}

// onChunk appends a text chunk to the answer and the pending commentary.
// A new messageId ends the previous message. Answer text after a message
// boundary is separated from what came before by a blank line.
func (r *run) onChunk(u map[string]json.RawMessage) {
	var c struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(u["content"], &c) != nil || c.Type != "text" || c.Text == "" {
		return
	}
	if id := str(u["messageId"]); id != "" {
		if r.msgID != "" && id != r.msgID {
			r.flush()
		}
		r.msgID = id
	}
	if r.boundary && r.text.Len() > 0 {
		r.text.WriteString("\n\n")
	}
	r.boundary = false
	r.text.WriteString(c.Text)
	if room := 4*maxCommentary - r.pending.Len(); room >= len(c.Text) {
		r.pending.WriteString(c.Text)
	} else {
		r.pending.WriteString(prefix(c.Text, room))
		r.pendingCut = true
	}
}

// onToolCall tracks a tool call by id: the first sighting (tool_call, or a
// tool_call_update for an unknown id) is reported as started, a change into
// completed or failed as finished. Updates that change nothing but the
// content are neither recorded nor reported.
func (r *run) onToolCall(u map[string]json.RawMessage) {
	id := str(u["toolCallId"])
	if id == "" {
		return
	}
	c := r.calls[id]
	fresh := c == nil
	if fresh {
		if len(r.calls) >= maxCalls {
			r.untracked++
			return
		}
		c = &toolCall{id: clip(oneLine(id), maxTitle)}
		r.calls[id] = c
		r.order = append(r.order, c)
	}
	prev := c.status
	if t := oneLine(str(u["title"])); t != "" {
		c.title = clip(t, maxTitle)
	}
	if k := oneLine(str(u["kind"])); k != "" {
		c.kind = clip(k, 40)
	}
	if s := oneLine(str(u["status"])); s != "" {
		c.status = clip(s, 40)
	}
	if c.status == "" {
		c.status = statusPending // ToolCall.status's default
	}
	name := "tool " + c.id
	if c.title != "" {
		name += " " + c.title
	}
	switch {
	case fresh:
		start := "tool " + c.id
		if c.kind != "" {
			start += " [" + c.kind + "]"
		}
		if c.title != "" {
			start += " " + c.title
		}
		r.record(start + ": " + c.status)
		r.emit(start + ": started")
	case c.status != prev:
		r.record(name + ": " + c.status)
	}
	if terminal(c.status) && c.status != prev {
		r.emit(name + ": " + c.status)
	}
}

// onPlan reports a plan update (the whole plan every time) compactly:
// "[x]" completed, "[>]" in progress, "[ ]" anything else. A plan equal to
// the last one reported is not reported again; an update whose entries are
// not an array is ignored, invalid entries are skipped.
func (r *run) onPlan(raw json.RawMessage) {
	var entries []json.RawMessage
	if json.Unmarshal(raw, &entries) != nil {
		return
	}
	var parts []string
	for _, e := range entries {
		var pe struct {
			Content string `json:"content"`
			Status  string `json:"status"`
		}
		if json.Unmarshal(e, &pe) != nil {
			continue
		}
		mark := "[ ]"
		switch pe.Status {
		case "completed":
			mark = "[x]"
		case "in_progress":
			mark = "[>]"
		}
		parts = append(parts, mark+" "+clip(oneLine(pe.Content), maxPlanEntry))
	}
	line := "plan: (empty)"
	if len(parts) > 0 {
		line = clip("plan: "+strings.Join(parts, "; "), maxPlanLine)
	}
	if line == r.plan {
		return
	}
	r.plan = line
	r.emit(line)
}

// flush reports the pending commentary, if any, as one clipped line and
// marks a message boundary. r.mu is held.
func (r *run) flush() {
	r.boundary = true
	text := oneLine(r.pending.String())
	cut := r.pendingCut
	r.pending.Reset()
	r.pendingCut = false
	if text == "" {
		return
	}
	if cut {
		text += "…" // clip below adds no second one: it cuts earlier
	}
	r.report("agent: " + clip(text, maxCommentary))
}

// emit reports line after the pending commentary, so that progress lines
// keep the order of the updates they come from. r.mu is held.
func (r *run) emit(line string) {
	r.flush()
	r.report(line)
}

// report passes line to the request's Progress unless the run has ended.
// r.mu is held, which is what keeps reports from racing past the end.
func (r *run) report(line string) {
	if r.progress != nil && !r.ended {
		r.progress(line)
	}
}

// record appends line to the bounded activity log. r.mu is held.
func (r *run) record(line string) {
	r.activity = append(r.activity, line)
	if len(r.activity) > maxActivity {
		r.activity = r.activity[1:]
		r.dropped++
	}
}

func terminal(status string) bool { return status == statusCompleted || status == statusFailed }

// oneLine collapses runs of white space (newlines included) into single
// spaces and trims the ends.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

type permOption struct {
	OptionID string `json:"optionId"`
	Kind     string `json:"kind"`
}

// onRequest answers session/request_permission (see the package doc) and
// records the answer in the activity log and as a progress line; every
// other method is unsupported, as the client advertises no fs or terminal
// capability. Invalid options are skipped rather than failing the request.
func (r *run) onRequest(_ context.Context, method string, params json.RawMessage) (any, *jsonrpc.Error) {
	if method != "session/request_permission" {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "method not supported by client: " + method}
	}
	var p struct {
		ToolCall map[string]json.RawMessage `json:"toolCall"`
		Options  []json.RawMessage          `json:"options"`
	}
	if err := json.Unmarshal(params, &p); err != nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: err.Error()}
	}
	var opts []permOption
	for _, raw := range p.Options {
		var o permOption
		if json.Unmarshal(raw, &o) == nil {
			opts = append(opts, o)
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	var chosen permOption
	if !r.cancelling {
		chosen = choose(r.perm, opts)
	}
	answer := "cancelled"
	if chosen.OptionID != "" {
		answer = chosen.Kind
	}
	if !r.ended {
		id := oneLine(str(p.ToolCall["toolCallId"]))
		title := oneLine(str(p.ToolCall["title"]))
		if c := r.calls[id]; c != nil && title == "" {
			title = c.title
		}
		line := "permission"
		if id != "" {
			line += " " + clip(id, maxTitle)
		}
		if title != "" {
			line += " " + clip(title, maxTitle)
		}
		line += ": " + answer
		r.record(line)
		r.emit(line)
	}
	if chosen.OptionID == "" {
		return map[string]any{"outcome": map[string]string{"outcome": "cancelled"}}, nil
	}
	return map[string]any{"outcome": map[string]string{"outcome": "selected", "optionId": chosen.OptionID}}, nil
}

// choose picks the option answering a permission request under st: allow
// only in danger-full-access, else reject. The zero option means no
// suitable option.
func choose(st permission.State, opts []permOption) permOption {
	kinds := []string{"reject_once", "reject_always"}
	if st.Mode == sandbox.DangerFullAccess {
		kinds = []string{"allow_once", "allow_always"}
	}
	for _, k := range kinds {
		for _, o := range opts {
			if o.Kind == k && o.OptionID != "" {
				return o
			}
		}
	}
	return permOption{}
}

// ChildID is the provider name and the ACP sessionId.
func (r *run) ChildID() string { return r.childID }

// Wait blocks until the run's result is published or ctx ends.
func (r *run) Wait(ctx context.Context) (subagent.Result, error) { return r.settle.Wait(ctx) }

// Dispose cancels the run if it is still going, waits for its result and
// the teardown of the process group, and returns the teardown error.
func (r *run) Dispose() error {
	r.settle.RequestDispose()
	return r.handle.Dispose()
}

func stderrSuffix(p *proc.Process) string {
	s := p.StderrTail(stderrTail)
	if s == "" {
		return ""
	}
	return "\nagent stderr:\n" + s
}

func appendLine(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "":
		return a
	}
	return a + "\n" + b
}

// clip bounds s to n bytes without splitting a UTF-8 sequence, marking a
// cut with "…".
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	if n < len("…") {
		return prefix(s, n)
	}
	return prefix(s, n-len("…")) + "…"
}

// prefix is the longest prefix of s of at most n bytes that does not split
// a UTF-8 sequence.
func prefix(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := max(n, 0)
	for cut > 0 && s[cut]&0xC0 == 0x80 {
		cut--
	}
	return s[:cut]
}
