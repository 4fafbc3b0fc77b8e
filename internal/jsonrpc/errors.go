package jsonrpc

import (
	"encoding/json"
	"errors"
	"fmt"
)

// Standard JSON-RPC 2.0 error codes, plus the extensions used by the
// Codex app-server and ACP peers.
const (
	// CodeParseError means the peer could not parse the JSON it received.
	CodeParseError = -32700
	// CodeInvalidRequest means the message was not a valid request. The Codex
	// app-server also uses it for unknown methods and bad params.
	CodeInvalidRequest = -32600
	// CodeMethodNotFound means no handler exists for the method. Conn answers
	// server requests with it when Options.OnRequest is nil.
	CodeMethodNotFound = -32601
	// CodeInvalidParams means the params did not match the method.
	CodeInvalidParams = -32602
	// CodeInternalError means the handler failed unexpectedly (Conn uses it
	// when a handler panics or its result cannot be encoded).
	CodeInternalError = -32603
	// CodeServerOverloaded is the Codex app-server's retryable overload error.
	CodeServerOverloaded = -32001
	// CodeRequestCancelled is the ACP code for a request cancelled by
	// $/cancel_request.
	CodeRequestCancelled = -32800
)

// Error is a JSON-RPC error object. It is returned by Conn.Call when the
// peer replies with an error, and returned by an Options.OnRequest handler to
// answer a server request with an error.
type Error struct {
	// Code is the JSON-RPC error code, e.g. CodeMethodNotFound.
	Code int `json:"code"`
	// Message is the peer's short human-readable description.
	Message string `json:"message"`
	// Data is the optional structured detail, verbatim; nil when absent.
	Data json.RawMessage `json:"data,omitempty"`
}

// Error implements the error interface.
func (e *Error) Error() string {
	if len(e.Data) > 0 {
		return fmt.Sprintf("jsonrpc error %d: %s (data: %s)", e.Code, e.Message, e.Data)
	}
	return fmt.Sprintf("jsonrpc error %d: %s", e.Code, e.Message)
}

// ErrClosed is reported by Call and Notify once the connection has ended.
// When the end was caused by the read side (EOF, a malformed frame, an
// over-long line) the returned error wraps both ErrClosed and that cause.
var ErrClosed = errors.New("jsonrpc: connection closed")

// ErrLineTooLong is the cause (see Conn.Err) when an incoming line exceeds
// Options.MaxLine. It ends the connection.
var ErrLineTooLong = errors.New("jsonrpc: line too long")

// ProtocolError describes an incoming frame that violated the protocol. It
// is passed to Options.OnProtocolError. Only a line that is not JSON at all
// or is over-long (Fatal) ends the connection; other violations are reported
// and skipped.
type ProtocolError struct {
	// Reason says what was wrong with the frame.
	Reason string
	// Line is the offending frame, truncated to 256 bytes.
	Line string
	// Fatal is true when the error ended the connection.
	Fatal bool
	// Err is the underlying error, if any (e.g. a JSON syntax error).
	Err error
}

// Error implements the error interface.
func (e *ProtocolError) Error() string {
	s := "jsonrpc: protocol error: " + e.Reason
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	if e.Line != "" {
		s += fmt.Sprintf(" (line %q)", e.Line)
	}
	return s
}

// Unwrap returns the underlying error.
func (e *ProtocolError) Unwrap() error { return e.Err }

func newProtocolError(reason string, line []byte, err error) *ProtocolError {
	const max = 256
	l := line
	if len(l) > max {
		l = l[:max]
	}
	return &ProtocolError{Reason: reason, Line: string(l), Err: err}
}
