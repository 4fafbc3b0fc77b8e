package anthropic

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/dsh-dev/dsh/internal/llm"
)

// maxErrorMessage bounds the provider text copied into a Failure, so a
// proxy's HTML error page cannot flood logs and terminals.
const maxErrorMessage = 2 << 10

// maxErrorBody bounds how much of an error response body is read.
const maxErrorBody = 64 << 10

// watchdog cancels a request when no byte has arrived for d. It is a
// timer reset on every read rather than a goroutine, so nothing is left
// running once it is stopped. Cancelling the request context (instead of
// closing the body) is what reliably unblocks a Read in progress: the
// transport closes the connection when the context ends.
type watchdog struct {
	d     time.Duration
	t     *time.Timer
	fired atomic.Bool
}

func newWatchdog(d time.Duration, cancel context.CancelFunc) *watchdog {
	w := &watchdog{d: d}
	w.t = time.AfterFunc(d, func() {
		w.fired.Store(true)
		cancel()
	})
	return w
}

func (w *watchdog) kick() { w.t.Reset(w.d) }
func (w *watchdog) stop() { w.t.Stop() }

// activityReader kicks the watchdog whenever bytes arrive, so SSE
// comments and partial events count as activity just like whole events.
type activityReader struct {
	r io.Reader
	w *watchdog
}

func (a activityReader) Read(p []byte) (int, error) {
	n, err := a.r.Read(p)
	if n > 0 {
		a.w.kick()
	}
	return n, err
}

// failer builds failures that carry the provider name and never the key.
type failer struct {
	provider string
	apiKey   string
}

func (f failer) fail(code llm.Code, msg string) *llm.Failure {
	return &llm.Failure{Code: code, Message: f.text(msg)}
}

// text prefixes the provider and redacts the API key, which some providers
// echo back in authentication errors.
func (f failer) text(msg string) string {
	if f.apiKey != "" {
		msg = strings.ReplaceAll(msg, f.apiKey, "[redacted]")
	}
	if f.provider != "" {
		msg = f.provider + ": " + msg
	}
	return msg
}

// transport classifies an error from sending the request or reading the
// body. The caller's cancellation wins over the idle timer, which wins
// over the raw error, because cancelling either context surfaces as the
// same transport error.
func (f failer) transport(ctx context.Context, wd *watchdog, err error) *llm.Failure {
	switch {
	case ctx.Err() != nil:
		return f.fail(llm.CodeAborted, "request cancelled: "+context.Cause(ctx).Error())
	case wd.fired.Load():
		return f.fail(llm.CodeTimeout, "no data from the provider for "+wd.d.String())
	case errors.Is(err, context.DeadlineExceeded):
		return f.fail(llm.CodeTimeout, err.Error())
	}
	return f.fail(llm.CodeTransport, err.Error())
}

// httpError builds the failure for a non-2xx response: the status gives
// the code, refined by what the body says.
func (f failer) httpError(resp *http.Response) *llm.Failure {
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	e := parseErrorBody(raw)
	code := refineCode(llm.CodeForStatus(resp.StatusCode), resp.StatusCode, e)
	msg := e.Message
	if msg == "" {
		msg = strings.TrimSpace(string(raw))
	}
	if msg == "" {
		msg = http.StatusText(resp.StatusCode)
	}
	return &llm.Failure{
		Code:         code,
		Message:      f.text(truncate(msg, maxErrorMessage)),
		Status:       resp.StatusCode,
		RequestID:    requestID(resp.Header),
		RetryAfterMs: retryAfterMs(resp.Header, time.Now()),
	}
}

// apiError is the error object of error bodies and error events:
// {"type": "error", "error": {"type", "message"}}. OpenAI-style shapes
// ({"error": "text"}, a "code" member) are accepted too, because
// Anthropic-compatible gateways often answer in them.
type apiError struct {
	Message string
	Type    string
	Code    string
}

func parseErrorBody(raw []byte) apiError {
	var body struct {
		Error   json.RawMessage `json:"error"`
		Message string          `json:"message"`
	}
	if json.Unmarshal(raw, &body) != nil {
		return apiError{}
	}
	e := decodeAPIError(body.Error)
	if e.Message == "" {
		e.Message = body.Message
	}
	return e
}

func decodeAPIError(raw json.RawMessage) apiError {
	var obj struct {
		Message string          `json:"message"`
		Type    string          `json:"type"`
		Code    json.RawMessage `json:"code"`
	}
	if json.Unmarshal(raw, &obj) == nil {
		e := apiError{Message: obj.Message, Type: obj.Type}
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
		return apiError{Message: s}
	}
	return apiError{}
}

// contextPhrases are how providers say the prompt does not fit.
var contextPhrases = []string{
	"context_length_exceeded", "maximum context length", "context window",
	"context length", "context limit", "prompt is too long",
}

// quotaPhrases are how providers say the account is out of credit.
var quotaPhrases = []string{
	"insufficient_quota", "quota", "insufficient balance", "credit balance", "billing",
}

// refineCode applies what the error body says on top of the status code.
// Only client errors are refined: a 5xx that mentions a quota is still a
// server problem.
func refineCode(code llm.Code, status int, e apiError) llm.Code {
	if status < 400 || status >= 500 {
		return code
	}
	text := strings.ToLower(e.Type + " " + e.Code + " " + e.Message)
	// A 429 about tokens per minute is a rate limit, not an oversized
	// prompt, so context phrases are not checked there.
	if status != http.StatusTooManyRequests && containsAny(text, contextPhrases) {
		return llm.CodeContextWindowExceeded
	}
	if status == http.StatusPaymentRequired || containsAny(text, quotaPhrases) {
		return llm.CodeQuota
	}
	return code
}

// streamErrorCode maps the error object of an "error" stream event by its
// type. Unknown types map to SERVER: the provider reported a failure on
// its side mid-stream, which is usually transient, and calling it
// malformed would wrongly make it final.
func streamErrorCode(e apiError) llm.Code {
	switch e.Type {
	case "invalid_request_error", "not_found_error", "request_too_large":
		if containsAny(strings.ToLower(e.Message), contextPhrases) {
			return llm.CodeContextWindowExceeded
		}
		if containsAny(strings.ToLower(e.Message), quotaPhrases) {
			return llm.CodeQuota
		}
		return llm.CodeInvalidRequest
	case "authentication_error", "permission_error":
		return llm.CodeAuth
	case "billing_error":
		return llm.CodeQuota
	case "rate_limit_error":
		return llm.CodeRateLimit
	case "timeout_error":
		return llm.CodeTimeout
	}
	return llm.CodeServer
}

func containsAny(s string, subs []string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

func requestID(h http.Header) string {
	if id := h.Get("x-request-id"); id != "" {
		return id
	}
	return h.Get("request-id")
}

// maxRetryAfterMs caps a provider's Retry-After at one day so a bogus
// header cannot overflow or stall a caller forever.
const maxRetryAfterMs = 24 * 60 * 60 * 1000

// retryAfterMs reads retry-after-ms, then Retry-After as seconds or an
// HTTP date; 0 means none.
func retryAfterMs(h http.Header, now time.Time) int64 {
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
	case ms > maxRetryAfterMs:
		return maxRetryAfterMs
	}
	return int64(math.Ceil(ms))
}

// truncate bounds s to n bytes without splitting a UTF-8 sequence.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
