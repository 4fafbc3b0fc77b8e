package server

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
)

// Error codes the server itself produces. The host's and the workspace
// registry's codes pass through unchanged (statusOf maps them).
const (
	CodeUnauthorized     = "UNAUTHORIZED"
	CodeForbiddenHost    = "FORBIDDEN_HOST"
	CodeForbiddenOrigin  = "FORBIDDEN_ORIGIN"
	CodeCrossSite        = "CROSS_SITE"
	CodeUnsupportedMedia = "UNSUPPORTED_MEDIA_TYPE"
	CodeBodyTooLarge     = "BODY_TOO_LARGE"
	CodeInvalidJSON      = "INVALID_JSON"
	CodeInvalidArgument  = "INVALID_ARGUMENT"
	CodeNotFound         = "NOT_FOUND"
	CodeMethodNotAllowed = "METHOD_NOT_ALLOWED"
	CodeDirNotFound      = "DIRECTORY_NOT_FOUND"
	CodeNotADirectory    = "NOT_A_DIRECTORY"
	CodePermissionDenied = "PERMISSION_DENIED"
	CodeShuttingDown     = "SHUTTING_DOWN"
	CodeInternal         = "INTERNAL"
)

// statusOf is the HTTP status of every stable code, the server's own and
// those of the host and the workspace registry.
var statusOf = map[string]int{
	CodeUnauthorized:     http.StatusUnauthorized,
	CodeForbiddenHost:    http.StatusForbidden,
	CodeForbiddenOrigin:  http.StatusForbidden,
	CodeCrossSite:        http.StatusForbidden,
	CodeUnsupportedMedia: http.StatusUnsupportedMediaType,
	CodeBodyTooLarge:     http.StatusRequestEntityTooLarge,
	CodeInvalidJSON:      http.StatusBadRequest,
	CodeInvalidArgument:  http.StatusBadRequest,
	CodeNotFound:         http.StatusNotFound,
	CodeMethodNotAllowed: http.StatusMethodNotAllowed,
	CodeDirNotFound:      http.StatusNotFound,
	CodeNotADirectory:    http.StatusBadRequest,
	CodePermissionDenied: http.StatusForbidden,
	CodeShuttingDown:     http.StatusServiceUnavailable,
	CodeInternal:         http.StatusInternalServerError,

	// internal/host
	"SESSION_NOT_FOUND":       http.StatusNotFound,
	"SESSION_AMBIGUOUS":       http.StatusConflict,
	"SESSION_BUSY":            http.StatusConflict,
	"APPROVAL_NOT_PENDING":    http.StatusConflict,
	"APPROVAL_NOT_FOUND":      http.StatusNotFound,
	"HOST_CLOSED":             http.StatusServiceUnavailable,
	"QUEUE_ITEM_NOT_FOUND":    http.StatusNotFound,
	"QUESTION_NOT_PENDING":    http.StatusConflict,
	"QUESTION_NOT_FOUND":      http.StatusNotFound,
	"QUESTION_INVALID_ANSWER": http.StatusBadRequest,

	// internal/goal, through the host's SetGoal
	"GOAL_NOT_FOUND":          http.StatusNotFound,
	"GOAL_EXISTS":             http.StatusConflict,
	"GOAL_STALE_REVISION":     http.StatusConflict,
	"GOAL_INVALID_TRANSITION": http.StatusConflict,
	"GOAL_CAP_REACHED":        http.StatusConflict,
	"GOAL_INVALID_ARGUMENT":   http.StatusBadRequest,
	"GOAL_INVALID_ACTION":     http.StatusBadRequest,

	// internal/sessionquery
	"SEARCH_INVALID_QUERY":       http.StatusBadRequest,
	"SESSION_SEARCH_UNAVAILABLE": http.StatusNotImplemented,

	// internal/workspace
	"WORKSPACE_NOT_FOUND":     http.StatusNotFound,
	"WORKSPACE_INVALID_PATH":  http.StatusBadRequest,
	"WORKSPACE_MOVE_INVALID":  http.StatusBadRequest,
	"WORKSPACE_ATTACH_FAILED": http.StatusConflict,
	"WORKSPACE_AMBIGUOUS":     http.StatusConflict,
	"WORKSPACE_INVALID_TITLE": http.StatusBadRequest,
}

// apiError is an error with a stable code, as the API reports it.
type apiError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

func (e *apiError) Error() string { return e.Code + ": " + e.Message }

func newError(code, msg string) *apiError { return &apiError{Code: code, Message: msg} }

// toAPIError finds the stable code of err: the server's own, the host's
// and the registry's typed errors; anything else is INTERNAL.
func toAPIError(err error) *apiError {
	var ae *apiError
	if errors.As(err, &ae) {
		return ae
	}
	if code, ok := codeOf(err); ok {
		if _, known := statusOf[code]; known {
			return &apiError{Code: code, Message: err.Error()}
		}
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return &apiError{Code: CodeShuttingDown, Message: err.Error()}
	}
	return &apiError{Code: CodeInternal, Message: err.Error()}
}

// writeError answers with {"error":{"code","message"}} and the code's
// status.
func writeError(w http.ResponseWriter, err error) {
	ae := toAPIError(err)
	status, ok := statusOf[ae.Code]
	if !ok {
		status = http.StatusInternalServerError
	}
	if status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="dsh"`)
	}
	writeJSON(w, status, map[string]any{"error": ae})
}

// writeJSON answers with v as JSON.
func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		b, _ = json.Marshal(map[string]any{"error": apiError{Code: CodeInternal, Message: "encode response: " + err.Error()}})
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}
