package llm

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Code is a stable machine code for a model-call failure.
type Code string

// Failure codes.
const (
	CodeAuth                  Code = "AUTH"
	CodeQuota                 Code = "QUOTA"
	CodeRateLimit             Code = "RATE_LIMIT"
	CodeContextWindowExceeded Code = "CONTEXT_WINDOW_EXCEEDED"
	CodeInvalidRequest        Code = "INVALID_REQUEST"
	CodeServer                Code = "SERVER"
	CodeTransport             Code = "TRANSPORT"
	CodeTimeout               Code = "TIMEOUT"
	CodeStreamClosed          Code = "STREAM_CLOSED"
	CodeMalformedResponse     Code = "MALFORMED_RESPONSE"
	CodeEmptyResponse         Code = "EMPTY_RESPONSE"
	CodeMissingCredential     Code = "MISSING_CREDENTIAL"
	CodeAborted               Code = "ABORTED"
	// CodePromptTooLarge refuses input, before any request, that cannot
	// fit the model's context window (see CheckPromptSize).
	CodePromptTooLarge Code = "PROMPT_TOO_LARGE"
	CodeUnknown        Code = "UNKNOWN"
)

// Failure is a model-call failure. It is the only error type adapters
// return, so callers branch on Code.
type Failure struct {
	Code    Code   `json:"code"`
	Message string `json:"message"`
	// Status is the HTTP status, when the provider answered one.
	Status int `json:"status,omitempty"`
	// RequestID is the provider's request id header, when present.
	RequestID string `json:"requestId,omitempty"`
	// RetryAfterMs is the provider's Retry-After, in milliseconds.
	RetryAfterMs int64 `json:"retryAfterMs,omitempty"`
	// EstimatedTokens and ContextWindow are the sizes behind a
	// PROMPT_TOO_LARGE refusal: the estimated request and the window.
	EstimatedTokens int `json:"estimatedTokens,omitempty"`
	ContextWindow   int `json:"contextWindow,omitempty"`
}

// Error implements error.
func (f *Failure) Error() string {
	s := string(f.Code) + ": " + f.Message
	if f.Status != 0 {
		s += fmt.Sprintf(" (HTTP %d)", f.Status)
	}
	if f.RequestID != "" {
		s += " [request " + f.RequestID + "]"
	}
	return s
}

// RetryAfter returns the provider's requested delay.
func (f *Failure) RetryAfter() time.Duration {
	return time.Duration(f.RetryAfterMs) * time.Millisecond
}

// AsFailure converts any error to a *Failure: a wrapped Failure is
// returned as is, context cancellation becomes ABORTED, a deadline becomes
// TIMEOUT and anything else UNKNOWN.
func AsFailure(err error) *Failure {
	if err == nil {
		return nil
	}
	var f *Failure
	if errors.As(err, &f) {
		return f
	}
	switch {
	case errors.Is(err, context.Canceled):
		return &Failure{Code: CodeAborted, Message: err.Error()}
	case errors.Is(err, context.DeadlineExceeded):
		return &Failure{Code: CodeTimeout, Message: err.Error()}
	}
	return &Failure{Code: CodeUnknown, Message: err.Error()}
}

// CodeForStatus maps an HTTP status to a failure code. Providers refine
// the result using the error body (quota and context-window messages).
func CodeForStatus(status int) Code {
	switch {
	case status == 401 || status == 403:
		return CodeAuth
	case status == 402:
		return CodeQuota
	case status == 429:
		return CodeRateLimit
	case status == 400 || status == 404 || status == 413 || status == 422:
		return CodeInvalidRequest
	case status == 408 || status == 504:
		return CodeTimeout
	case status >= 500:
		return CodeServer
	}
	return Code(fmt.Sprintf("HTTP_%d", status))
}
