package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/dsh-dev/dsh/internal/agent"
	"github.com/dsh-dev/dsh/internal/compaction"
	"github.com/dsh-dev/dsh/internal/hooks"
	"github.com/dsh-dev/dsh/internal/llm"
	"github.com/dsh-dev/dsh/internal/permission"
	"github.com/dsh-dev/dsh/internal/session"
	"github.com/dsh-dev/dsh/internal/subagent"
	"github.com/dsh-dev/dsh/internal/tool"
	"github.com/dsh-dev/dsh/internal/workspace"
)

// maxStopContinuations bounds how often Stop hooks may force another step
// in one turn, so a hook that always blocks cannot loop for ever.
const maxStopContinuations = 10

// warnedHooks remembers the hook warnings already printed by this process:
// each is said once, not once per session.
var warnedHooks sync.Map

// LoadHooks returns the effective hooks of a session directory.
func (a *App) LoadHooks(cwd string) (*hooks.Set, error) {
	return hooks.Load(a.hookOptions(cwd))
}

func (a *App) hookOptions(cwd string) hooks.LoadOptions {
	return hooks.LoadOptions{Home: a.Home, ProjectDir: workspace.ProjectRoot(cwd), Import: a.Config.Hooks.Import, Cwd: cwd}
}

// ProtectedHookFiles are the repository files the trusted project hooks
// of a session directory run (hooks.ProtectedFiles): the sandbox keeps
// them read-only.
func (a *App) ProtectedHookFiles(cwd string) []string {
	return hooks.ProtectedFiles(a.hookOptions(cwd))
}

// sessionHooks is the per-session state of the user hooks.
type sessionHooks struct {
	runner *hooks.Runner
	log    *session.Log
	// worker runs the hooks of log observations (subagent lifecycle,
	// notifications) in order, off the appender's goroutine.
	mu      sync.Mutex
	queue   []func(context.Context)
	signal  chan struct{}
	closing bool // guarded by mu
	child   bool // a subagent child: no session lifecycle hooks
	// promptID is the id of the current prompt (guarded by mu); started
	// holds each running call's start, for duration_ms.
	promptID string
	started  map[string]time.Time
	stop     context.CancelFunc
	done     chan struct{}
	stopCnt  map[int]int // turn → Stop continuations so far
}

// installHooks attaches the user hooks to the session's extension points.
// It returns nil when no hook applies.
func (e *env) installHooks(ctx context.Context, resumed bool) (*sessionHooks, error) {
	set, err := e.app.LoadHooks(e.cwd)
	if err != nil {
		return nil, &ConfigError{err}
	}
	for _, w := range set.Warnings {
		if _, said := warnedHooks.LoadOrStore(w, true); !said {
			e.warn("%s", w)
		}
	}
	if len(set.Hooks) == 0 {
		return nil, nil
	}
	log := e.log
	sh := &sessionHooks{log: log, signal: make(chan struct{}, 1), done: make(chan struct{}), stopCnt: map[int]int{}, started: map[string]time.Time{}}
	tr := &transcript{path: filepath.Join(e.app.Home, "transcripts", log.ID()+".jsonl"), log: log}
	sh.runner = &hooks.Runner{
		Set: set, SessionID: log.ID(), Cwd: e.cwd, Transcript: tr.sync,
		PermissionMode: func() string { return "default" },
		PromptID: func() string {
			sh.mu.Lock()
			defer sh.mu.Unlock()
			return sh.promptID
		},
		Effort: e.effort,
		Log: func(typ string, data any) error {
			_, err := log.Append(typ, data, session.Ignorable())
			return err
		},
		// A suspension found at a run (a script rewritten mid-session) is
		// said where the load's warnings are.
		Warn: func(msg string) { e.warn("%s", msg) },
	}
	r := sh.runner
	// A subagent child is not a session of its own to the user: its tool
	// calls meet the same hooks, its lifecycle is the parent's
	// SubagentStart/SubagentStop.
	child := log.Header().ParentSession != "" && log.Header().Origin == subagent.OriginSubagent
	sh.child = child

	// UserPromptSubmit: the first step of a turn carries the prompt.
	e.hooks.PreStep = append(e.hooks.PreStep, func(ctx context.Context, in agent.PreStep) ([]llm.Message, bool, error) {
		if in.Step != 1 || child || !set.Has(hooks.UserPromptSubmit) {
			return in.Messages, false, nil
		}
		prompt := promptText(in.Messages)
		if prompt == "" {
			return in.Messages, false, nil
		}
		sh.mu.Lock()
		sh.promptID = newMessageID()
		sh.mu.Unlock()
		out := r.Fire(ctx, hooks.UserPromptSubmit, "", map[string]any{"prompt": prompt})
		if out.Decision == hooks.DecisionBlock || out.Decision == hooks.DecisionDeny || out.Stop {
			return nil, true, nil
		}
		return append(in.Messages, contextMessages(out.Context)...), false, nil
	})
	// Stop: a blocking answer steers the agent into one more step.
	e.hooks.TurnStopping = append(e.hooks.TurnStopping, func(ctx context.Context, turn int) {
		if child || !set.Has(hooks.Stop) {
			return
		}
		sh.mu.Lock()
		n := sh.stopCnt[turn]
		sh.mu.Unlock()
		tasks := []map[string]any{}
		for _, j := range e.app.jobs.reg.List(log.ID()) {
			if j.Ended.IsZero() {
				tasks = append(tasks, map[string]any{"id": j.ID, "kind": j.Kind, "description": j.Description})
			}
		}
		out := r.Fire(ctx, hooks.Stop, "", map[string]any{"stop_hook_active": n > 0, "last_assistant_message": lastAssistantText(log),
			// dsh has no session-scoped cron jobs.
			"background_tasks": tasks, "session_crons": []any{}})
		if (out.Decision != hooks.DecisionBlock && out.Decision != hooks.DecisionDeny) || out.Stop || n >= maxStopContinuations {
			return
		}
		sh.mu.Lock()
		sh.stopCnt[turn] = n + 1
		sh.mu.Unlock()
		reason := out.Reason
		if reason == "" {
			reason = "continue: blocked by Stop hook"
		}
		_ = e.steer(agent.NewUserMessage(reason))
	})
	// PreToolUse: deny > ask > allow; an allow does not lift dsh's own
	// rules (the rest of the chain still runs).
	e.pipe.UsePreExecute(func(ctx context.Context, c *tool.Call, next func(context.Context) tool.Decision) tool.Decision {
		sh.mu.Lock()
		sh.started[c.ID] = time.Now()
		sh.mu.Unlock()
		out := r.Fire(ctx, hooks.PreToolUse, c.Name, toolFields(c))
		for _, m := range contextMessages(out.Context) {
			_ = e.inject(m)
		}
		if out.Stop {
			e.cancelTurn()
			return tool.Decision{Kind: tool.Cancel}
		}
		switch out.Decision {
		case hooks.DecisionDeny, hooks.DecisionBlock:
			reason := out.Reason
			if reason == "" {
				reason = "Error: blocked by PreToolUse hook"
			}
			return tool.Decision{Kind: tool.Deny, Reason: reason, Info: &tool.Error{Code: "HOOK_DENIED"}}
		case hooks.DecisionAsk:
			d := next(ctx)
			if d.Kind == tool.Allow {
				return tool.Decision{Kind: tool.Ask, Reason: out.Reason}
			}
			return d
		}
		return next(ctx)
	})
	// PostToolUse / PostToolUseFailure: block turns the result into
	// feedback; context is appended to the result the model reads.
	e.pipe.UsePostExecute(func(ctx context.Context, c *tool.Call, res tool.Result) tool.PostDecision {
		ev := hooks.PostToolUse
		f := toolFields(c)
		sh.mu.Lock()
		if t0, ok := sh.started[c.ID]; ok {
			f["duration_ms"] = time.Since(t0).Milliseconds()
			delete(sh.started, c.ID)
		}
		sh.mu.Unlock()
		if res.IsError {
			ev = hooks.PostToolUseFailure
			f["error"] = resultText(res)
		} else {
			f["tool_response"] = map[string]any{"content": resultText(res), "is_error": false}
		}
		out := r.Fire(ctx, ev, c.Name, f)
		if out.Stop {
			e.cancelTurn()
		}
		if out.Decision == hooks.DecisionBlock || out.Decision == hooks.DecisionDeny {
			return tool.PostDecision{Kind: tool.Block, Feedback: []llm.Block{llm.TextBlock(out.Reason)}}
		}
		if len(out.Context) > 0 {
			content := append([]llm.Block(nil), res.Content...)
			for _, s := range out.Context {
				content = append(content, llm.TextBlock("<hook-context event=\""+string(ev)+"\">\n"+s+"\n</hook-context>"))
			}
			return tool.PostDecision{Kind: tool.Accept, Content: content}
		}
		return tool.PostDecision{Kind: tool.Accept}
	})
	// PermissionRequest answers an approval before any person is asked.
	if set.Has(hooks.PermissionRequest) || set.Has(hooks.Notification) {
		e.human = &hookAnswerer{inner: e.human, r: r}
	}
	// Compaction.
	e.compactHooks = &compaction.Hooks{
		Before: func(ctx context.Context, reason string) {
			r.Fire(ctx, hooks.PreCompact, trigger(reason), map[string]any{"trigger": trigger(reason), "custom_instructions": ""})
		},
		After: func(ctx context.Context, reason string, res compaction.Result) {
			r.Fire(ctx, hooks.PostCompact, trigger(reason), map[string]any{"trigger": trigger(reason), "compacted": res.Compacted})
		},
	}
	// Observations: the subagent lifecycle and notifications.
	if !child && (set.Has(hooks.SubagentStart) || set.Has(hooks.SubagentStop) || set.Has(hooks.Notification)) {
		wctx, cancel := context.WithCancel(context.Background())
		sh.stop = cancel
		go sh.work(wctx)
		log.Observe(sh.observe)
	}
	// SessionStart.
	if !child {
		src := "startup"
		if resumed {
			src = "resume"
		}
		out := r.Fire(ctx, hooks.SessionStart, src, map[string]any{"source": src})
		e.pendingContext = append(e.pendingContext, out.Context...)
	}
	return sh, nil
}

// observe turns log events into queued hook runs. It runs under no lock
// and must be quick: it only queues.
func (sh *sessionHooks) observe(ev session.Event) {
	r := sh.runner
	var run func(context.Context)
	switch ev.Type {
	case session.TypeSubagentStart:
		var p subagent.StartEvent
		if ev.Decode(&p) != nil {
			return
		}
		run = func(ctx context.Context) {
			r.Fire(ctx, hooks.SubagentStart, p.Provider, map[string]any{"agent_id": p.ChildID, "agent_type": p.Provider})
		}
	case session.TypeSubagentEnd:
		var p subagent.EndEvent
		if ev.Decode(&p) != nil {
			return
		}
		run = func(ctx context.Context) {
			r.Fire(ctx, hooks.SubagentStop, "", map[string]any{"agent_id": p.ChildID, "stop_hook_active": false, "stop_reason": p.StopReason})
		}
	case session.TypeTurnEnd:
		run = func(ctx context.Context) {
			r.Fire(ctx, hooks.Notification, "turn_finished", map[string]any{"message": "dsh finished its turn", "notification_type": "turn_finished"})
		}
	default:
		return
	}
	sh.mu.Lock()
	sh.queue = append(sh.queue, run)
	sh.mu.Unlock()
	select {
	case sh.signal <- struct{}{}:
	default:
	}
}

// work runs queued observation hooks in order until the session closes
// (after what was queued by then) or ctx ends.
func (sh *sessionHooks) work(ctx context.Context) {
	defer close(sh.done)
	for {
		sh.mu.Lock()
		q, closing := sh.queue, sh.closing
		sh.queue = nil
		sh.mu.Unlock()
		for _, run := range q {
			run(ctx)
		}
		if closing && len(q) == 0 {
			return
		}
		select {
		case <-sh.signal:
		case <-ctx.Done():
			return
		}
	}
}

// closeGrace bounds how long closing a session waits for queued
// observation hooks before cancelling them.
const closeGrace = 5 * time.Second

// close lets the worker run what is queued, then runs SessionEnd.
func (sh *sessionHooks) close(reason string) {
	if sh == nil {
		return
	}
	if sh.stop != nil {
		sh.mu.Lock()
		sh.closing = true
		sh.mu.Unlock()
		select {
		case sh.signal <- struct{}{}:
		default:
		}
		t := time.NewTimer(closeGrace)
		select {
		case <-sh.done:
		case <-t.C:
			sh.stop()
			<-sh.done
		}
		t.Stop()
		sh.stop()
	}
	if !sh.child {
		sh.runner.Fire(context.Background(), hooks.SessionEnd, reason, map[string]any{"reason": reason})
	}
}

// abort ends the worker without running anything more (the wiring
// failed).
func (sh *sessionHooks) abort() {
	if sh == nil || sh.stop == nil {
		return
	}
	sh.stop()
	<-sh.done
}

// hookAnswerer runs PermissionRequest hooks before the person (or the
// host's queue) is asked; allow or deny answers, anything else falls
// through.
type hookAnswerer struct {
	inner permission.Answerer
	r     *hooks.Runner
}

func (h *hookAnswerer) Name() string {
	if h.inner == nil {
		return permission.AnswererNone
	}
	return h.inner.Name()
}

func (h *hookAnswerer) Answer(ctx context.Context, q permission.Question) (permission.Verdict, error) {
	out := h.r.Fire(ctx, hooks.PermissionRequest, q.ToolName, map[string]any{"tool_name": q.ToolName, "tool_input": rawOrEmpty(q.Arguments)})
	switch out.Decision {
	case hooks.DecisionAllow:
		return permission.Verdict{Outcome: tool.AllowedOnce, Answerer: permission.AnswererPolicy, Reason: "allowed by PermissionRequest hook"}, nil
	case hooks.DecisionDeny, hooks.DecisionBlock:
		reason := out.Reason
		if reason == "" {
			reason = "denied by PermissionRequest hook"
		}
		return permission.Verdict{Outcome: tool.Rejected, Answerer: permission.AnswererPolicy, Reason: reason}, nil
	}
	if h.inner == nil {
		return permission.Verdict{Outcome: tool.Unavailable, Reason: "no one can answer"}, nil
	}
	// A person is about to be asked.
	h.r.Fire(ctx, hooks.Notification, "permission_prompt", map[string]any{
		"message": "dsh needs your permission to use " + q.ToolName, "notification_type": "permission_prompt"})
	return h.inner.Answer(ctx, q)
}

func trigger(reason string) string {
	if reason == compaction.ReasonManual {
		return "manual"
	}
	return "auto"
}

func toolFields(c *tool.Call) map[string]any {
	return map[string]any{"tool_name": c.Name, "tool_input": rawOrEmpty(c.Arguments), "tool_use_id": c.ID}
}

func rawOrEmpty(b json.RawMessage) json.RawMessage {
	if len(b) == 0 {
		return json.RawMessage("{}")
	}
	return b
}

func resultText(r tool.Result) string {
	var b strings.Builder
	for _, blk := range r.Content {
		if blk.Type == llm.BlockText {
			b.WriteString(blk.Text)
		}
	}
	if r.Error != nil && b.Len() == 0 {
		b.WriteString(r.Error.Message)
	}
	return b.String()
}

// lastAssistantText is the text of the model's latest answer.
func lastAssistantText(log *session.Log) string {
	msgs := log.Messages()
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == llm.RoleAssistant {
			return msgs[i].Text()
		}
	}
	return ""
}

// promptText is the text of the human messages entering a step.
// Only a person's messages count: a turn a settle notice, a job notice or
// a goal round woke carries no prompt, so it fires no UserPromptSubmit.
func promptText(msgs []llm.Message) string {
	var parts []string
	for _, m := range msgs {
		if m.Role != llm.RoleUser || (m.Source.Kind != "user" && m.Source.Kind != "") {
			continue
		}
		for _, blk := range m.Content {
			if blk.Type == llm.BlockText && blk.Text != "" {
				parts = append(parts, blk.Text)
			}
		}
	}
	return strings.Join(parts, "\n\n")
}

func contextMessages(ctxs []string) []llm.Message {
	var out []llm.Message
	for _, s := range ctxs {
		out = append(out, agent.NewUserMessage("<hook-context>\n"+s+"\n</hook-context>"))
	}
	return out
}

// transcript keeps $DSH_HOME/transcripts/<id>.jsonl (the session's events,
// one JSON object a line) up to date for hooks that read transcript_path.
type transcript struct {
	mu      sync.Mutex
	path    string
	log     *session.Log
	written int
}

func (t *transcript) sync() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := t.log.View().Len()
	if int64(t.written) >= n && t.written > 0 {
		return t.path
	}
	if err := os.MkdirAll(filepath.Dir(t.path), 0o700); err != nil {
		return t.path
	}
	flag := os.O_CREATE | os.O_WRONLY | os.O_APPEND
	if t.written == 0 {
		flag |= os.O_TRUNC
	}
	f, err := os.OpenFile(t.path, flag, 0o600)
	if err != nil {
		return t.path
	}
	defer f.Close()
	// Payloads released from memory are read back a page at a time.
	var b strings.Builder
	end, n := n, int64(t.written)
	if err := t.log.Scan(context.Background(), n, func(ev session.Event) error {
		if ev.Seq >= end {
			return errStopScan
		}
		line, err := json.Marshal(ev)
		if err != nil {
			return err
		}
		b.Write(line)
		b.WriteByte('\n')
		n++
		return nil
	}); err != nil && !errors.Is(err, errStopScan) {
		fmt.Fprintf(os.Stderr, "dsh: hooks transcript: %v\n", err)
		return t.path
	}
	if _, err := f.WriteString(b.String()); err != nil {
		fmt.Fprintf(os.Stderr, "dsh: hooks transcript: %v\n", err)
		return t.path
	}
	t.written = int(n)
	return t.path
}

// errStopScan ends a Scan early.
var errStopScan = errors.New("stop")
