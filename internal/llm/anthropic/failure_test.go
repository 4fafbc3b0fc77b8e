package anthropic

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/dsh-dev/dsh/internal/llm"
	"github.com/dsh-dev/dsh/internal/llm/llmhttp"
)

func TestHTTPErrors(t *testing.T) {
	tests := []struct {
		name      string
		status    int
		header    map[string]string
		body      string
		code      llm.Code
		retryMs   int64
		requestID string
		msg       string
	}{
		{
			name: "529 overloaded", status: 529, header: map[string]string{"request-id": "req_1"},
			body: `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`,
			code: llm.CodeServer, requestID: "req_1", msg: "Overloaded",
		},
		{
			name: "429 with Retry-After", status: 429, header: map[string]string{"retry-after": "7"},
			body: `{"type":"error","error":{"type":"rate_limit_error","message":"Number of request tokens has exceeded your per-minute rate limit"}}`,
			code: llm.CodeRateLimit, retryMs: 7000, msg: "rate limit",
		},
		{
			name: "401", status: 401,
			body: `{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}`,
			code: llm.CodeAuth, msg: "invalid x-api-key",
		},
		{
			name: "400 prompt too long", status: 400,
			body: `{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 208310 tokens > 200000 maximum"}}`,
			code: llm.CodeContextWindowExceeded, msg: "prompt is too long",
		},
		{
			name: "400 credit balance", status: 400,
			body: `{"type":"error","error":{"type":"invalid_request_error","message":"Your credit balance is too low to access the Anthropic API."}}`,
			code: llm.CodeQuota,
		},
		{name: "500 api_error", status: 500, body: `{"type":"error","error":{"type":"api_error","message":"Internal server error"}}`, code: llm.CodeServer},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, _ := server(t, func(w http.ResponseWriter, r *http.Request) {
				for k, v := range tt.header {
					w.Header().Set(k, v)
				}
				w.WriteHeader(tt.status)
				fmt.Fprint(w, tt.body)
			})
			res := drain(t, t.Context(), client(t, srv, Config{APIKey: "sk-ant-secret"}), llm.Request{Model: "m"})
			f := wantCode(t, res, tt.code)
			if f.Status != tt.status || f.RetryAfterMs != tt.retryMs || f.RequestID != tt.requestID {
				t.Errorf("failure = %+v; want status %d, retry %d ms, request %q", f, tt.status, tt.retryMs, tt.requestID)
			}
			if !strings.Contains(f.Message, tt.msg) || strings.Contains(f.Error(), "sk-ant-secret") {
				t.Errorf("message = %q; want %q and no key", f.Message, tt.msg)
			}
		})
	}
}

func TestStreamErrorCode(t *testing.T) {
	tests := map[string]llm.Code{
		"overloaded_error":      llm.CodeServer,
		"api_error":             llm.CodeServer,
		"rate_limit_error":      llm.CodeRateLimit,
		"invalid_request_error": llm.CodeInvalidRequest,
		"authentication_error":  llm.CodeAuth,
		"permission_error":      llm.CodeAuth,
		"billing_error":         llm.CodeQuota,
		"not_found_error":       llm.CodeInvalidRequest,
		"timeout_error":         llm.CodeTimeout,
		"something_new":         llm.CodeServer,
	}
	for typ, want := range tests {
		if got := streamErrorCode(llmhttp.APIError{Type: typ}); got != want {
			t.Errorf("streamErrorCode(%s) = %s; want %s", typ, got, want)
		}
	}
}
