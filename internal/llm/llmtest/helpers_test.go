package llmtest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
)

// sseEvent is one parsed SSE event.
type sseEvent struct {
	Name string
	Data string
}

// sseReader is a minimal SSE parser: enough of the spec to read what
// providers send (event/data fields, comments, blank-line dispatch), and
// strict about how the stream ends so that truncation is visible.
type sseReader struct {
	br       *bufio.Reader
	comments int
}

func newSSE(r io.Reader) *sseReader { return &sseReader{br: bufio.NewReader(r)} }

// next returns the next event; io.EOF only on a clean end between events,
// io.ErrUnexpectedEOF for a stream cut inside an event, or the transport
// error.
func (r *sseReader) next() (sseEvent, error) {
	var ev sseEvent
	have := false
	for {
		line, err := r.br.ReadString('\n')
		if err != nil {
			if errors.Is(err, io.EOF) {
				if line == "" && !have {
					return ev, io.EOF
				}
				return ev, io.ErrUnexpectedEOF
			}
			return ev, err
		}
		line = strings.TrimRight(line, "\r\n")
		switch {
		case line == "":
			if have {
				return ev, nil
			}
		case strings.HasPrefix(line, ":"):
			r.comments++
		case strings.HasPrefix(line, "event:"):
			ev.Name = strings.TrimSpace(line[len("event:"):])
			have = true
		case strings.HasPrefix(line, "data:"):
			if ev.Data != "" {
				ev.Data += "\n"
			}
			ev.Data += strings.TrimPrefix(line[len("data:"):], " ")
			have = true
		}
	}
}

// readAll reads events until the end; err is nil only for a clean EOF.
func (r *sseReader) readAll() ([]sseEvent, error) {
	var out []sseEvent
	for {
		ev, err := r.next()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, ev)
	}
}

// post sends body as JSON to the server path and returns the response.
func post(t *testing.T, ctx context.Context, s *Server, path string, body any) *http.Response {
	t.Helper()
	b, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.URL()+path, bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer test-key")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// pathOf is the endpoint path of a format.
func pathOf(format string) string {
	if format == FormatAnthropic {
		return "/v1/messages"
	}
	return "/chat/completions"
}

// requestBody is a typical harness request in format.
func requestBody(format string, stream bool) map[string]any {
	if format == FormatAnthropic {
		return map[string]any{
			"model": "claude-test", "stream": stream, "max_tokens": 1024,
			"system":   "be brief",
			"messages": []any{map[string]any{"role": "user", "content": []any{map[string]any{"type": "text", "text": "hi"}}}},
			"tools":    []any{map[string]any{"name": "bash", "input_schema": map[string]any{"type": "object"}}},
		}
	}
	return map[string]any{
		"model": "deepseek-test", "stream": stream,
		"stream_options": map[string]any{"include_usage": true},
		"messages":       []any{map[string]any{"role": "system", "content": "be brief"}, map[string]any{"role": "user", "content": "hi"}},
		"tools": []any{map[string]any{"type": "function", "function": map[string]any{
			"name": "bash", "parameters": map[string]any{"type": "object"}}}},
	}
}

// decode parses a JSON object, failing the test on error.
func decode(t *testing.T, s string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		t.Fatalf("bad JSON %q: %v", s, err)
	}
	return m
}

// num reads a JSON number at a path of object keys.
func num(m map[string]any, keys ...string) int {
	var v any = m
	for _, k := range keys {
		mm, _ := v.(map[string]any)
		v = mm[k]
	}
	f, _ := v.(float64)
	return int(f)
}

// str reads a JSON string at a path of object keys.
func str(m map[string]any, keys ...string) string {
	var v any = m
	for _, k := range keys {
		mm, _ := v.(map[string]any)
		v = mm[k]
	}
	s, _ := v.(string)
	return s
}
