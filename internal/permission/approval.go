package permission

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"

	"github.com/google/uuid"

	"github.com/dsh-dev/dsh/internal/session"
	"github.com/dsh-dev/dsh/internal/tool"
	"github.com/dsh-dev/dsh/internal/tools/bash"
	termtools "github.com/dsh-dev/dsh/internal/tools/terminal"
)

// Answerer names used in approval/decided.
const (
	AnswererPolicy     = "policy"
	AnswererNone       = "none"
	AnswererTerminal   = "terminal"
	AnswererAutoReview = "auto-review"
	// AnswererSessionGrant answers a question that an earlier "allow this
	// exact command for the rest of the session" covers.
	AnswererSessionGrant = "session-grant"
)

// Deciders recorded in approval/decided's by: whose judgement the
// outcome is.
const (
	DecidedByUser     = "user"
	DecidedByReviewer = "reviewer"
	DecidedByPolicy   = "policy"
)

// decidedBy maps an answerer to its decider. A session grant is the
// user's judgement given in advance; an unknown answerer is taken for a
// human one.
func decidedBy(answerer string) string {
	switch answerer {
	case AnswererAutoReview:
		return DecidedByReviewer
	case AnswererPolicy, AnswererNone:
		return DecidedByPolicy
	}
	return DecidedByUser
}

// byWords names a decider for the model.
func byWords(by string) string {
	switch by {
	case DecidedByReviewer:
		return "the automatic reviewer"
	case DecidedByPolicy:
		return "the approval policy"
	}
	return "the user"
}

// Question is one approval request as an answerer sees it.
type Question struct {
	// ID is the approval id shared by approval/asked and approval/decided.
	ID       string
	ToolName string
	CallID   string
	// Arguments are the call's arguments, exactly as logged.
	Arguments json.RawMessage
	// Reason is why the call needs approval (a justification, a rule).
	Reason string
	// Command is the exact shell command of a bash call ("" otherwise).
	Command string
	// Cwd is the directory the call runs in.
	Cwd string
	// Note is extra context for a human, e.g. the auto reviewer's
	// medium-risk rating when it hands the question on.
	Note string
}

// Verdict is an answer.
type Verdict struct {
	Outcome tool.ApprovalOutcome
	// Answerer names who decided; "" means the answerer's Name.
	Answerer string
	Risk     string
	Reason   string
	// Feedback is what a human who rejected the call wants the model to
	// know ("use the staging database instead"); with outcome rejected it
	// reaches the tool result after "rejected by the user: ".
	Feedback string
	// ForSession asks, with outcome allowed-once, that the same exact
	// bash command be allowed for the rest of the session. It is honoured
	// only from a human answerer and only for bash calls.
	ForSession bool
}

// Answerer decides approval questions. Answer must honour ctx; an error
// becomes outcome unavailable (or cancelled when ctx ended).
type Answerer interface {
	Name() string
	Answer(ctx context.Context, q Question) (Verdict, error)
}

// Service is the approval service, a tool.Approver. It logs every
// question (approval/asked) and its decision (approval/decided, same id)
// and picks the answerer from the session's state: approval policy never
// → unavailable; preset auto → the reviewer (which hands medium risk to
// Human); otherwise Human, or unavailable when there is none. Under
// never the outcome is unavailable rather than rejected (as DSH has it)
// because nobody rejected the call: the model is told that approval is
// unavailable, i.e. to work within the sandbox, not that a user refused.
type Service struct {
	Log *session.Log
	// State returns the session's current permission state. Required.
	State func() State
	// Human answers asks under policy ask and medium-risk reviews; nil
	// means no human is attached (headless).
	Human Answerer
	// Reviewer answers every ask under preset auto; nil falls back to
	// Human.
	Reviewer Answerer
	// NewID mints approval ids; nil uses random UUIDs.
	NewID func() string
}

var _ tool.Approver = (*Service)(nil)

// Approve implements tool.Approver: Decide's outcome.
func (s *Service) Approve(ctx context.Context, req tool.ApprovalRequest) (tool.ApprovalOutcome, error) {
	d, err := s.Decide(ctx, req)
	return d.Outcome, err
}

// Decide implements tool.DecidingApprover. Only allowed-once lets the
// call run; a cancelled ctx is reported as cancelled together with ctx's
// error so that the pipeline reports the call as aborted rather than
// rejected. A refusal names who refused (the user, the automatic
// reviewer, the policy) and, except for a plain user denial, why.
func (s *Service) Decide(ctx context.Context, req tool.ApprovalRequest) (tool.ApprovalDecision, error) {
	newID := s.NewID
	if newID == nil {
		newID = uuid.NewString
	}
	q := Question{
		ID: newID(), ToolName: req.ToolName, CallID: req.CallID, Arguments: req.Arguments,
		Reason: req.Reason, Cwd: req.Cwd,
	}
	q.Command, q.Cwd = commandOf(req.ToolName, req.Arguments, req.Cwd)
	unavailable := tool.ApprovalDecision{Outcome: tool.Unavailable, By: byWords(DecidedByPolicy), Reason: "the approval could not be logged"}
	if _, err := s.Log.Append(session.TypeApprovalAsked, ApprovalAsked{
		ID: q.ID, ToolName: q.ToolName, CallID: q.CallID, Reason: q.Reason, Command: q.Command, Cwd: q.Cwd,
	}); err != nil {
		// An ask that cannot be audited is not put to anyone.
		return unavailable, err
	}
	v, err := s.decide(ctx, q)
	by := decidedBy(v.Answerer)
	dec := ApprovalDecided{ID: q.ID, Outcome: v.Outcome, Answerer: v.Answerer, By: by, Risk: v.Risk, Reason: v.Reason}
	if v.ForSession {
		dec.Grant = &SessionGrant{ToolName: q.ToolName, Command: q.Command, Cwd: q.Cwd, SandboxPermissions: sandboxPermissionsOf(req.Arguments)}
	}
	if _, lerr := s.Log.Append(session.TypeApprovalDecided, dec); lerr != nil && err == nil {
		// The decision must be on the log before it takes effect (a
		// widened sandbox policy is only granted from a logged approval).
		return unavailable, lerr
	}
	out := tool.ApprovalDecision{Outcome: v.Outcome, By: byWords(by), Reason: v.Reason}
	if by == DecidedByReviewer && v.Risk != "" && v.Outcome == tool.Rejected {
		out.Reason = v.Risk + " risk: " + v.Reason
	}
	if by == DecidedByUser && v.Outcome == tool.Rejected && v.Risk == "" {
		out.Reason = v.Feedback // "denied by the user" says nothing more
	}
	return out, err
}

// decide picks the answerer and normalises its verdict.
func (s *Service) decide(ctx context.Context, q Question) (Verdict, error) {
	st := s.State()
	var a Answerer
	switch {
	case st.Approval == ApprovalNever:
		return Verdict{Outcome: tool.Unavailable, Answerer: AnswererPolicy, Reason: "approval policy is never"}, nil
	}
	if id, ok := s.granted(q); ok {
		return Verdict{Outcome: tool.AllowedOnce, Answerer: AnswererSessionGrant,
			Reason: "the user allowed this exact command for the rest of the session (approval " + id + ")"}, nil
	}
	switch {
	case st.AutoReview() && s.Reviewer != nil:
		a = s.Reviewer
	case s.Human != nil:
		a = s.Human
	default:
		return Verdict{Outcome: tool.Unavailable, Answerer: AnswererNone, Reason: "no one is available to answer"}, nil
	}
	v, err := a.Answer(ctx, q)
	if v.Answerer == "" {
		v.Answerer = a.Name()
	}
	switch {
	case ctx.Err() != nil:
		return Verdict{Outcome: tool.Cancelled, Answerer: v.Answerer, Reason: "the turn was cancelled"}, context.Cause(ctx)
	case err != nil:
		return Verdict{Outcome: tool.Unavailable, Answerer: v.Answerer, Reason: err.Error()}, nil
	}
	switch v.Outcome {
	case tool.AllowedOnce, tool.Rejected, tool.Cancelled, tool.Unavailable:
	default:
		// Fail closed on an answerer that returns garbage.
		v = Verdict{Outcome: tool.Rejected, Answerer: v.Answerer, Reason: "invalid answer " + string(v.Outcome)}
	}
	if v.ForSession && (v.Outcome != tool.AllowedOnce || q.Command == "" || decidedBy(v.Answerer) != DecidedByUser) {
		v.ForSession = false // only a human's yes to a bash command becomes a grant
	}
	return v, nil
}

// commandOf extracts a bash call's exact command and the directory it
// runs in (its workdir resolved against the session cwd).
//
// A terminal's input is a command too: for terminal_send the exact text
// typed (what runs in the shell or REPL), for terminal_open the command
// it starts (its type's program for a shell or REPL) and its cwd.
func commandOf(toolName string, args json.RawMessage, cwd string) (string, string) {
	switch toolName {
	case termtools.SendName:
		var a struct {
			Text string `json:"text"`
		}
		_ = json.Unmarshal(args, &a)
		return a.Text, cwd
	case termtools.OpenName:
		var a struct {
			Type    string `json:"type"`
			Command string `json:"command"`
			Cwd     string `json:"cwd"`
		}
		_ = json.Unmarshal(args, &a)
		if a.Command == "" {
			a.Command = a.Type + " terminal"
		}
		if a.Cwd != "" {
			if filepath.IsAbs(a.Cwd) {
				cwd = filepath.Clean(a.Cwd)
			} else {
				cwd = filepath.Join(cwd, a.Cwd)
			}
		}
		return a.Command, cwd
	}
	if toolName != bash.Name {
		return "", cwd
	}
	var a struct {
		Command string `json:"command"`
		Workdir string `json:"workdir"`
	}
	_ = json.Unmarshal(args, &a)
	if a.Workdir != "" {
		if filepath.IsAbs(a.Workdir) {
			cwd = filepath.Clean(a.Workdir)
		} else if a.Workdir != "~" && !strings.HasPrefix(a.Workdir, "~/") {
			cwd = filepath.Join(cwd, a.Workdir)
		} else {
			cwd = a.Workdir
		}
	}
	return a.Command, cwd
}
