// Package llmhttptest holds the test helpers shared by the adapter
// packages: a recording fake provider, a stream drainer that checks the
// [llm.Adapter] contract, and a goroutine leak check. It is imported by
// tests only.
package llmhttptest

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
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

// Capture records what the fake server received.
type Capture struct {
	mu     sync.Mutex
	header http.Header
	path   string
	body   map[string]any
}

// Get returns the headers, URL path and decoded JSON body of the latest
// request.
func (c *Capture) Get() (http.Header, string, map[string]any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.header, c.path, c.body
}

// Server starts a fake provider, closed when t ends. handle writes the
// response after the request was recorded in the returned capture.
func Server(t testing.TB, handle func(w http.ResponseWriter, r *http.Request)) (*httptest.Server, *Capture) {
	t.Helper()
	c := &Capture{}
	srv := httptest.NewServer(c.handler(handle))
	t.Cleanup(srv.Close)
	return srv, c
}

// handler records each request in c, then calls handle.
func (c *Capture) handler(handle func(w http.ResponseWriter, r *http.Request)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		var body map[string]any
		_ = json.Unmarshal(raw, &body)
		c.mu.Lock()
		c.header, c.path, c.body = r.Header.Clone(), r.URL.Path, body
		c.mu.Unlock()
		handle(w, r)
	})
}

// PipeServer is Server over in-memory connections (net.Pipe), for tests
// that run in a testing/synctest bubble: a goroutine blocked on a real
// socket keeps the bubble's fake clock from advancing, one blocked on a
// pipe does not. It returns the base URL and the only client that reaches
// the server; both are shut down when t ends. Call it inside the bubble.
func PipeServer(t testing.TB, handle func(w http.ResponseWriter, r *http.Request)) (string, *http.Client, *Capture) {
	t.Helper()
	c := &Capture{}
	l := &pipeListener{conns: make(chan net.Conn), done: make(chan struct{})}
	srv := &http.Server{Handler: c.handler(handle)}
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = srv.Serve(l)
	}()
	tr := &http.Transport{DialContext: l.dial}
	t.Cleanup(func() {
		tr.CloseIdleConnections()
		_ = srv.Close()
		<-served
	})
	return "http://pipe.test", &http.Client{Transport: tr}, c
}

// pipeListener hands the server ends of net.Pipe connections made by dial
// to http.Server.
type pipeListener struct {
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

func (l *pipeListener) dial(ctx context.Context, _, _ string) (net.Conn, error) {
	client, server := net.Pipe()
	select {
	case l.conns <- server:
		return client, nil
	case <-l.done:
		err := net.ErrClosed
		client.Close()
		server.Close()
		return nil, err
	case <-ctx.Done():
		client.Close()
		server.Close()
		return nil, ctx.Err()
	}
}

func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *pipeListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *pipeListener) Addr() net.Addr { return pipeAddr{} }

type pipeAddr struct{}

func (pipeAddr) Network() string { return "pipe" }
func (pipeAddr) String() string  { return "pipe.test" }

// Client returns an HTTP client with its own transport, closed when t
// ends, so that leak checks and connection state do not depend on other
// tests.
func Client(t testing.TB) *http.Client {
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

// Result is a drained stream.
type Result struct {
	// Chunks are the chunks in order.
	Chunks []llm.Chunk
	// Failure is the stream's final error, if any.
	Failure *llm.Failure
	// Asm assembled the chunks.
	Asm *llm.Assembler
}

// Finish returns the finish payload or nil.
func (r Result) Finish() *llm.Finish { return r.Asm.Finish() }

// Usage returns the reported usage or nil.
func (r Result) Usage() *llm.Usage {
	if u, ok := r.Asm.Usage(); ok {
		return &u
	}
	return nil
}

// Drain runs a stream to its end and checks the adapter contract: block
// starts precede deltas, every started block ends before a finish, usage
// precedes finish, nothing follows finish, and an error is a single final
// *llm.Failure.
func Drain(t testing.TB, ctx context.Context, a llm.Adapter, req llm.Request) Result {
	t.Helper()
	res := Result{Asm: &llm.Assembler{}}
	var errs int
	started := map[int]llm.BlockType{}
	ended := map[int]bool{}
	finished := false
	for ch, err := range a.Stream(ctx, req) {
		if errs > 0 {
			t.Fatalf("yield after error: %+v, %v", ch, err)
		}
		if err != nil {
			errs++
			if !errors.As(err, &res.Failure) {
				t.Fatalf("error %T %v is not *llm.Failure", err, err)
			}
			continue
		}
		if finished {
			t.Fatalf("chunk after finish: %+v", ch)
		}
		res.Chunks = append(res.Chunks, ch)
		res.Asm.Add(ch)
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

// WantCode fails t unless the stream ended with a failure of code, and
// returns that failure.
func WantCode(t testing.TB, res Result, code llm.Code) *llm.Failure {
	t.Helper()
	if res.Failure == nil {
		t.Fatalf("stream succeeded (finish %+v); want failure %s", res.Finish(), code)
	}
	if res.Failure.Code != code {
		t.Fatalf("failure = %v; want code %s", res.Failure, code)
	}
	return res.Failure
}

// ownFrame matches a stack frame in adapter code, test files aside.
var ownFrame = regexp.MustCompile(`internal/llm/(openai|anthropic|llmhttp|sse)/[a-z_]+\.go:`)

// NoLeaks waits until no goroutine runs adapter code or holds an HTTP
// client connection: both would mean a stream was not cleaned up.
func NoLeaks(t testing.TB) {
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

// JSONPath digs into a decoded JSON value: keys for objects, ints for
// arrays. It returns nil when the path does not exist.
func JSONPath(v any, path ...any) any {
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
