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
	"github.com/dsh-dev/dsh/internal/oop"
	"github.com/dsh-dev/dsh/internal/permission"
	"github.com/dsh-dev/dsh/internal/sandbox"
	"github.com/dsh-dev/dsh/internal/subagent"
)

// maxActivity bounds the activity log kept from tool call updates.
const maxActivity = 32

// stderrTail is how much of the agent's stderr a diagnostic carries.
const stderrTail = 1024

type run struct {
	p         *Provider
	proc      *oop.Process
	handle    *oop.Handle
	conn      *jsonrpc.Conn
	perm      permission.State
	cwd       string
	stopTimer func() bool

	sessionID string // set by handshake, then read-only
	childID   string

	disposeOnce sync.Once
	disposed    chan struct{}
	done        chan struct{}
	res         subagent.Result // written before done is closed

	mu         sync.Mutex
	text       strings.Builder
	activity   []string
	dropped    int
	tools      map[string]string // toolCallId → title
	cancelling bool
}

func newRun(p *Provider, proc *oop.Process, perm permission.State, cwd string) *run {
	r := &run{
		p: p, proc: proc, perm: perm, cwd: cwd,
		stopTimer: func() bool { return false },
		disposed:  make(chan struct{}),
		done:      make(chan struct{}),
		tools:     map[string]string{},
	}
	r.handle = oop.NewHandle(proc, nil)
	r.conn = jsonrpc.NewConn(proc.Stdout(), proc.Stdin(), jsonrpc.Options{
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

type promptResponse struct {
	StopReason string `json:"stopReason"`
	Usage      *struct {
		InputTokens       int64 `json:"inputTokens"`
		OutputTokens      int64 `json:"outputTokens"`
		ThoughtTokens     int64 `json:"thoughtTokens"`
		CachedReadTokens  int64 `json:"cachedReadTokens"`
		CachedWriteTokens int64 `json:"cachedWriteTokens"`
	} `json:"usage"`
}

type promptOutcome struct {
	resp promptResponse
	err  error
}

// loop drives the turn and publishes the result; it is the only writer of
// r.res.
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
		}, &o.resp)
		prompted <- o
	}()

	var (
		exited     = r.proc.Exited()
		exitGrace  <-chan time.Time
		cancelWait <-chan time.Time
		cancelled  = ctx.Done()
		disposed   = (<-chan struct{})(r.disposed)
		cause      string // why the run was cancelled; "" while it was not
		res        subagent.Result
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
		_ = r.conn.Notify("session/cancel", map[string]string{"sessionId": r.sessionID})
		cancelWait = time.After(CancelGrace)
	}
loop:
	for {
		select {
		case o := <-prompted:
			res = r.finish(o, cause)
			break loop
		case <-exited:
			exited = nil
			exitGrace = time.After(ExitGrace)
		case <-exitGrace:
			res = r.failure(cause, "agent exited without answering the prompt"+r.exitText())
			break loop
		case <-cancelled:
			cancel("parent")
		case <-disposed:
			cancel("disposed")
		case <-deadline:
			cancel("timeout")
		case <-cancelWait:
			res = r.failure(cause, "agent did not answer session/cancel")
			break loop
		}
	}
	pcancel()
	if err := r.handle.Dispose(); err != nil {
		res.StopReason = subagent.StopError
		res.Diagnostic = clip(appendLine(res.Diagnostic, err.Error()), subagent.MaxDiagnostic)
	}
	r.conn.Close()
	res.ChildID = r.childID
	r.res = res
	close(r.done)
}

// finish maps the prompt's outcome.
func (r *run) finish(o promptOutcome, cause string) subagent.Result {
	if o.err != nil {
		return r.failure(cause, "session/prompt: "+o.err.Error()+r.exitText())
	}
	res := r.collect()
	if u := o.resp.Usage; u != nil {
		res.Usage = llm.Usage{
			InputTokens: u.InputTokens, OutputTokens: u.OutputTokens, ReasoningTokens: u.ThoughtTokens,
			CacheReadTokens: u.CachedReadTokens, CacheWriteTokens: u.CachedWriteTokens,
		}
	}
	switch o.resp.StopReason {
	case "end_turn":
		res.StopReason = subagent.StopCompleted
	case "max_tokens", "max_turn_requests":
		res.StopReason = subagent.StopMaxTokens
	case "refusal":
		res.StopReason = subagent.StopRefusal
	case "cancelled":
		res.StopReason = subagent.StopAborted
	default:
		res.StopReason = subagent.StopError
		res.Diagnostic = appendLine(res.Diagnostic, fmt.Sprintf("unknown stopReason %q", o.resp.StopReason))
	}
	if cause == "timeout" {
		res.StopReason = subagent.StopError
		res.Diagnostic = appendLine(res.Diagnostic, fmt.Sprintf("timed out after %v", r.p.o.Timeout))
	}
	res.Diagnostic = clip(res.Diagnostic, subagent.MaxDiagnostic)
	return res
}

// failure is the result of a run that ended without a usable answer: aborted
// when it was cancelled by the parent or disposed, else an error.
func (r *run) failure(cause, msg string) subagent.Result {
	res := r.collect()
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
	res.Diagnostic = clip(appendLine(msg+stderrSuffix(r.proc), res.Diagnostic), subagent.MaxDiagnostic)
	return res
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

// collect snapshots the streamed output and activity log.
func (r *run) collect() subagent.Result {
	r.mu.Lock()
	defer r.mu.Unlock()
	var res subagent.Result
	if r.text.Len() > 0 {
		res.Output = []llm.Block{{Type: llm.BlockText, Text: r.text.String()}}
	}
	lines := r.activity
	if r.dropped > 0 {
		lines = append([]string{fmt.Sprintf("(%d earlier tool updates dropped)", r.dropped)}, lines...)
	}
	res.Diagnostic = strings.Join(lines, "\n")
	return res
}

type update struct {
	SessionUpdate string          `json:"sessionUpdate"`
	Content       json.RawMessage `json:"content"`
	ToolCallID    string          `json:"toolCallId"`
	Title         string          `json:"title"`
	Kind          string          `json:"kind"`
	Status        string          `json:"status"`
}

func (r *run) onNotification(method string, params json.RawMessage) {
	if method != "session/update" {
		return
	}
	var n struct {
		SessionID string `json:"sessionId"`
		Update    update `json:"update"`
	}
	if json.Unmarshal(params, &n) != nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.sessionID != "" && n.SessionID != r.sessionID {
		return
	}
	u := n.Update
	switch u.SessionUpdate {
	case "agent_message_chunk":
		var c struct {
			Type string `json:"type"`
			Text string `json:"text"`
		}
		if json.Unmarshal(u.Content, &c) == nil && c.Type == "text" {
			r.text.WriteString(c.Text)
		}
	case "tool_call", "tool_call_update":
		if u.Title != "" {
			r.tools[u.ToolCallID] = u.Title
		}
		title := r.tools[u.ToolCallID]
		line := "tool " + u.ToolCallID
		if u.Kind != "" {
			line += " [" + u.Kind + "]"
		}
		if title != "" {
			line += " " + clip(title, 200)
		}
		if u.Status != "" {
			line += ": " + u.Status
		}
		r.activity = append(r.activity, line)
		if len(r.activity) > maxActivity {
			r.activity = r.activity[1:]
			r.dropped++
		}
	}
}

type permOption struct {
	OptionID string `json:"optionId"`
	Kind     string `json:"kind"`
}

func (r *run) onRequest(_ context.Context, method string, params json.RawMessage) (any, *jsonrpc.Error) {
	if method != "session/request_permission" {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "method not supported by client: " + method}
	}
	var p struct {
		Options []permOption `json:"options"`
	}
	if err := json.Unmarshal(params, &p); err != nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: err.Error()}
	}
	r.mu.Lock()
	cancelling := r.cancelling
	r.mu.Unlock()
	id := ""
	if !cancelling {
		id = choose(r.perm, p.Options)
	}
	if id == "" {
		return map[string]any{"outcome": map[string]string{"outcome": "cancelled"}}, nil
	}
	return map[string]any{"outcome": map[string]string{"outcome": "selected", "optionId": id}}, nil
}

// choose picks the option answering a permission request under st: allow
// only in danger-full-access, else reject. "" means no suitable option.
func choose(st permission.State, opts []permOption) string {
	kinds := []string{"reject_once", "reject_always"}
	if st.Mode == sandbox.DangerFullAccess {
		kinds = []string{"allow_once", "allow_always"}
	}
	for _, k := range kinds {
		for _, o := range opts {
			if o.Kind == k && o.OptionID != "" {
				return o.OptionID
			}
		}
	}
	return ""
}

// ChildID is the provider name and the ACP sessionId.
func (r *run) ChildID() string { return r.childID }

// Wait blocks until the run's result is published or ctx ends.
func (r *run) Wait(ctx context.Context) (subagent.Result, error) {
	select {
	case <-r.done:
		return r.res, nil
	case <-ctx.Done():
		return subagent.Result{}, ctx.Err()
	}
}

// Dispose cancels the run if it is still going, waits for its result and
// the teardown of the process group, and returns the teardown error.
func (r *run) Dispose() error {
	r.disposeOnce.Do(func() { close(r.disposed) })
	<-r.done
	return r.handle.Dispose()
}

func stderrSuffix(p *oop.Process) string {
	s := strings.TrimSpace(string(p.Stderr()))
	if s == "" {
		return ""
	}
	if len(s) > stderrTail {
		s = "…" + s[len(s)-stderrTail:]
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

// clip bounds s to n bytes without splitting a UTF-8 sequence.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n - len("…")
	for cut > 0 && s[cut]&0xC0 == 0x80 {
		cut--
	}
	return s[:cut] + "…"
}
