package host

import (
	"errors"
	"fmt"

	"github.com/dsh-dev/dsh/internal/app"
	"github.com/dsh-dev/dsh/internal/store"
	"github.com/dsh-dev/dsh/internal/tools/question"
)

// Stable error codes of the host; the server maps them to HTTP statuses.
const (
	CodeSessionNotFound    = "SESSION_NOT_FOUND"
	CodeSessionAmbiguous   = "SESSION_AMBIGUOUS"
	CodeSessionBusy        = "SESSION_BUSY"
	CodeApprovalNotPending = "APPROVAL_NOT_PENDING"
	CodeApprovalNotFound   = "APPROVAL_NOT_FOUND"
	// Questions (ask_user_question, exit_plan_mode): the question was
	// answered or cancelled already, was never asked, or the answer does
	// not fit it.
	CodeQuestionNotPending    = "QUESTION_NOT_PENDING"
	CodeQuestionNotFound      = "QUESTION_NOT_FOUND"
	CodeQuestionInvalidAnswer = question.CodeInvalidAnswer
	CodeInvalidArgument       = "INVALID_ARGUMENT"
	CodeHostClosed            = "HOST_CLOSED"
	CodeWorkspaceNotFound     = "WORKSPACE_NOT_FOUND"
	CodeWorkspaceInvalidPath  = "WORKSPACE_INVALID_PATH"
	// CodeFeedOverflow ends a feed subscriber that fell too far behind.
	CodeFeedOverflow = "FEED_OVERFLOW"
	// CodeInternal is any other failure (a store error, a log write).
	CodeInternal = "INTERNAL"
)

// Error is a host error with a stable machine code. Its text is the
// wrapped error's when there is one, so a driver that prints it (dsh run)
// says exactly what the failing layer said.
type Error struct {
	Code    string
	Message string
	Err     error
}

func (e *Error) Error() string {
	if e.Message != "" {
		return e.Message
	}
	if e.Err != nil {
		return e.Err.Error()
	}
	return e.Code
}

// Unwrap returns the cause, so errors.As still finds a *store.BusyError
// or an *app.ConfigError below a host error.
func (e *Error) Unwrap() error { return e.Err }

// ErrorCode returns the code of a *host.Error in err's chain, or
// CodeInternal.
func ErrorCode(err error) string {
	var he *Error
	if errors.As(err, &he) {
		return he.Code
	}
	return CodeInternal
}

func errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// classify wraps an error from the store or the composition root in a
// *Error with the code that fits it; nil stays nil and a *Error is kept.
func classify(err error) error {
	if err == nil {
		return nil
	}
	var he *Error
	if errors.As(err, &he) {
		return err
	}
	var (
		ide  *store.IDError
		busy *store.BusyError
		ce   *app.ConfigError
	)
	switch {
	case errors.As(err, &busy):
		return &Error{Code: CodeSessionBusy, Err: err}
	case errors.As(err, &ide):
		return &Error{Code: ide.Code(), Err: err}
	case errors.Is(err, store.ErrNotFound):
		return &Error{Code: CodeSessionNotFound, Err: err}
	case errors.As(err, &ce):
		return &Error{Code: CodeInvalidArgument, Err: err}
	}
	return &Error{Code: CodeInternal, Err: err}
}

// ErrHostClosed is returned by every call after Close.
var ErrHostClosed = &Error{Code: CodeHostClosed, Message: "the session host is closed"}
