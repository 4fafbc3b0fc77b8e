package openai

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dsh-dev/dsh/internal/llm"
)

// capture records what the fake server received.
type capture struct {
	mu     sync.Mutex
	header http.Header
	path   string
	body   map[string]any
	raw    []byte
}

func (c *capture) get() (http.Header, string, map[string]any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.header, c.path, c.body
}

// server starts a fake provider. handle writes the response after the
// request was recorded in the returned capture.
func server(t *testing.T, handle func(w http.ResponseWriter, r *http.Request)) (*httptest.Server, *capture) {
	t.Helper()
	c := &capture{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		var body map[string]any
		_ = json.Unmarshal(raw, &body)
		c.mu.Lock()
		c.header, c.path, c.body, c.raw = r.Header.Clone(), r.URL.Path, body, raw
		c.mu.Unlock()
		handle(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv, c
}

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
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	cfg.BaseURL = srv.URL + "/v1/"
	cfg.HTTPClient = &http.Client{Transport: tr}
	if cfg.Provider == "" {
		cfg.Provider = "test"
	}
	return New(cfg)
}

// result is a drained stream.
type result struct {
	chunks  []llm.Chunk
	failure *llm.Failure
	asm     *llm.Assembler
}

// finish returns the finish payload or nil.
func (r result) finish() *llm.Finish { return r.asm.Finish() }

func (r result) usage() *llm.Usage {
	if u, ok := r.asm.Usage(); ok {
		return &u
	}
	return nil
}

// drain runs a stream to its end and checks the adapter contract: block
// starts precede deltas, every started block ends before a finish, usage
// precedes finish, nothing follows finish, and an error is a single final
// *llm.Failure.
func drain(t *testing.T, ctx context.Context, c *Client, req llm.Request) result {
	t.Helper()
	res := result{asm: &llm.Assembler{}}
	var errs int
	started := map[int]llm.BlockType{}
	ended := map[int]bool{}
	finished := false
	for ch, err := range c.Stream(ctx, req) {
		if errs > 0 {
			t.Fatalf("yield after error: %+v, %v", ch, err)
		}
		if err != nil {
			errs++
			if !errors.As(err, &res.failure) {
				t.Fatalf("error %T %v is not *llm.Failure", err, err)
			}
			continue
		}
		if finished {
			t.Fatalf("chunk after finish: %+v", ch)
		}
		res.chunks = append(res.chunks, ch)
		res.asm.Add(ch)
		switch ch.Type {
		case llm.ChunkBlockStart:
			if _, dup := started[ch.Index]; dup {
				t.Fatalf("block %d started twice", ch.Index)
			}
			started[ch.Index] = ch.BlockType
		case llm.ChunkTextDelta, llm.ChunkReasoningDelta, llm.ChunkToolCallDelta:
			want := map[llm.ChunkType]llm.BlockType{llm.ChunkTextDelta: llm.BlockText, llm.ChunkReasoningDelta: llm.BlockReasoning, llm.ChunkToolCallDelta: llm.BlockToolCall}[ch.Type]
			if got, ok := started[ch.Index]; !ok || got != want || ended[ch.Index] {
				t.Fatalf("%s for block %d (%q, ended %v) before its start", ch.Type, ch.Index, got, ended[ch.Index])
			}
		case llm.ChunkBlockEnd:
			if _, ok := started[ch.Index]; !ok || ended[ch.Index] || ch.Block == nil {
				t.Fatalf("bad block-end %+v", ch)
			}
			ended[ch.Index] = true
		case llm.ChunkFinish:
			finished = true
			for i := range started {
				if !ended[i] {
					t.Fatalf("finish before block %d ended", i)
				}
			}
		}
	}
	if errs == 0 && !finished {
		t.Fatalf("stream ended without finish or error")
	}
	return res
}

// wantCode fails unless the stream ended with a failure of code.
func wantCode(t *testing.T, res result, code llm.Code) *llm.Failure {
	t.Helper()
	if res.failure == nil {
		t.Fatalf("stream succeeded (finish %+v); want failure %s", res.finish(), code)
	}
	if res.failure.Code != code {
		t.Fatalf("failure = %v; want code %s", res.failure, code)
	}
	return res.failure
}

var ownFrame = regexp.MustCompile(`internal/llm/(openai|sse)/[a-z_]+\.go:`)

// noLeaks waits until no goroutine runs adapter code or holds an HTTP
// client connection: both would mean a stream was not cleaned up.
func noLeaks(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Second)
	for {
		buf := make([]byte, 1<<20)
		stacks := string(buf[:runtime.Stack(buf, true)])
		var leaked []string
		for _, g := range strings.Split(stacks, "\n\n") {
			if strings.Contains(g, "net/http.(*persistConn)") || ownFrame.MatchString(strings.ReplaceAll(g, "_test.go:", "")) {
				leaked = append(leaked, g)
			}
		}
		if len(leaked) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("leaked goroutines:\n%s", strings.Join(leaked, "\n\n"))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// jsonPath digs into a decoded JSON value: keys for objects, ints for
// arrays. It returns nil when the path does not exist.
func jsonPath(v any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, ok := v.(map[string]any)
			if !ok {
				return nil
			}
			v = m[k]
		case int:
			a, ok := v.([]any)
			if !ok || k >= len(a) {
				return nil
			}
			v = a[k]
		}
	}
	return v
}
