package host

import (
	"context"
	"encoding/json"

	"github.com/dsh-dev/dsh/internal/permission"
	"github.com/dsh-dev/dsh/internal/session"
	"github.com/dsh-dev/dsh/internal/tool"
)

// Approval is a pending approval: a tool call of a live session waiting
// for someone to allow or reject it. ID is the approval id logged in the
// session's approval/asked and approval/decided events.
type Approval struct {
	ID        string          `json:"id"`
	SessionID string          `json:"sessionId"`
	ToolName  string          `json:"toolName"`
	CallID    string          `json:"callId"`
	Reason    string          `json:"reason,omitempty"`
	Command   string          `json:"command,omitempty"`
	Cwd       string          `json:"cwd,omitempty"`
	Note      string          `json:"note,omitempty"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
	AskedAt   int64           `json:"askedAt"`
}

// Answer decisions.
const (
	DecisionAllowOnce = "allow-once"
	DecisionReject    = "reject"
	// DecisionAllowSession allows the call and, for a bash command, the
	// same exact command for the rest of the session (a logged session
	// grant); other calls are allowed once.
	DecisionAllowSession = "allow-session"
)

// Answer answers a pending approval.
type Answer struct {
	Decision string `json:"decision"`
	// Feedback, with a rejection, is passed to the model with the
	// refusal, so it can change course.
	Feedback string `json:"feedback,omitempty"`
}

// Resolution outcomes published with approval/resolved.
const (
	OutcomeAllowedOnce = "allowed-once"
	OutcomeRejected    = "rejected"
	OutcomeCancelled   = "cancelled"
)

// pending is an approval waiting in the host's queue.
type pending struct {
	Approval
	answer chan Answer // buffered 1; the first answer is sent once
}

// answerer is the permission.Answerer of a session the host opened
// without a Config.Human: an ask becomes a pending approval in the host's
// queue until a client answers it or the ask's context ends (the turn was
// cancelled, the session disposed).
type answerer struct {
	h  *Host
	id string // the session's; set before its agent can run
}

// Name implements permission.Answerer: approvals the host's clients give
// are the user's.
func (a *answerer) Name() string { return "host" }

// Answer implements permission.Answerer.
func (a *answerer) Answer(ctx context.Context, q permission.Question) (permission.Verdict, error) {
	h := a.h
	p := &pending{answer: make(chan Answer, 1), Approval: Approval{
		ID: q.ID, SessionID: a.id, ToolName: q.ToolName, CallID: q.CallID, Reason: q.Reason,
		Command: q.Command, Cwd: q.Cwd, Note: q.Note, Arguments: q.Arguments, AskedAt: unixMilli(),
	}}
	h.mu.Lock()
	h.approvals[p.ID] = p
	e := h.live[a.id]
	h.mu.Unlock()
	ap := p.Approval
	h.announce(e, FeedEvent{Type: FeedApprovalPending, SessionID: a.id, Approval: &ap})

	var (
		v       permission.Verdict
		outcome string
	)
	ans, err := awaitAnswer(ctx, h, h.approvals, p.ID, p.answer)
	switch {
	case err != nil:
		v, outcome = permission.Verdict{Outcome: tool.Cancelled, Reason: "the turn was cancelled"}, OutcomeCancelled
	case ans.Decision == DecisionAllowOnce || ans.Decision == DecisionAllowSession:
		v, outcome = permission.Verdict{Outcome: tool.AllowedOnce, Reason: "allowed by the user",
			ForSession: ans.Decision == DecisionAllowSession}, OutcomeAllowedOnce
	default:
		v = permission.Verdict{Outcome: tool.Rejected, Reason: "denied by the user", Feedback: ans.Feedback}
		if ans.Feedback != "" {
			v.Reason = "denied by the user: " + ans.Feedback
		}
		outcome = OutcomeRejected
	}
	h.announce(e, FeedEvent{Type: FeedApprovalResolved, SessionID: a.id, ApprovalID: p.ID, Outcome: outcome})
	return v, err
}

// Approvals returns the pending approvals of session sessionID ("" for
// every session's), oldest first.
func (h *Host) Approvals(sessionID string) []Approval {
	return listPending(h, h.approvals, sessionID, func(p *pending) (Approval, pendingKey) {
		return p.Approval, pendingKey{p.SessionID, p.AskedAt, p.ID}
	})
}

// Answer answers pending approval approvalID of session sessionID. The
// first answer wins: a later one, or one for an approval that was
// cancelled, gets APPROVAL_NOT_PENDING; an id the session never asked
// gets APPROVAL_NOT_FOUND.
func (h *Host) Answer(ctx context.Context, sessionID, approvalID string, a Answer) error {
	switch a.Decision {
	case DecisionAllowOnce, DecisionAllowSession, DecisionReject:
	default:
		return errorf(CodeInvalidArgument, "decision %q: want %q, %q or %q", a.Decision, DecisionAllowOnce, DecisionAllowSession, DecisionReject)
	}
	if a.Decision != DecisionReject && a.Feedback != "" {
		return errorf(CodeInvalidArgument, "feedback goes with a rejection, not with %q", a.Decision)
	}
	full, err := h.resolve(ctx, sessionID)
	if err != nil {
		return err
	}
	return answerPending(ctx, h, h.approvals, approvalKind, full, approvalID,
		func(p *pending) string { return p.SessionID },
		func(p *pending) error { p.answer <- a; return nil },
		func(ev session.Event) bool {
			var p permission.ApprovalAsked
			return ev.Decode(&p) == nil && p.ID == approvalID
		})
}

// approvalKind names the approval queue in answerPending's errors.
var approvalKind = askKind{noun: "approval", notPending: CodeApprovalNotPending, notFound: CodeApprovalNotFound, eventType: session.TypeApprovalAsked}
