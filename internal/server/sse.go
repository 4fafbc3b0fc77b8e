package server

import (
	"bytes"
	"errors"
	"net/http"
	"strconv"
	"time"
)

// DefaultHeartbeat is the interval of the ": ping" comment that keeps
// idle streams (and the proxies between) open.
const DefaultHeartbeat = 15 * time.Second

// writeTimeout bounds one event's write: a client that stops reading
// loses its stream instead of holding a handler forever.
const writeTimeout = 30 * time.Second

// sseWriter writes Server-Sent Events, one flush per event.
type sseWriter struct {
	w  http.ResponseWriter
	rc *http.ResponseController
}

// retryMs is the reconnection delay every stream asks for: a browser's
// EventSource otherwise waits about 3 s after a server restart.
const retryMs = "1000"

// startSSE sends the stream's headers and its retry field. A stream
// outlives the listener's read and write timeouts (Limits): each write
// sets its own deadline in place of the response's, so a stream lives as
// long as its client reads, with a heartbeat at least every
// DefaultHeartbeat. net/http already drops the request's read deadline
// once its body is read; clearing it here as well keeps a stream alive
// whatever its request looked like.
func startSSE(w http.ResponseWriter) (*sseWriter, error) {
	rc := http.NewResponseController(w)
	if err := rc.SetReadDeadline(time.Time{}); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return nil, err
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	s := &sseWriter{w: w, rc: rc}
	return s, s.write([]byte("retry: " + retryMs + "\n\n"))
}

// event writes one event; data may span lines (each gets its own data:).
func (s *sseWriter) event(id, typ string, data []byte) error {
	var b bytes.Buffer
	if id != "" {
		b.WriteString("id: " + id + "\n")
	}
	if typ != "" {
		b.WriteString("event: " + oneLine(typ) + "\n")
	}
	for _, line := range bytes.Split(data, []byte("\n")) {
		b.WriteString("data: ")
		b.Write(bytes.TrimSuffix(line, []byte("\r")))
		b.WriteByte('\n')
	}
	b.WriteByte('\n')
	return s.write(b.Bytes())
}

// comment writes a comment line (": ping"), which clients ignore.
func (s *sseWriter) comment(text string) error {
	return s.write([]byte(": " + oneLine(text) + "\n\n"))
}

func (s *sseWriter) write(b []byte) error {
	// Not every ResponseWriter supports deadlines (httptest's recorder);
	// then the write simply has none.
	if err := s.rc.SetWriteDeadline(time.Now().Add(writeTimeout)); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return err
	}
	if _, err := s.w.Write(b); err != nil {
		return err
	}
	return s.flush()
}

func (s *sseWriter) flush() error {
	if err := s.rc.Flush(); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return err
	}
	return nil
}

// oneLine keeps a field on its line: an id or type with a newline would
// forge fields.
func oneLine(s string) string {
	return string(bytes.Map(func(r rune) rune {
		if r == '\n' || r == '\r' {
			return ' '
		}
		return r
	}, []byte(s)))
}

// parseSeq parses a seq (an SSE id or an ?after=), -1 meaning "from the
// start".
func parseSeq(s string) (int64, error) {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < -1 {
		return 0, newError(CodeInvalidArgument, "not a sequence number: "+strconv.Quote(s))
	}
	return n, nil
}
