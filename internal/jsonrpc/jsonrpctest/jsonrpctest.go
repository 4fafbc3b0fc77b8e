// Package jsonrpctest serves the tests of dsh's JSON-RPC surfaces (dsh acp
// and dsh rpc): it runs the dsh binary on raw frames, checks that every
// frame a server wrote is JSON-RPC 2.0, feeds a server the frames a broken
// or hostile client sends, and fuzzes a server's method table over a real
// session host.
package jsonrpctest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dsh-dev/dsh/internal/app"
	"github.com/dsh-dev/dsh/internal/host"
	"github.com/dsh-dev/dsh/internal/jsonrpc"
	"github.com/dsh-dev/dsh/internal/llm/llmtest"
)

// Reply is one frame dsh wrote, checked to be a JSON-RPC response.
type Reply struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  string          `json:"method"`
	Result  json.RawMessage `json:"result"`
	Error   *jsonrpc.Error  `json:"error"`
}

// Env is the environment the dsh binary runs in under the tests: this
// process's, with a DSH_HOME of its own and a DeepSeek endpoint nothing
// listens on.
func Env(t *testing.T) []string {
	return append(os.Environ(), "DSH_HOME="+t.TempDir(), "DEEPSEEK_API_KEY=test-key", "DEEPSEEK_BASE_URL=http://127.0.0.1:9")
}

// RunRaw runs the dsh binary bin with args with input as its whole
// standard input, as `printf … | dsh acp` would, and returns the
// responses it wrote (notifications dropped), each checked to be valid
// JSON-RPC 2.0.
func RunRaw(t *testing.T, bin string, input []byte, args ...string) []Reply {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	c := exec.CommandContext(ctx, bin, args...)
	c.Env = Env(t)
	c.Stdin = bytes.NewReader(input)
	var out, errb bytes.Buffer
	c.Stdout, c.Stderr = &out, &errb
	if err := c.Run(); err != nil {
		t.Fatalf("dsh %v: %v\nstderr:\n%s", args, err, errb.String())
	}
	var replies []Reply
	sc := bufio.NewScanner(&out)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var r Reply
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil || r.JSONRPC != "2.0" {
			t.Fatalf("wrote %q (%v)", sc.Bytes(), err)
		}
		if r.Method != "" {
			continue
		}
		if (r.Error == nil) == (len(r.Result) == 0) || len(r.ID) == 0 {
			t.Fatalf("not a response: %q", sc.Bytes())
		}
		replies = append(replies, r)
	}
	return replies
}

// HostileFrame is a frame a broken or hostile client sends, with the id
// and code dsh must answer it with.
type HostileFrame struct {
	Frame string
	ID    string
	Code  int
}

// HostileFrames are the frames a broken or hostile client sends: method is
// one of the surface's methods, the frames' target, and oversized is a
// session/prompt request with id 6 over the 16 MiB limit
// (jsonrpc.DefaultMaxLine), without its newline until the end.
func HostileFrames(method, oversized string) []HostileFrame {
	return []HostileFrame{
		{`not json`, "null", jsonrpc.CodeParseError},
		{"{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"" + method + "\"\xff", "null", jsonrpc.CodeParseError},
		{strings.Repeat("[", 100000) + strings.Repeat("]", 100000), "null", jsonrpc.CodeParseError},
		{`[{"jsonrpc":"2.0","id":3,"method":"` + method + `"}]`, "null", jsonrpc.CodeInvalidRequest},
		{`"initialize"`, "null", jsonrpc.CodeInvalidRequest},
		{`{"jsonrpc":"2.0","id":{"a":1},"method":"` + method + `"}`, "null", jsonrpc.CodeInvalidRequest},
		{`{"jsonrpc":"2.0","id":null,"method":"` + method + `"}`, "null", jsonrpc.CodeInvalidRequest},
		{`{"jsonrpc":"2.0","id":4,"method":["` + method + `"]}`, "4", jsonrpc.CodeInvalidRequest},
		{`{"jsonrpc":"2.0","id":5,"method":"` + method + `","result":{}}`, "5", jsonrpc.CodeInvalidRequest},
		{oversized, "null", jsonrpc.CodeInvalidRequest},
	}
}

// CheckHostileFrames runs the dsh binary bin with args on initialize (an
// initialize request with id 1), frames, a response nobody asked for and
// an unknown notification, then the end of its input. dsh must answer each
// frame with the JSON-RPC error it calls for and answer initialize, every
// request it read, before it exits 0, and ignore the response and the
// notification.
func CheckHostileFrames(t *testing.T, bin, initialize string, frames []HostileFrame, args ...string) {
	t.Helper()
	var in bytes.Buffer
	in.WriteString(initialize + "\n")
	want := map[string]int{}
	for _, f := range frames {
		in.WriteString(f.Frame + "\n")
		want[f.ID+" "+codeKey(f.Code)]++
	}
	in.WriteString(`{"jsonrpc":"2.0","id":99,"result":{}}` + "\n")
	in.WriteString(`{"jsonrpc":"2.0","method":"no/such/notification"}` + "\n")
	replies := RunRaw(t, bin, in.Bytes(), args...)
	got := map[string]int{}
	initialized := false
	for _, r := range replies {
		if string(r.ID) == "1" && r.Error == nil {
			initialized = true
			continue
		}
		if r.Error == nil {
			t.Fatalf("a result for %s", r.ID)
		}
		got[string(r.ID)+" "+codeKey(r.Error.Code)]++
	}
	if !initialized {
		t.Error("initialize was not answered")
	}
	for k, n := range want {
		if got[k] != n {
			t.Errorf("%d answers %q, want %d (all: %v)", got[k], k, n, got)
		}
	}
	if len(replies) != len(frames)+1 {
		t.Errorf("%d answers, want %d", len(replies), len(frames)+1)
	}
}

func codeKey(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}

// CheckDispatch checks what a server wrote for input: only JSON-RPC 2.0
// notifications and responses, no handler panic, and never more answers
// for an id than requests carrying it (null ids answer frames that had
// no usable id).
func CheckDispatch(t *testing.T, input, output []byte) {
	t.Helper()
	requests := map[string]int{}
	for line := range bytes.Lines(input) {
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method json.RawMessage `json:"method"`
			Result json.RawMessage `json:"result"`
			Error  json.RawMessage `json:"error"`
		}
		// A frame that is not response-shaped may be answered with its id,
		// valid request or not.
		if json.Unmarshal(line, &m) == nil && len(m.ID) > 0 && (len(m.Method) > 0 || len(m.Result)+len(m.Error) == 0) {
			requests[idKey(m.ID)]++
		}
	}
	answers := map[string]int{}
	sc := bufio.NewScanner(bytes.NewReader(output))
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		var r Reply
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil || r.JSONRPC != "2.0" {
			t.Fatalf("wrote %q (%v)", sc.Bytes(), err)
		}
		if r.Method != "" {
			if len(r.ID) > 0 || r.Error != nil || len(r.Result) > 0 {
				t.Fatalf("a notification with a response's members: %q", sc.Bytes())
			}
			continue
		}
		if (r.Error == nil) == (len(r.Result) == 0) || len(r.ID) == 0 {
			t.Fatalf("not a response: %q", sc.Bytes())
		}
		if r.Error != nil && strings.Contains(r.Error.Message, "panic") {
			t.Fatalf("a handler panicked: %s", r.Error.Message)
		}
		if string(r.ID) != "null" {
			answers[idKey(r.ID)]++
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	for id, n := range answers {
		if n > requests[id] {
			t.Fatalf("%d answers for id %s, %d requests", n, id, requests[id])
		}
	}
}

// idKey is an id as the server tells ids apart: a string by its value, a
// number by its literal.
func idKey(id json.RawMessage) string {
	var s string
	if id[0] == '"' && json.Unmarshal(id, &s) == nil {
		return "s" + s
	}
	return "n" + string(bytes.TrimSpace(id))
}

// fuzzHost is one session host for every input of a fuzz run.
func fuzzHost(f *testing.F, holder string) *host.Host {
	srv := llmtest.New()
	f.Cleanup(srv.Close)
	f.Setenv("DSH_HOME", f.TempDir())
	f.Setenv("DEEPSEEK_API_KEY", "test-key")
	f.Setenv("DEEPSEEK_BASE_URL", srv.URL())
	a, err := app.Open(context.Background(), app.Options{})
	if err != nil {
		f.Fatal(err)
	}
	h, err := host.New(host.Config{App: a, Holder: holder})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = h.Close(ctx)
		_ = a.Close()
	})
	return h
}

// Serve serves one connection, reading frames from r and writing to w,
// over the session host h, until r ends: acp.Serve or rpc.Serve.
type Serve func(ctx context.Context, h *host.Host, r io.Reader, w io.Writer) error

// FuzzDispatch is a fuzz target body: it seeds f with initialize (one
// frame) followed by each of seeds (one or more frames), then feeds
// arbitrary frames to serve over one real session host (named holder,
// over a fake model), then ends the input. serve must return, never
// panic, and write only valid JSON-RPC, at most one answer per request
// (CheckDispatch).
func FuzzDispatch(f *testing.F, holder, initialize string, seeds []string, serve Serve) {
	for _, s := range seeds {
		f.Add([]byte(initialize + "\n" + s + "\n"))
	}
	h := fuzzHost(f, holder)
	f.Fuzz(func(t *testing.T, input []byte) {
		out := &Buffer{}
		done := make(chan error, 1)
		go func() { done <- serve(context.Background(), h, bytes.NewReader(input), out) }()
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("Serve did not return after its input ended")
		}
		CheckDispatch(t, input, out.Bytes())
	})
}

// Buffer collects what a server writes from its goroutines; its zero
// value is empty and ready to use.
type Buffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write appends p.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// Bytes returns a copy of what was written.
func (b *Buffer) Bytes() []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	return bytes.Clone(b.buf.Bytes())
}

// String returns what was written.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
