package hooks

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"unicode/utf8"
)

// Event types of the session log written for every hook run.
const (
	TypeInvoked = "hook/invoked"
	TypeResult  = "hook/result"
)

// Decisions, merged deny > ask > allow. Block is a deny for events that
// are not tool calls (a prompt, a stop, a tool result).
const (
	DecisionAllow = "allow"
	DecisionAsk   = "ask"
	DecisionDeny  = "deny"
	DecisionBlock = "block"
)

func rank(d string) int {
	switch d {
	case DecisionDeny, DecisionBlock:
		return 3
	case DecisionAsk:
		return 2
	case DecisionAllow:
		return 1
	}
	return 0
}

// stderrExcerpt bounds the stderr kept in hook/result.
const stderrExcerpt = 500

// Invoked is the payload of hook/invoked.
type Invoked struct {
	Event   Event  `json:"event"`
	Matcher string `json:"matcher,omitempty"`
	Command string `json:"command"`
	Source  string `json:"source"`
}

// Result is the payload of hook/result.
type Result struct {
	Event      Event  `json:"event"`
	Matcher    string `json:"matcher,omitempty"`
	Command    string `json:"command"`
	ExitCode   int    `json:"exitCode"`
	DurationMs int64  `json:"durationMs"`
	Decision   string `json:"decision,omitempty"`
	Reason     string `json:"reason,omitempty"`
	Stderr     string `json:"stderrSummary,omitempty"`
	TimedOut   bool   `json:"timedOut,omitempty"`
	Cancelled  bool   `json:"cancelled,omitempty"`
	// Error says why the hook's answer was not used (it could not start,
	// its JSON did not parse, a non-blocking exit code).
	Error string `json:"error,omitempty"`
	// UpdatedInput is noted, not honoured: a call's arguments are logged
	// before policy runs.
	UpdatedInputIgnored bool `json:"updatedInputIgnored,omitempty"`
	// Suspended: the hook did not run because its project file or a
	// repository file it names changed since it was trusted (Error says
	// which; Changed lists them).
	Suspended bool     `json:"suspended,omitempty"`
	Changed   []Change `json:"changed,omitempty"`
}

// Outcome is the merged answer of every hook that ran for one event.
type Outcome struct {
	// Decision is the strongest decision (deny/block > ask > allow), ""
	// when no hook decided.
	Decision string
	// Reason joins the reasons of the hooks that gave the decision, with
	// blank lines.
	Reason string
	// Context is additional context for the model (additionalContext, and
	// for SessionStart and UserPromptSubmit plain stdout of exit 0).
	Context []string
	// Stop is set when a hook answered continue:false: the turn ends.
	Stop       bool
	StopReason string
	// Ran is how many hooks ran; Results are their log payloads.
	Ran     int
	Results []Result
}

// Runner fires one session's hooks.
type Runner struct {
	Set *Set
	// SessionID and Cwd go into every payload; Cwd is where hooks run.
	SessionID string
	Cwd       string
	// Transcript returns the transcript path for the payload (it may
	// bring the file up to date first); nil gives "".
	Transcript func() string
	// PermissionMode goes into payloads as Claude Code's permission_mode.
	PermissionMode func() string
	// PromptID is the id of the prompt the session is working on ("":
	// none yet), Claude Code's prompt_id.
	PromptID func() string
	// Effort is the reasoning effort level, Claude Code's effort.level.
	Effort string
	// Log appends a hook/invoked or hook/result event; nil logs nothing.
	Log func(typ string, data any) error
	// Env adds variables to each hook's environment.
	Env map[string]string
	// Warn tells the user that a project file's hooks are suspended (or
	// run again), once per change of state; nil says nothing. The
	// suspension is logged as hook/result either way.
	Warn func(msg string)

	mu        sync.Mutex
	suspended map[string]string // guarded by mu; source → last warning
}

// Fire runs the hooks of ev that match subject, serially in configuration
// order, with the payload fields merged over the common ones
// (session_id, transcript_path, cwd, hook_event_name, permission_mode).
// A project hook whose file or scripts changed since they were trusted
// does not run (a suspended hook/result says why, and Warn); a suspended
// PreToolUse hook denies the call it would have checked.
func (r *Runner) Fire(ctx context.Context, ev Event, subject string, fields map[string]any) Outcome {
	var out Outcome
	if r == nil {
		return out
	}
	hs := r.Set.For(ev, subject)
	if len(hs) == 0 {
		return out
	}
	payload := map[string]any{
		"session_id":      r.SessionID,
		"transcript_path": "",
		"cwd":             r.Cwd,
		"hook_event_name": string(ev),
	}
	if r.Transcript != nil {
		payload["transcript_path"] = r.Transcript()
	}
	// The common keys each event carries, as Claude Code sends them.
	if r.PermissionMode != nil && ev != SessionStart && ev != SessionEnd {
		payload["permission_mode"] = r.PermissionMode()
	}
	if r.PromptID != nil && ev != SessionStart {
		if id := r.PromptID(); id != "" {
			payload["prompt_id"] = id
		}
	}
	switch ev {
	case PreToolUse, PostToolUse, PostToolUseFailure, PermissionRequest, Stop, SubagentStop:
		effort := r.Effort
		if effort == "" {
			effort = "default"
		}
		payload["effort"] = map[string]string{"level": effort}
	}
	for k, v := range fields {
		payload[k] = v
	}
	stdin, err := json.Marshal(payload)
	if err != nil {
		stdin = []byte("{}")
	}
	env := map[string]string{"CLAUDE_PROJECT_DIR": r.Set.ProjectDir, "DSH_PROJECT_DIR": r.Set.ProjectDir, "DSH_SESSION_ID": r.SessionID}
	for k, v := range r.Env {
		env[k] = v
	}
	for _, h := range hs {
		if ctx.Err() != nil {
			break
		}
		// A project hook runs only while its file and the scripts it names
		// are the trusted ones, checked now: a script rewritten since the
		// last run (or since the session began) is not run. The sandbox
		// keeps the verified files read-only (ProtectedFiles), so nothing
		// confined can swap them between this check and the exec.
		if h.guard != nil {
			if err := h.guard.check(r.Cwd); err != nil {
				res := Result{Event: ev, Matcher: h.Matcher, Command: h.Command, ExitCode: -1, Error: err.Error(), Suspended: true}
				var se *SuspendedError
				if errors.As(err, &se) {
					res.Changed = se.Changes
				}
				// A PreToolUse hook guards tool calls: the call it would
				// have checked is refused rather than let through unchecked
				// (else rewriting a guard's script, or adding a file a hook
				// names, would switch the guard off).
				if ev == PreToolUse {
					res.Decision, res.Reason = DecisionDeny, "the PreToolUse hook that checks this call did not run: "+err.Error()
					merge(&out, res.Decision, res.Reason)
				}
				out.Results = append(out.Results, res)
				r.log(TypeResult, res)
				r.noteSuspended(h.Source, err.Error())
				continue
			}
			r.noteSuspended(h.Source, "")
		}
		r.log(TypeInvoked, Invoked{Event: ev, Matcher: h.Matcher, Command: h.Command, Source: h.Source})
		x := Exec(ctx, h.Command, r.Cwd, env, stdin, h.Timeout)
		res := interpret(ev, h, x, &out)
		out.Ran++
		out.Results = append(out.Results, res)
		r.log(TypeResult, res)
	}
	return out
}

// noteSuspended records whether source's hooks are suspended (msg) or
// run (""), and warns when that changed.
func (r *Runner) noteSuspended(source, msg string) {
	r.mu.Lock()
	if r.suspended == nil {
		r.suspended = map[string]string{}
		for k, v := range r.Set.suspended {
			r.suspended[k] = v
		}
	}
	prev := r.suspended[source]
	if msg == "" {
		delete(r.suspended, source)
	} else {
		r.suspended[source] = msg
	}
	r.mu.Unlock()
	if r.Warn == nil || prev == msg {
		return
	}
	if msg == "" {
		r.Warn("project hooks in " + source + " are trusted again and run")
		return
	}
	r.Warn(msg)
}

func (r *Runner) log(typ string, data any) {
	if r.Log != nil {
		_ = r.Log(typ, data)
	}
}

// answer is the JSON a hook may print on stdout.
type answer struct {
	Continue           *bool  `json:"continue"`
	StopReason         string `json:"stopReason"`
	Decision           string `json:"decision"`
	Reason             string `json:"reason"`
	PermissionDecision string `json:"permissionDecision"`
	AdditionalContext  string `json:"additionalContext"`
	HookSpecific       *struct {
		PermissionDecision       string          `json:"permissionDecision"`
		PermissionDecisionReason string          `json:"permissionDecisionReason"`
		AdditionalContext        string          `json:"additionalContext"`
		UpdatedInput             json.RawMessage `json:"updatedInput"`
		Decision                 *struct {
			Behavior string `json:"behavior"`
			Message  string `json:"message"`
		} `json:"decision"`
	} `json:"hookSpecificOutput"`
}

// interpret applies Claude Code's rules to one hook run and merges it
// into out: exit 2 blocks with stderr as the reason; other non-zero codes
// are non-blocking errors; exit 0 may answer with JSON on stdout, or (for
// SessionStart and UserPromptSubmit) plain text that becomes context.
func interpret(ev Event, h Hook, x ExecResult, out *Outcome) Result {
	res := Result{Event: ev, Matcher: h.Matcher, Command: h.Command, ExitCode: x.ExitCode,
		DurationMs: x.Duration.Milliseconds(), Stderr: excerpt(x.Stderr), TimedOut: x.TimedOut, Cancelled: x.Cancelled}
	switch {
	case x.Err != nil:
		res.Error = x.Err.Error()
		return res
	case x.TimedOut:
		res.Error = "timed out after " + h.Timeout.String()
		return res
	case x.Cancelled:
		res.Error = "cancelled"
		return res
	case x.ExitCode == 2:
		reason := strings.TrimSpace(x.Stderr)
		if reason == "" {
			reason = "blocked by " + string(ev) + " hook"
		}
		res.Decision, res.Reason = DecisionBlock, reason
		if ev == PreToolUse || ev == PermissionRequest {
			res.Decision = DecisionDeny
		}
		merge(out, res.Decision, reason)
		return res
	case x.ExitCode != 0:
		res.Error = "non-blocking error (exit code " + itoa(x.ExitCode) + ")"
		return res
	}
	body := bytes.TrimSpace(x.Stdout)
	if len(body) == 0 {
		return res
	}
	if body[0] != '{' {
		if ev == SessionStart || ev == UserPromptSubmit {
			out.Context = append(out.Context, string(body))
		}
		return res
	}
	var a answer
	if err := json.Unmarshal(body, &a); err != nil {
		res.Error = "stdout is not valid JSON: " + err.Error()
		return res
	}
	if a.Continue != nil && !*a.Continue {
		out.Stop = true
		if out.StopReason == "" {
			out.StopReason = a.StopReason
		}
	}
	dec, reason := strings.ToLower(a.Decision), a.Reason
	switch dec {
	case "approve":
		dec = DecisionAllow
	case "block":
		if ev == PreToolUse || ev == PermissionRequest {
			dec = DecisionDeny
		} else {
			dec = DecisionBlock
		}
	case DecisionAllow, DecisionDeny, DecisionAsk:
	default:
		dec = ""
	}
	if a.PermissionDecision != "" {
		dec = strings.ToLower(a.PermissionDecision)
	}
	if hs := a.HookSpecific; hs != nil {
		// The hook-specific answer overrides the legacy decision.
		if hs.PermissionDecision != "" {
			dec, reason = strings.ToLower(hs.PermissionDecision), hs.PermissionDecisionReason
		}
		if hs.Decision != nil && hs.Decision.Behavior != "" {
			dec, reason = strings.ToLower(hs.Decision.Behavior), hs.Decision.Message
		}
		if hs.AdditionalContext != "" {
			out.Context = append(out.Context, hs.AdditionalContext)
		}
		res.UpdatedInputIgnored = len(hs.UpdatedInput) > 0 && string(hs.UpdatedInput) != "null"
	}
	if a.AdditionalContext != "" {
		out.Context = append(out.Context, a.AdditionalContext)
	}
	if rank(dec) == 0 {
		dec = ""
	}
	res.Decision, res.Reason = dec, reason
	if dec != "" {
		merge(out, dec, reason)
	}
	return res
}

// merge folds one decision into out: the stronger one wins; reasons of
// equal decisions are joined with blank lines.
func merge(out *Outcome, dec, reason string) {
	switch {
	case rank(dec) > rank(out.Decision):
		out.Decision, out.Reason = dec, reason
	case rank(dec) == rank(out.Decision) && reason != "":
		if out.Reason != "" {
			out.Reason += "\n\n"
		}
		out.Reason += reason
	}
}

func excerpt(s string) string {
	s = strings.TrimSpace(s)
	if len(s) <= stderrExcerpt {
		return s
	}
	cut := stderrExcerpt
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

func itoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}
