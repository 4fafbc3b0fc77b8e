package rpc_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dsh-dev/dsh/internal/app"
	"github.com/dsh-dev/dsh/internal/host"
	"github.com/dsh-dev/dsh/internal/llm/llmtest"
	"github.com/dsh-dev/dsh/internal/rpc"
)

// syncBuffer collects what Serve writes.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) Bytes() []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	return bytes.Clone(b.buf.Bytes())
}

// fuzzHost is one session host for every input of a fuzz run.
func fuzzHost(f *testing.F) *host.Host {
	srv := llmtest.New()
	f.Cleanup(srv.Close)
	f.Setenv("DSH_HOME", f.TempDir())
	f.Setenv("DEEPSEEK_API_KEY", "test-key")
	f.Setenv("DEEPSEEK_BASE_URL", srv.URL())
	a, err := app.Open(context.Background(), app.Options{})
	if err != nil {
		f.Fatal(err)
	}
	h, err := host.New(host.Config{App: a, Holder: "rpc fuzz"})
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

// checkDispatch checks what a server wrote for input: only JSON-RPC 2.0
// notifications and responses, no handler panic, and never more answers
// for an id than requests carrying it (null ids answer frames that had
// no usable id).
func checkDispatch(t *testing.T, input, output []byte) {
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
		var r wireReply
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

// FuzzDispatch feeds arbitrary frames to dsh rpc's real method table
// (over a real session host), then ends the input: Serve must return,
// never panic, and write only valid JSON-RPC, at most one answer per
// request.
func FuzzDispatch(f *testing.F) {
	init := `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"clientInfo":{"name":"fuzz"}}}` + "\n"
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"session/create","params":{"cwd":"/tmp"}}`,
		`{"jsonrpc":"2.0","id":1,"method":"session/create","params":{"cwd":"relative","model":"x/y","permission":"nope"}}`,
		`{"jsonrpc":"2.0","id":2,"method":"session/list","params":{"limit":-1,"cursor":"zz"}}`,
		`{"jsonrpc":"2.0","id":3,"method":"session/get","params":{"sessionId":""}}`,
		`{"jsonrpc":"2.0","id":4,"method":"session/events","params":{"sessionId":"0","after":-5,"limit":1000000}}`,
		`{"jsonrpc":"2.0","id":5,"method":"session/prompt","params":{"sessionId":"0","content":[{"type":"image","mediaType":"x","data":"!!"}]}}`,
		`{"jsonrpc":"2.0","id":6,"method":"session/cancel","params":{"sessionId":"x","clearQueue":"yes"}}`,
		`{"jsonrpc":"2.0","id":7,"method":"approval/respond","params":{"sessionId":"a","approvalId":"b","decision":"allow-always"}}`,
		`{"jsonrpc":"2.0","id":8,"method":"question/respond","params":{"sessionId":"a","questionId":"b","answers":{"q":["x"]}}}`,
		`{"jsonrpc":"2.0","id":9,"method":"session/resume","params":{"sessionId":"a","after":-9}}`,
		`{"jsonrpc":"2.0","id":10,"method":"session/get","params":[1]}` + "\n" + `{"jsonrpc":"2.0","id":10,"method":"session/get","params":"s"}`,
		`[{"jsonrpc":"2.0","id":11,"method":"session/list"}]` + "\nnot json\n" + `{"jsonrpc":"2.0","id":{},"method":"x"}`,
		`{"jsonrpc":"2.0","id":12,"result":{}}` + "\n" + `{"jsonrpc":"2.0","method":"session/cancel","params":null}`,
		`{"jsonrpc":"2.0","id":"s","method":"session/list","params":{"cwd":"\u001b[2J","unknown":1}}`,
	} {
		f.Add([]byte(init + s + "\n"))
	}
	h := fuzzHost(f)
	f.Fuzz(func(t *testing.T, input []byte) {
		out := &syncBuffer{}
		done := make(chan error, 1)
		go func() { done <- rpc.Serve(context.Background(), h, bytes.NewReader(input), out, rpc.Options{}) }()
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("Serve did not return after its input ended")
		}
		checkDispatch(t, input, out.Bytes())
	})
}
