package anthropic

import (
	"context"
	"encoding/json"
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

// sseBody answers with one SSE event per JSON payload, named by its
// "type" member as the Messages API does, flushing between events.
func sseBody(data ...string) func(http.ResponseWriter, *http.Request) {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for _, d := range data {
			var ev struct{ Type string }
			_ = json.Unmarshal([]byte(d), &ev)
			fmt.Fprintf(w, "event: %s\ndata: %s\n\n", ev.Type, d)
			w.(http.Flusher).Flush()
		}
	}
}

// client returns a client for srv with its own transport, so leak checks
// and connection state do not depend on other tests.
func client(t *testing.T, srv *httptest.Server, cfg Config) *Client {
	t.Helper()
	cfg.BaseURL = srv.URL + "/"
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
	cfg.BaseURL = url + "/"
	cfg.HTTPClient = hc
	if cfg.Provider == "" {
		cfg.Provider = "test"
	}
	return New(cfg)
}

// drain runs a stream to its end and checks the adapter contract (see
// llmhttptest.Drain).
func drain(t *testing.T, ctx context.Context, c *Client, req llm.Request) llmhttptest.Result {
	t.Helper()
	return llmhttptest.Drain(t, ctx, c, req)
}
