// Package tool is the tool seam: definitions, a scoped registry and the
// per-call execution pipeline every tool call goes through.
//
// Pipeline order for one call: arguments parsed once (invalid JSON →
// INVALID_ARGS) → tools/pre-execute middleware (allow, deny, cancel, ask;
// ask goes to the [Approver] and only allowed-once proceeds) → guards
// (deny-only) → tools/execute wrappers → body → ProjectContent →
// tools/post-execute (accept, replace, block) → FinalizeContent →
// tools/result observers. No tool failure is ever returned as a Go error:
// [Pipeline.Run] always produces a [Result].
package tool

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/dsh-dev/dsh/internal/llm"
)

// Stable tool error codes.
const (
	CodeUnknownTool           = "UNKNOWN_TOOL"
	CodeInvalidArgs           = "INVALID_ARGS"
	CodeTimeout               = "TOOL_TIMEOUT"
	CodeAborted               = "TOOL_ABORTED"
	CodeAbortedBeforeDispatch = "ABORTED_BEFORE_DISPATCH"
	CodeDenied                = "TOOL_DENIED"
	CodeBlocked               = "TOOL_BLOCKED"
	CodeFailed                = "TOOL_FAILED"
)

// Definition is a registered tool. Only Name, Description and Parameters
// ever reach the model.
type Definition struct {
	Name        string
	Description string
	// Parameters is the JSON Schema of the arguments object.
	Parameters json.RawMessage
	// ConcurrencySafe reports whether a call with these arguments may
	// overlap other concurrency-safe calls. Nil means never.
	ConcurrencySafe func(args json.RawMessage) bool
	// Timeout bounds the body: when it passes, the body's context ends
	// and the call ends with TOOL_TIMEOUT, even if the body ignores its
	// context. Zero means the pipeline's default (DefaultTimeout); a tool
	// with its own, longer limit (bash's timeout_ms, a delegation, a
	// wait) declares one above it. Pipeline.SetToolTimeout overrides it.
	Timeout time.Duration
	// Execute runs the body. A returned error becomes an isError result;
	// an *Error keeps its code.
	Execute func(ctx context.Context, c *Call) (Result, error)
	// ProjectContent optionally replaces the content before post-execute.
	ProjectContent func(c *Call, r Result) []llm.Block
	// FinalizeContent optionally transforms the final model-facing content;
	// it runs exactly once for every outcome.
	FinalizeContent func(c *Call, r Result) []llm.Block
}

// Schema returns the model-facing part of the definition.
func (d *Definition) Schema() llm.ToolSchema {
	return llm.ToolSchema{Name: d.Name, Description: d.Description, Parameters: d.Parameters}
}

// Call is one tool invocation as it moves through the pipeline. Its
// identity fields are set by the agent loop and must not be changed.
type Call struct {
	ID   string
	Name string
	// RawArguments is the exact string the model sent.
	RawArguments string
	// Arguments is RawArguments parsed once ("" becomes {}).
	Arguments json.RawMessage
	Turn      int
	Step      int
	SessionID string
	// Scope is the agent scope the call runs in ("" is global only).
	Scope string
	// Cwd is the session working directory.
	Cwd string
	// Emit appends a tool-owned event to the session log (may be nil).
	Emit func(typ string, data any) error
	// Flush makes every logged event durable; the pipeline calls it
	// before the body starts (may be nil).
	Flush func(ctx context.Context) error
}

// Result is the outcome of a call. Only Content, IsError, Error and Meta
// are logged.
type Result struct {
	Content []llm.Block
	IsError bool
	Error   *Error
	Meta    json.RawMessage
	// ConcludesTurn ends the turn after this step's results.
	ConcludesTurn bool
	// AdditionalContexts are staged into the next-step inbox after the
	// whole batch of results is committed.
	AdditionalContexts []llm.Message
}

// Text returns a successful text result.
func Text(s string) Result { return Result{Content: []llm.Block{llm.TextBlock(s)}} }

// Error is a structured tool failure. Message is model-facing; Reason is
// user-facing detail kept out of model content.
type Error struct {
	Name    string `json:"name"`
	Code    string `json:"code"`
	Reason  string `json:"reason,omitempty"`
	Message string `json:"-"`
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

// Errorf returns an *Error with the given code and model-facing message.
func Errorf(code, format string, args ...any) *Error {
	return &Error{Name: "ToolError", Code: code, Message: fmt.Sprintf(format, args...)}
}

// Failure returns an isError result for err, keeping an *Error's code.
func Failure(err error) Result {
	te, ok := err.(*Error)
	if !ok {
		te = &Error{Name: "ToolError", Code: CodeFailed, Message: err.Error()}
	}
	return Result{
		Content: []llm.Block{llm.TextBlock("Error: " + te.Message)},
		IsError: true,
		Error:   te,
	}
}

// DecisionKind is the verdict of pre-execute policy.
type DecisionKind string

// Pre-execute decision kinds.
const (
	Allow  DecisionKind = "allow"
	Deny   DecisionKind = "deny"
	Cancel DecisionKind = "cancel"
	Ask    DecisionKind = "ask"
)

// Decision is a pre-execute verdict. Reason is model-facing for deny and
// the audited approval reason for ask; Info optionally gives a deny its
// structured identity.
type Decision struct {
	Kind   DecisionKind
	Reason string
	Info   *Error
}

// PreExecute is tools/pre-execute middleware. It returns a decision or
// calls next for the rest of the chain (whose terminal default is allow).
// It cannot rewrite arguments: they are already logged.
type PreExecute func(ctx context.Context, c *Call, next func(context.Context) Decision) Decision

// Guard is a deny-only check after pre-execute: a non-empty string denies
// with that reason.
type Guard func(c *Call) string

// ExecuteWrapper is tools/execute middleware around dispatch (timeouts,
// metrics). It may replace ctx for next.
type ExecuteWrapper func(ctx context.Context, c *Call, next func(context.Context) (Result, error)) (Result, error)

// PostKind is the verdict of post-execute policy.
type PostKind string

// Post-execute decision kinds.
const (
	Accept PostKind = "accept"
	Block  PostKind = "block"
)

// PostDecision is a post-execute verdict: accept (optionally replacing the
// content) or block, which turns the result into an error carrying
// Feedback.
type PostDecision struct {
	Kind     PostKind
	Content  []llm.Block
	Feedback []llm.Block
}

// PostExecute is tools/post-execute middleware, run in registration order.
type PostExecute func(ctx context.Context, c *Call, r Result) PostDecision

// Observer sees every final result (tools/result).
type Observer func(c *Call, r Result)

// ApprovalOutcome is an approval answer.
type ApprovalOutcome string

// Approval outcomes; only AllowedOnce lets a call proceed.
const (
	AllowedOnce ApprovalOutcome = "allowed-once"
	Rejected    ApprovalOutcome = "rejected"
	Cancelled   ApprovalOutcome = "cancelled"
	Unavailable ApprovalOutcome = "unavailable"
)

// ApprovalRequest is what an approver is asked.
type ApprovalRequest struct {
	CallID    string
	ToolName  string
	Arguments json.RawMessage
	Reason    string
	Cwd       string
}

// Approver answers ask decisions.
type Approver interface {
	Approve(ctx context.Context, req ApprovalRequest) (ApprovalOutcome, error)
}

// ApprovalDecision is an approval answer together with who gave it and
// why, so that a refusal tells the model who refused (a user, an
// automatic reviewer, a policy) rather than blaming the user.
type ApprovalDecision struct {
	Outcome ApprovalOutcome
	// By names who decided in words the model reads ("the user", "the
	// automatic reviewer", "the approval policy"); "" means the user.
	By string
	// Reason is why, when the decider gave one.
	Reason string
}

// DecidingApprover is an Approver that can also say who decided and
// why; the pipeline prefers Decide when the approver has it.
type DecidingApprover interface {
	Approver
	Decide(ctx context.Context, req ApprovalRequest) (ApprovalDecision, error)
}
