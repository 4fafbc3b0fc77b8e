package openai

import (
	"fmt"
	"net"
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
			name: "429 with Retry-After seconds", status: 429,
			header: map[string]string{"Retry-After": "2", "x-request-id": "req-9"},
			body:   `{"error":{"message":"Rate limit reached for requests","type":"requests","code":"rate_limit_exceeded"}}`,
			code:   llm.CodeRateLimit, retryMs: 2000, requestID: "req-9", msg: "Rate limit reached",
		},
		{
			name: "429 with retry-after-ms wins", status: 429,
			header: map[string]string{"retry-after-ms": "1500", "Retry-After": "9", "request-id": "req-a"},
			code:   llm.CodeRateLimit, retryMs: 1500, requestID: "req-a",
		},
		{
			name: "429 insufficient_quota", status: 429,
			body: `{"error":{"message":"You exceeded your current quota","type":"insufficient_quota","code":"insufficient_quota"}}`,
			code: llm.CodeQuota, msg: "current quota",
		},
		{
			name: "401", status: 401,
			body: `{"error":{"message":"Incorrect API key provided: sk-secret","type":"invalid_request_error","code":"invalid_api_key"}}`,
			code: llm.CodeAuth, msg: "Incorrect API key provided: [redacted]",
		},
		{
			name: "400 context length", status: 400,
			body: `{"error":{"message":"This model's maximum context length is 131072 tokens. However, you requested 140000 tokens.","type":"invalid_request_error","code":"context_length_exceeded"}}`,
			code: llm.CodeContextWindowExceeded, msg: "maximum context length",
		},
		{
			name: "400 context length, message only", status: 400,
			body: `{"error":{"message":"prompt exceeds the model's context window"}}`,
			code: llm.CodeContextWindowExceeded,
		},
		{name: "400 plain", status: 400, body: `{"error":{"message":"bad field"}}`, code: llm.CodeInvalidRequest, msg: "bad field"},
		{name: "402 DeepSeek balance", status: 402, body: `{"error":{"message":"Insufficient Balance"}}`, code: llm.CodeQuota, msg: "Insufficient Balance"},
		{name: "500 quota mention stays server", status: 500, body: `{"error":{"message":"quota service down"}}`, code: llm.CodeServer},
		{name: "503 text body", status: 503, body: "upstream unavailable", code: llm.CodeServer, msg: "upstream unavailable"},
		{name: "504", status: 504, code: llm.CodeTimeout, msg: "Gateway Timeout"},
		{name: "string error", status: 404, body: `{"error":"model not found"}`, code: llm.CodeInvalidRequest, msg: "model not found"},
		{name: "huge body bounded", status: 502, body: strings.Repeat("x", 100<<10), code: llm.CodeServer},
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
			res := drain(t, t.Context(), client(t, srv, Config{APIKey: "sk-secret"}), llm.Request{Model: "m"})
			f := wantCode(t, res, tt.code)
			if f.Status != tt.status || f.RetryAfterMs != tt.retryMs || f.RequestID != tt.requestID {
				t.Errorf("failure = %+v; want status %d, retry %d ms, request %q", f, tt.status, tt.retryMs, tt.requestID)
			}
			if !strings.Contains(f.Message, tt.msg) {
				t.Errorf("message = %q; want %q", f.Message, tt.msg)
			}
			if strings.Contains(f.Error(), "sk-secret") {
				t.Errorf("API key leaked: %v", f)
			}
			if len(f.Message) > llmhttp.MaxErrorMessage+64 {
				t.Errorf("message is %d bytes; want it bounded", len(f.Message))
			}
		})
	}
}

func TestDialError(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	c := New(Config{BaseURL: "http://" + addr, APIKey: "sk-secret", HTTPClient: &http.Client{Transport: &http.Transport{}}})
	var f *llm.Failure
	for _, err := range c.Stream(t.Context(), llm.Request{Model: "m"}) {
		f = llm.AsFailure(err)
	}
	if f == nil || f.Code != llm.CodeTransport || strings.Contains(f.Error(), "sk-secret") {
		t.Fatalf("failure = %v; want TRANSPORT without the key", f)
	}
}
