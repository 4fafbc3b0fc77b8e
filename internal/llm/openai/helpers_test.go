package openai

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/dsh-dev/dsh/internal/llm"
	"github.com/dsh-dev/dsh/internal/llm/llmhttp/llmhttptest"
)

// The shared helpers, under the short names the tests use.
var (
	server   = llmhttptest.Server
	wantCode = llmhttptest.WantCode
	noLeaks  = llmhttptest.NoLeaks
	jsonPath = llmhttptest.JSONPath
)

type result = llmhttptest.Result

// sseBody answers with one SSE event per data string, flushing between
// events as a real provider does.
func sseBody(data ...string) func(http.ResponseWriter, *http.Request) {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for _, d := range data {
			fmt.Fprintf(w, "data: %s\n\n", d)
			w.(http.Flusher).Flush()
		}
	}
}

// client returns a client for srv with its own transport, so leak checks
// and connection state do not depend on other tests.
func client(t *testing.T, srv *httptest.Server, cfg Config) *Client {
	t.Helper()
	cfg.BaseURL = srv.URL + "/v1/"
	cfg.HTTPClient = llmhttptest.Client(t)
	if cfg.Provider == "" {
		cfg.Provider = "test"
	}
	return New(cfg)
}

// pipeClient is client against an in-memory server (see
// llmhttptest.PipeServer), for tests in a synctest bubble.
func pipeClient(t *testing.T, handle func(w http.ResponseWriter, r *http.Request), cfg Config) *Client {
	t.Helper()
	url, hc, _ := llmhttptest.PipeServer(t, handle)
	cfg.BaseURL = url + "/v1/"
	cfg.HTTPClient = hc
	if cfg.Provider == "" {
		cfg.Provider = "test"
	}
	return New(cfg)
}

// drain runs a stream to its end and checks the adapter contract (see
// llmhttptest.Drain).
func drain(t *testing.T, ctx context.Context, c *Client, req llm.Request) result {
	t.Helper()
	return llmhttptest.Drain(t, ctx, c, req)
}
