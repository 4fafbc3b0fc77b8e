package llmhttp

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/dsh-dev/dsh/internal/llm"
	"github.com/dsh-dev/dsh/internal/redact"
)

// MaxErrorMessage bounds the provider text copied into a Failure, so a
// proxy's HTML error page cannot flood logs and terminals.
const MaxErrorMessage = 2 << 10

// MaxErrorBody bounds how much of an error response body is read.
const MaxErrorBody = 64 << 10

// MaxRetryAfterMs caps a provider's Retry-After at one day so a bogus
// header cannot overflow or stall a caller forever.
const MaxRetryAfterMs = 24 * 60 * 60 * 1000

// Failer builds failures that carry the provider name and never the key.
type Failer struct {
	// Provider prefixes every message; empty adds no prefix.
	Provider string
	// APIKey is replaced by "[redacted]" wherever it appears, in the
	// forms package redact knows; a key shorter than redact.MinLen (a
	// test key) is left alone.
	APIKey string
}

// Fail returns a failure of code with msg, prefixed and redacted.
func (f Failer) Fail(code llm.Code, msg string) *llm.Failure {
	return &llm.Failure{Code: code, Message: f.Text(msg)}
}

// Text prefixes the provider and redacts the API key, which some providers
// echo back in authentication errors.
func (f Failer) Text(msg string) string {
	msg = redact.String(msg, "[redacted]", f.APIKey)
	if f.Provider != "" {
		msg = f.Provider + ": " + msg
	}
	return msg
}

// Aborted is the failure for a call whose context ctx was cancelled.
func (f Failer) Aborted(ctx context.Context) *llm.Failure {
	return f.Fail(llm.CodeAborted, "request cancelled: "+context.Cause(ctx).Error())
}

// Transport classifies an error from sending the request or reading the
// body. The caller's cancellation (ctx) wins over the idle timer wd, which
// wins over the raw error, because cancelling either context surfaces as
// the same transport error.
func (f Failer) Transport(ctx context.Context, wd *Watchdog, err error) *llm.Failure {
	switch {
	case ctx.Err() != nil:
		return f.Aborted(ctx)
	case wd.Fired():
		return f.Fail(llm.CodeTimeout, "no data from the provider for "+wd.Timeout().String())
	case errors.Is(err, context.DeadlineExceeded):
		return f.Fail(llm.CodeTimeout, err.Error())
	}
	return f.Fail(llm.CodeTransport, err.Error())
}

// HTTPError builds the failure for a non-2xx response: the status gives
// the code, refined by what the body says. It reads at most MaxErrorBody
// bytes of the body and keeps at most MaxErrorMessage of its text.
func (f Failer) HTTPError(resp *http.Response) *llm.Failure {
	raw := ReadBody(resp)
	e := ParseErrorBody(raw)
	code := RefineCode(llm.CodeForStatus(resp.StatusCode), resp.StatusCode, e)
	msg := e.Message
	if msg == "" {
		msg = strings.TrimSpace(string(raw))
	}
	if msg == "" {
		msg = http.StatusText(resp.StatusCode)
	}
	return &llm.Failure{
		Code:         code,
		Message:      f.Text(Truncate(msg, MaxErrorMessage)),
		Status:       resp.StatusCode,
		RequestID:    RequestID(resp.Header),
		RetryAfterMs: RetryAfterMs(resp.Header, time.Now()),
	}
}

// ReadBody reads at most MaxErrorBody bytes of resp's body; a read error
// keeps what arrived before it.
func ReadBody(resp *http.Response) []byte {
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, MaxErrorBody))
	return raw
}

// APIError is the error object of error bodies and in-stream error
// events. Both wire shapes are read: OpenAI's {"error": {"message",
// "type", "code"}} or {"error": "text"}, and Anthropic's {"type": "error",
// "error": {"type", "message"}}, because compatible gateways answer in
// either.
type APIError struct {
	Message string
	Type    string
	Code    string
}

// ParseErrorBody reads an error response body; a top-level "message"
// stands in for a missing error message. A body that is not a JSON object
// gives the zero APIError.
func ParseErrorBody(raw []byte) APIError {
	var body struct {
		Error   json.RawMessage `json:"error"`
		Message string          `json:"message"`
	}
	if json.Unmarshal(raw, &body) != nil {
		return APIError{}
	}
	e := DecodeAPIError(body.Error)
	if e.Message == "" {
		e.Message = body.Message
	}
	return e
}

// DecodeAPIError reads an "error" member: an object or a bare string.
func DecodeAPIError(raw json.RawMessage) APIError {
	var obj struct {
		Message string          `json:"message"`
		Type    string          `json:"type"`
		Code    json.RawMessage `json:"code"`
	}
	if json.Unmarshal(raw, &obj) == nil {
		e := APIError{Message: obj.Message, Type: obj.Type}
		// code is a string for OpenAI and a number for some servers.
		if s, err := strconv.Unquote(string(obj.Code)); err == nil {
			e.Code = s
		} else if len(obj.Code) > 0 && string(obj.Code) != "null" {
			e.Code = string(obj.Code)
		}
		return e
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return APIError{Message: s}
	}
	return APIError{}
}

// ContextPhrases are how providers say the prompt does not fit, in lower
// case.
var ContextPhrases = []string{
	"context_length_exceeded", "maximum context length", "context window",
	"context length", "context limit", "prompt is too long",
}

// QuotaPhrases are how providers say the account is out of credit, in
// lower case.
var QuotaPhrases = []string{
	"insufficient_quota", "quota", "insufficient balance", "credit balance", "billing",
}

// RefineCode applies what the error body e says on top of code, the code
// of the HTTP status. Only client errors are refined: a 5xx that mentions
// a quota is still a server problem.
func RefineCode(code llm.Code, status int, e APIError) llm.Code {
	if status < 400 || status >= 500 {
		return code
	}
	text := strings.ToLower(e.Type + " " + e.Code + " " + e.Message)
	// A 429 about tokens per minute is a rate limit, not an oversized
	// prompt, so context phrases are not checked there.
	if status != http.StatusTooManyRequests && ContainsAny(text, ContextPhrases) {
		return llm.CodeContextWindowExceeded
	}
	if status == http.StatusPaymentRequired || ContainsAny(text, QuotaPhrases) {
		return llm.CodeQuota
	}
	return code
}

// ContainsAny reports whether s contains any of subs.
func ContainsAny(s string, subs []string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

// RequestID returns the provider's request id: x-request-id (OpenAI and
// most gateways), else request-id (Anthropic).
func RequestID(h http.Header) string {
	if id := h.Get("x-request-id"); id != "" {
		return id
	}
	return h.Get("request-id")
}

// RetryAfterMs reads retry-after-ms, then Retry-After as seconds or an
// HTTP date relative to now; 0 means none. The result is capped at
// MaxRetryAfterMs.
func RetryAfterMs(h http.Header, now time.Time) int64 {
	ms := -1.0
	if v := strings.TrimSpace(h.Get("retry-after-ms")); v != "" {
		if f, err := strconv.ParseFloat(v, 64); err == nil {
			ms = f
		}
	}
	if v := strings.TrimSpace(h.Get("Retry-After")); ms < 0 && v != "" {
		if f, err := strconv.ParseFloat(v, 64); err == nil {
			ms = f * 1000
		} else if t, err := http.ParseTime(v); err == nil {
			ms = float64(t.Sub(now).Milliseconds())
		}
	}
	switch {
	case math.IsNaN(ms) || ms <= 0:
		return 0
	case ms > MaxRetryAfterMs:
		return MaxRetryAfterMs
	}
	return int64(math.Ceil(ms))
}

// Truncate bounds s to n bytes without splitting a UTF-8 sequence, and
// marks a cut with "…".
func Truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
