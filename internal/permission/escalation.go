package permission

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"

	"github.com/dsh-dev/dsh/internal/sandbox"
	"github.com/dsh-dev/dsh/internal/session"
	"github.com/dsh-dev/dsh/internal/tool"
	"github.com/dsh-dev/dsh/internal/tools/bash"
)

// Grant is a widened sandbox policy for one call.
type Grant struct {
	// Mode is the wider mode ("" keeps the session's mode).
	Mode sandbox.Mode
	// Network turns network access on.
	Network bool
}

// Grants holds the escalations offered for approval, keyed by call id.
// The escalation middleware offers a grant when it asks; the bash
// confiner takes it when the call runs, and applies it only if the
// call's approval is on the log. An offer whose call was not approved is
// never taken; call ids are not reused within a session, so it is inert.
type Grants struct {
	mu     sync.Mutex
	offers map[string]Grant // guarded by mu
}

// NewGrants returns an empty store.
func NewGrants() *Grants { return &Grants{offers: map[string]Grant{}} }

func (g *Grants) offer(callID string, gr Grant) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.offers[callID] = gr
}

// take removes and returns the offer for callID.
func (g *Grants) take(callID string) (Grant, bool) {
	if g == nil {
		return Grant{}, false
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	gr, ok := g.offers[callID]
	delete(g.offers, callID)
	return gr, ok
}

// Escalation is tools/pre-execute middleware for bash calls that carry
// sandbox_permissions. Such a call goes to approval only when the
// session's mode is strictly narrower than requested, the most recent
// run of the identical command in this session was refused by the
// sandbox (its result meta has sandboxDenied), and that denial has not
// been escalated before; otherwise it is refused with
// ESCALATION_REFUSED and a message saying why. The rest of the chain
// still runs first, so a rule or hook that denies the call wins.
type Escalation struct {
	Log      *session.Log
	Defaults Defaults
	Grants   *Grants
}

// escalationArgs are the fields of a bash call the middleware reads.
type escalationArgs struct {
	Command            string `json:"command"`
	SandboxPermissions string `json:"sandbox_permissions"`
	Justification      string `json:"justification"`
}

// PreExecute implements tool.PreExecute.
func (e *Escalation) PreExecute(ctx context.Context, c *tool.Call, next func(context.Context) tool.Decision) tool.Decision {
	if c.Name != bash.Name {
		return next(ctx)
	}
	var a escalationArgs
	if json.Unmarshal(c.Arguments, &a) != nil || a.SandboxPermissions == "" {
		return next(ctx) // the tool reports malformed arguments itself
	}
	grant, why := e.check(ctx, c, a)
	if why != "" {
		return tool.Decision{Kind: tool.Deny, Reason: "sandbox escalation refused: " + why,
			Info: &tool.Error{Name: "PermissionError", Code: CodeEscalationRefused}}
	}
	d := next(ctx)
	if d.Kind == tool.Deny || d.Kind == tool.Cancel {
		return d
	}
	reason := fmt.Sprintf("sandbox escalation to %s: %s", a.SandboxPermissions, strings.TrimSpace(a.Justification))
	if d.Kind == tool.Ask && d.Reason != "" {
		reason += "; " + d.Reason
	}
	e.Grants.offer(c.ID, grant)
	return tool.Decision{Kind: tool.Ask, Reason: reason}
}

// check returns the grant to offer, or why the escalation is refused.
func (e *Escalation) check(ctx context.Context, c *tool.Call, a escalationArgs) (Grant, string) {
	if strings.TrimSpace(a.Justification) == "" {
		return Grant{}, "a justification is required with sandbox_permissions"
	}
	mode := e.Defaults.Current(e.Log).Mode
	var g Grant
	switch a.SandboxPermissions {
	case bash.EscalateNetwork:
		if mode == sandbox.DangerFullAccess {
			return Grant{}, "network access is already on in danger-full-access mode; run the command without sandbox_permissions"
		}
		g.Network = true
	case bash.EscalateWorkspaceWrite, bash.EscalateFullAccess:
		want := sandbox.Mode(a.SandboxPermissions)
		if want.Rank() <= mode.Rank() {
			return Grant{}, fmt.Sprintf("the session's sandbox mode is %s, which already allows what %s allows; "+
				"run the command without sandbox_permissions", mode, want)
		}
		g.Mode = want
	default:
		return Grant{}, fmt.Sprintf("sandbox_permissions must be %s, %s or %s",
			bash.EscalateWorkspaceWrite, bash.EscalateFullAccess, bash.EscalateNetwork)
	}
	if why := e.priorDenial(ctx, c.ID, a.Command); why != "" {
		return Grant{}, why
	}
	return g, ""
}

// bashRun is one bash call of the session as the log tells it.
type bashRun struct {
	callID    string
	command   string
	escalated bool // carried sandbox_permissions
	asked     bool // went to approval
	done      bool // has a result
	denied    bool // the result says the sandbox refused it
}

// priorDenial checks that the latest run of command was a sandbox denial
// that no run has escalated since. Escalation attempts refused before
// they were asked (a bad justification, a rule) do not use up the denial.
func (e *Escalation) priorDenial(ctx context.Context, callID, command string) string {
	// Tool calls and results may be released from memory: read them
	// back (an escalation is rare; the read is one pass over the log).
	var runs []bashRun
	open := map[string]int{}
	if err := e.Log.ScanTypes(ctx, 0, bashRunTypes, func(ev session.Event) error {
		runs = foldBashRun(runs, open, ev)
		return nil
	}); err != nil {
		return fmt.Sprintf("the session's earlier bash calls could not be read: %v", err)
	}
	// The current call is logged (tool/call) but has no result yet.
	for i := len(runs) - 1; i >= 0; i-- {
		if runs[i].callID == callID && !runs[i].done {
			runs = append(runs[:i], runs[i+1:]...)
			break
		}
	}
	const retry = " Escalate only a command whose output ended with a [sandbox: …] line, by retrying the identical command."
	for i := len(runs) - 1; i >= 0; i-- {
		r := runs[i]
		switch {
		case r.command != command:
		case r.escalated && r.asked:
			return fmt.Sprintf("the sandbox denial of this command was already escalated once (call %s); each denial may be escalated only once. "+
				"Work within the sandbox or ask the user.", r.callID)
		case r.escalated:
			// Refused before approval: it did not use up the denial.
		case !r.done:
			return "the command is still running in another call."
		case r.denied:
			return ""
		default:
			return fmt.Sprintf("the last run of this exact command (call %s) was not refused by the sandbox, so there is nothing to escalate."+retry, r.callID)
		}
	}
	return "no earlier run of this exact command in this session was refused by the sandbox. Run it without sandbox_permissions first." + retry
}

// bashRunTypes are the event types foldBashRun reads.
var bashRunTypes = []string{session.TypeToolCall, session.TypeApprovalAsked, session.TypeToolResult}

// foldBashRun folds one event into the session's bash calls, in order;
// open maps a call id to the index of its run awaiting a result.
func foldBashRun(runs []bashRun, open map[string]int, ev session.Event) []bashRun {
	switch ev.Type {
	case session.TypeToolCall:
		var tc session.ToolCall
		if ev.Decode(&tc) != nil || tc.Name != bash.Name {
			return runs
		}
		var a escalationArgs
		_ = json.Unmarshal([]byte(tc.Arguments), &a)
		open[tc.CallID] = len(runs)
		runs = append(runs, bashRun{callID: tc.CallID, command: a.Command, escalated: a.SandboxPermissions != ""})
	case session.TypeApprovalAsked:
		var p ApprovalAsked
		if ev.Decode(&p) == nil {
			if i, ok := open[p.CallID]; ok {
				runs[i].asked = true
			}
		}
	case session.TypeToolResult:
		var tr session.ToolResult
		if ev.Decode(&tr) != nil {
			return runs
		}
		i, ok := open[tr.CallID]
		if !ok {
			return runs
		}
		delete(open, tr.CallID)
		runs[i].done = true
		var m struct {
			SandboxDenied bool `json:"sandboxDenied"`
		}
		runs[i].denied = len(tr.Meta) > 0 && json.Unmarshal(tr.Meta, &m) == nil && m.SandboxDenied
	}
	return runs
}
