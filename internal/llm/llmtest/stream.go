package llmtest

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"time"
)

// event is one SSE event; name is empty for chat, which sends data only.
type event struct{ name, data string }

func (e event) String() string {
	if e.name == "" {
		return "data: " + e.data + "\n\n"
	}
	return "event: " + e.name + "\ndata: " + e.data + "\n\n"
}

// obj is a JSON object given as alternating keys and values. It keeps the
// keys in the order written, as providers send them, so that captures and
// failing test output read like the real thing (maps would sort them).
type obj []any

// MarshalJSON implements json.Marshaler.
func (o obj) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i := 0; i+1 < len(o); i += 2 {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(o[i].(string))
		v, err := json.Marshal(o[i+1])
		if err != nil {
			return nil, err
		}
		b.Write(k)
		b.WriteByte(':')
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// mustJSON encodes values built by this package, which always encode.
func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic("llmtest: " + err.Error())
	}
	return string(b)
}

// writeHead sets the content type, then the scripted headers (last, so a
// script can override anything), then writes the status.
func writeHead(w http.ResponseWriter, resp Response, status int, contentType string) {
	h := w.Header()
	h.Set("Content-Type", contentType)
	if resp.RetryAfter != "" {
		h.Set("Retry-After", resp.RetryAfter)
	}
	for k, v := range resp.Headers {
		h.Set(k, v)
	}
	w.WriteHeader(status)
}

// writeError answers an HTTP error with resp's status, headers and body,
// defaulting to the provider's error shape with msg (or the status text).
func (s *Server) writeError(w http.ResponseWriter, format string, resp Response, msg string) {
	status := resp.Status
	if status == 0 {
		status = http.StatusInternalServerError
	}
	body := resp.ErrorBody
	if body == "" {
		if msg == "" {
			msg = "llmtest: scripted " + strconv.Itoa(status) + " " + http.StatusText(status)
		}
		body = errorBody(format, status, msg)
	}
	writeHead(w, resp, status, "application/json")
	_, _ = io.WriteString(w, body)
}

// errorBody is the provider-shaped error document for status.
func errorBody(format string, status int, msg string) string {
	if format == FormatAnthropic {
		return mustJSON(obj{"type", "error", "error", obj{"type", anthropicErrorType(status), "message", msg}})
	}
	typ, code := chatErrorKind(status)
	return mustJSON(obj{"error", obj{"message", msg, "type", typ, "code", code}})
}

func anthropicErrorType(status int) string {
	switch status {
	case 400, 422:
		return "invalid_request_error"
	case 401:
		return "authentication_error"
	case 402:
		return "billing_error"
	case 403:
		return "permission_error"
	case 404:
		return "not_found_error"
	case 413:
		return "request_too_large"
	case 429:
		return "rate_limit_error"
	case 529:
		return "overloaded_error"
	}
	return "api_error"
}

func chatErrorKind(status int) (typ, code string) {
	switch status {
	case 400, 404, 405, 413, 422:
		return "invalid_request_error", "invalid_request"
	case 401:
		return "authentication_error", "invalid_api_key"
	case 402:
		return "insufficient_quota", "insufficient_balance"
	case 403:
		return "permission_error", "permission_denied"
	case 429:
		return "rate_limit_error", "rate_limit_exceeded"
	case 503:
		return "server_error", "server_overloaded"
	}
	return "server_error", "internal_error"
}

// stream writes evs as an SSE body with resp's shaping and fault.
func (s *Server) stream(w http.ResponseWriter, r *http.Request, resp Response, evs []event) {
	rc := http.NewResponseController(w)
	w.Header().Set("Cache-Control", "no-cache")
	writeHead(w, resp, http.StatusOK, "text/event-stream")
	// Headers go out at once, as real servers send them before the model
	// produces anything; clients time the first byte from here.
	if rc.Flush() != nil {
		return
	}
	kind, cut := resp.fault()
	if kind == faultNone || cut > len(evs) {
		cut = len(evs)
	}
	extra := max(0, resp.Comments-len(evs))
	for i, ev := range evs[:cut] {
		if !s.pause(r.Context(), rc, resp.DelayPerChunk) {
			return
		}
		n := extra
		if i > 0 {
			n = 0
		}
		if i < resp.Comments {
			n++
		}
		for range n {
			_, _ = io.WriteString(w, ": keep-alive\n\n")
		}
		if _, err := io.WriteString(w, ev.String()); err != nil {
			return
		}
		if rc.Flush() != nil {
			return
		}
	}
	if kind == faultNone {
		return
	}
	s.inject(w, r, rc, kind, evs, cut)
}

// inject performs a stream fault after cut events were sent.
func (s *Server) inject(w http.ResponseWriter, r *http.Request, rc *http.ResponseController, kind faultKind, evs []event, cut int) {
	switch kind {
	case faultDisconnect:
		hangUp(rc)
	case faultMalformed:
		// Keep the event name the real stream would have had, so that an
		// Anthropic parser reaches its JSON decoding rather than failing
		// earlier on an unexpected event type.
		bad := event{data: "{not json"}
		if cut < len(evs) {
			bad.name = evs[cut].name
		} else if n := len(evs); n > 0 {
			bad.name = evs[n-1].name
		}
		_, _ = io.WriteString(w, bad.String())
		_ = rc.Flush()
	case faultStall:
		s.stall(r.Context(), rc)
	}
}

// single writes a non-streaming body, applying resp's fault and delay
// before the body.
func (s *Server) single(w http.ResponseWriter, r *http.Request, resp Response, body string) {
	rc := http.NewResponseController(w)
	if !s.pause(r.Context(), rc, resp.DelayPerChunk) {
		return
	}
	kind, _ := resp.fault()
	if kind == faultMalformed {
		body = "{not json"
	}
	// A declared length makes a cut-off body an unexpected EOF for the
	// client instead of a plausible short document.
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	writeHead(w, resp, http.StatusOK, "application/json")
	switch kind {
	case faultDisconnect:
		_ = rc.Flush()
		hangUp(rc)
	case faultStall:
		_ = rc.Flush()
		s.stall(r.Context(), rc)
	default:
		_, _ = io.WriteString(w, body)
	}
}

// pause waits d. It reports false when the response must stop instead:
// the client went away, or the server is closing (then the connection is
// cut so that the client cannot mistake the end for a complete answer).
func (s *Server) pause(ctx context.Context, rc *http.ResponseController, d time.Duration) bool {
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	case <-s.done:
		hangUp(rc)
		return false
	}
}

// stall holds the response open until the client or the server goes.
// Waiting on channels rather than sleeping is what lets Close return
// promptly with a stalled request in flight.
func (s *Server) stall(ctx context.Context, rc *http.ResponseController) {
	select {
	case <-ctx.Done():
	case <-s.done:
		hangUp(rc)
	}
}

// hangUp closes the connection abruptly: whatever was flushed stays sent,
// but a chunked body gets no terminating chunk and a sized body comes up
// short, so the client sees a transport error rather than a clean EOF.
func hangUp(rc *http.ResponseController) {
	conn, _, err := rc.Hijack()
	if err != nil {
		// Cannot hijack (not HTTP/1): aborting the handler also drops the
		// connection without a clean end.
		panic(http.ErrAbortHandler)
	}
	_ = conn.Close()
}
