package mcp

import (
	"errors"
	"fmt"
)

// Stable error codes of MCP calls and servers.
const (
	// CodeTimeout: the server did not answer a call within tool_timeout
	// (the call was cancelled on the server).
	CodeTimeout = "MCP_TIMEOUT"
	// CodeDisconnected: the server is not connected (it exited, crashed,
	// or is reconnecting).
	CodeDisconnected = "MCP_DISCONNECTED"
	// CodeToolError: the tool reported a failure (isError).
	CodeToolError = "MCP_TOOL_ERROR"
	// CodeSchema: structured content does not match the tool's output
	// schema.
	CodeSchema = "MCP_SCHEMA"
	// CodeProtocol: the server answered with a JSON-RPC error.
	CodeProtocol = "MCP_PROTOCOL"
	// CodeStart: the server could not be started or initialised.
	CodeStart = "MCP_START"
	// CodeUnknown: no such server, tool or prompt.
	CodeUnknown = "MCP_UNKNOWN"
)

// Error is a failure with a stable code, naming the server.
type Error struct {
	Code   string
	Server string
	Err    error
}

func (e *Error) Error() string {
	return fmt.Sprintf("%s: mcp server %s: %v", e.Code, e.Server, e.Err)
}

func (e *Error) Unwrap() error { return e.Err }

// CodeOf returns the code of an *Error in err's chain, or "".
func CodeOf(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

func errorf(code, server, format string, args ...any) *Error {
	return &Error{Code: code, Server: server, Err: fmt.Errorf(format, args...)}
}
