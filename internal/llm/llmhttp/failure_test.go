package llmhttp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/dsh-dev/dsh/internal/llm"
)

func TestFailerText(t *testing.T) {
	tests := []struct {
		f    Failer
		msg  string
		want string
	}{
		{Failer{}, "boom", "boom"},
		{Failer{Provider: "deepseek"}, "boom", "deepseek: boom"},
		{Failer{Provider: "p", APIKey: "sk-test-1"}, "bad key sk-test-1, really sk-test-1", "p: bad key [redacted], really [redacted]"},
		{Failer{APIKey: "sk-test-1"}, "no key here", "no key here"},
		// A key too short to be a real one does not mangle the text.
		{Failer{Provider: "p", APIKey: "x"}, "the request exceeds the limit", "p: the request exceeds the limit"},
		{Failer{APIKey: "sk-test-1"}, "echoed c2stdGVzdC0x", "echoed [redacted]"},
	}
	for _, tt := range tests {
		if got := tt.f.Text(tt.msg); got != tt.want {
			t.Errorf("%+v.Text(%q) = %q; want %q", tt.f, tt.msg, got, tt.want)
		}
		if f := tt.f.Fail(llm.CodeAuth, tt.msg); f.Code != llm.CodeAuth || f.Message != tt.want {
			t.Errorf("%+v.Fail = %+v", tt.f, f)
		}
	}
}

func TestFailerTransport(t *testing.T) {
	fl := Failer{Provider: "p", APIKey: "sk-test-1"}
	cancelled, cancel := context.WithCancelCause(t.Context())
	cancel(errors.New("user pressed Esc"))
	// A fired watchdog, without polling the clock: in a synctest bubble
	// the timer fires as soon as the bubble sleeps past it.
	var fired *Watchdog
	synctest.Test(t, func(t *testing.T) {
		fired = NewWatchdog(time.Nanosecond, func() {})
		time.Sleep(time.Nanosecond)
		synctest.Wait() // the timer's function has run
	})
	if !fired.Fired() {
		t.Fatal("watchdog did not fire")
	}
	idle := NewWatchdog(time.Hour, func() {})
	defer idle.Stop()
	tests := []struct {
		name string
		ctx  context.Context
		wd   *Watchdog
		err  error
		code llm.Code
		msg  string
	}{
		{"caller cancelled wins over the watchdog", cancelled, fired, context.Canceled, llm.CodeAborted, "p: request cancelled: user pressed Esc"},
		{"watchdog", t.Context(), fired, context.Canceled, llm.CodeTimeout, "p: no data from the provider for 1ns"},
		{"deadline", t.Context(), idle, fmt.Errorf("dial: %w", context.DeadlineExceeded), llm.CodeTimeout, "p: dial: context deadline exceeded"},
		{"other", t.Context(), idle, errors.New("connection reset, key sk-test-1"), llm.CodeTransport, "p: connection reset, key [redacted]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := fl.Transport(tt.ctx, tt.wd, tt.err)
			if f.Code != tt.code || f.Message != tt.msg {
				t.Errorf("failure = %v; want %s %q", f, tt.code, tt.msg)
			}
		})
	}
}

func TestFailerHTTPError(t *testing.T) {
	tests := []struct {
		name   string
		status int
		header map[string]string
		body   string
		want   llm.Failure
	}{
		{
			name: "openai shape", status: 429,
			header: map[string]string{"Retry-After": "2", "x-request-id": "req-9"},
			body:   `{"error":{"message":"Rate limit reached","type":"requests","code":"rate_limit_exceeded"}}`,
			want:   llm.Failure{Code: llm.CodeRateLimit, Message: "p: Rate limit reached", Status: 429, RequestID: "req-9", RetryAfterMs: 2000},
		},
		{
			name: "anthropic shape", status: 400, header: map[string]string{"request-id": "req_1"},
			body: `{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 208310 tokens > 200000 maximum"}}`,
			want: llm.Failure{Code: llm.CodeContextWindowExceeded, Message: "p: prompt is too long: 208310 tokens > 200000 maximum", Status: 400, RequestID: "req_1"},
		},
		{
			name: "key redacted", status: 401,
			body: `{"error":{"message":"Incorrect API key provided: sk-test-1"}}`,
			want: llm.Failure{Code: llm.CodeAuth, Message: "p: Incorrect API key provided: [redacted]", Status: 401},
		},
		{name: "top-level message", status: 404, body: `{"message":"no route"}`, want: llm.Failure{Code: llm.CodeInvalidRequest, Message: "p: no route", Status: 404}},
		{name: "text body", status: 503, body: "  upstream unavailable\n", want: llm.Failure{Code: llm.CodeServer, Message: "p: upstream unavailable", Status: 503}},
		{name: "empty body", status: 504, want: llm.Failure{Code: llm.CodeTimeout, Message: "p: Gateway Timeout", Status: 504}},
		{
			name: "huge body bounded", status: 502, body: strings.Repeat("x", 100<<10),
			want: llm.Failure{Code: llm.CodeServer, Message: "p: " + strings.Repeat("x", MaxErrorMessage) + "…", Status: 502},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := &http.Response{StatusCode: tt.status, Header: http.Header{}, Body: io.NopCloser(strings.NewReader(tt.body))}
			for k, v := range tt.header {
				resp.Header.Set(k, v)
			}
			if got := (Failer{Provider: "p", APIKey: "sk-test-1"}).HTTPError(resp); *got != tt.want {
				t.Errorf("failure = %+v\nwant      %+v", *got, tt.want)
			}
		})
	}
}

func TestReadBodyBounded(t *testing.T) {
	resp := &http.Response{Body: io.NopCloser(strings.NewReader(strings.Repeat("x", MaxErrorBody+10)))}
	if n := len(ReadBody(resp)); n != MaxErrorBody {
		t.Errorf("read %d bytes; want %d", n, MaxErrorBody)
	}
}

func TestParseErrorBody(t *testing.T) {
	tests := []struct {
		body string
		want APIError
	}{
		{`{"error":{"message":"m","type":"t","code":"c"}}`, APIError{Message: "m", Type: "t", Code: "c"}},
		{`{"error":{"message":"m","code":429}}`, APIError{Message: "m", Code: "429"}},
		{`{"error":{"message":"m","code":null}}`, APIError{Message: "m"}},
		{`{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`, APIError{Message: "Overloaded", Type: "overloaded_error"}},
		{`{"error":"model not found"}`, APIError{Message: "model not found"}},
		{`{"message":"top level"}`, APIError{Message: "top level"}},
		{`{"error":{"type":"t"},"message":"fallback"}`, APIError{Message: "fallback", Type: "t"}},
		{`{"error":42}`, APIError{}},
		{`<html>502</html>`, APIError{}},
		{``, APIError{}},
	}
	for _, tt := range tests {
		if got := ParseErrorBody([]byte(tt.body)); got != tt.want {
			t.Errorf("ParseErrorBody(%s) = %+v; want %+v", tt.body, got, tt.want)
		}
	}
}

func TestRefineCode(t *testing.T) {
	tests := []struct {
		name   string
		status int
		e      APIError
		want   llm.Code
	}{
		{"context by code", 400, APIError{Code: "context_length_exceeded"}, llm.CodeContextWindowExceeded},
		{"context by message", 400, APIError{Message: "Prompt exceeds the model's Context Window"}, llm.CodeContextWindowExceeded},
		{"429 about tokens stays a rate limit", 429, APIError{Message: "tokens per minute over the context limit"}, llm.CodeRateLimit},
		{"429 quota", 429, APIError{Type: "insufficient_quota"}, llm.CodeQuota},
		{"402 without words", 402, APIError{}, llm.CodeQuota},
		{"400 credit balance", 400, APIError{Message: "Your credit balance is too low"}, llm.CodeQuota},
		{"plain 400", 400, APIError{Message: "bad field"}, llm.CodeInvalidRequest},
		{"5xx not refined", 500, APIError{Message: "quota service down"}, llm.CodeServer},
	}
	for _, tt := range tests {
		if got := RefineCode(llm.CodeForStatus(tt.status), tt.status, tt.e); got != tt.want {
			t.Errorf("%s: RefineCode = %s; want %s", tt.name, got, tt.want)
		}
	}
}

func TestRequestID(t *testing.T) {
	tests := []struct {
		header map[string]string
		want   string
	}{
		{nil, ""},
		{map[string]string{"x-request-id": "a"}, "a"},
		{map[string]string{"request-id": "b"}, "b"},
		{map[string]string{"x-request-id": "a", "request-id": "b"}, "a"},
	}
	for _, tt := range tests {
		h := http.Header{}
		for k, v := range tt.header {
			h.Set(k, v)
		}
		if got := RequestID(h); got != tt.want {
			t.Errorf("RequestID(%v) = %q; want %q", tt.header, got, tt.want)
		}
	}
}

func TestRetryAfterMs(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	tests := []struct {
		header map[string]string
		want   int64
	}{
		{nil, 0},
		{map[string]string{"Retry-After": "3"}, 3000},
		{map[string]string{"Retry-After": "0.25"}, 250},
		{map[string]string{"Retry-After": now.Add(10 * time.Second).Format(http.TimeFormat)}, 10000},
		{map[string]string{"Retry-After": now.Add(-time.Minute).Format(http.TimeFormat)}, 0},
		{map[string]string{"Retry-After": "soon"}, 0},
		{map[string]string{"Retry-After": "-5"}, 0},
		{map[string]string{"Retry-After": "NaN"}, 0},
		{map[string]string{"Retry-After": "1e30"}, MaxRetryAfterMs},
		{map[string]string{"retry-after-ms": "12.5"}, 13},
		{map[string]string{"retry-after-ms": "1500", "Retry-After": "9"}, 1500},
		{map[string]string{"retry-after-ms": "bad", "Retry-After": "1"}, 1000},
	}
	for _, tt := range tests {
		h := http.Header{}
		for k, v := range tt.header {
			h.Set(k, v)
		}
		if got := RetryAfterMs(h, now); got != tt.want {
			t.Errorf("RetryAfterMs(%v) = %d; want %d", tt.header, got, tt.want)
		}
	}
}

func TestTruncate(t *testing.T) {
	tests := []struct {
		in   string
		n    int
		want string
	}{
		{"short", 10, "short"},
		{"exact", 5, "exact"},
		{"abcdef", 3, "abc…"},
		{"héllo", 2, "h…"}, // never split the two-byte é
	}
	for _, tt := range tests {
		if got := Truncate(tt.in, tt.n); got != tt.want {
			t.Errorf("Truncate(%q, %d) = %q; want %q", tt.in, tt.n, got, tt.want)
		}
	}
}
