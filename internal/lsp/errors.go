package lsp

// Stable error codes of the lsp tool (stored in tool/result.error.code).
const (
	// CodeUnavailable: no server is configured for the file's extension,
	// or the configured one could not be started or died.
	CodeUnavailable = "LSP_UNAVAILABLE"
	// CodeInvalidPosition: the line or character is not in the file.
	CodeInvalidPosition = "LSP_INVALID_POSITION"
	// CodeTimeout: the server did not start or answer in time.
	CodeTimeout = "LSP_TIMEOUT"
	// CodeOutsideWorkspace: the file is not under the session workspace.
	CodeOutsideWorkspace = "LSP_OUTSIDE_WORKSPACE"
	// CodeRequestFailed: the server answered the request with an error.
	CodeRequestFailed = "LSP_REQUEST_FAILED"
	// CodeFile: the file cannot be read (missing, a directory, too big).
	CodeFile = "LSP_FILE"
)

// Error is a failure with a stable code; Message is meant for the model.
type Error struct {
	Code    string
	Message string
	Err     error
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

// Unwrap returns the underlying cause.
func (e *Error) Unwrap() error { return e.Err }

func errorf(code string, err error, msg string) *Error {
	return &Error{Code: code, Message: msg, Err: err}
}
