package rpc_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dsh-dev/dsh/internal/host"
	"github.com/dsh-dev/dsh/internal/jsonrpc"
	"github.com/dsh-dev/dsh/internal/rpc"
)

// wireReply is one frame dsh wrote, checked to be a JSON-RPC response.
type wireReply struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  string          `json:"method"`
	Result  json.RawMessage `json:"result"`
	Error   *jsonrpc.Error  `json:"error"`
}

// runRaw runs `dsh rpc` (or args) with input as its whole standard input,
// as `printf … | dsh rpc` would, and returns the responses it wrote
// (notifications dropped), each checked to be valid JSON-RPC 2.0.
func runRaw(t *testing.T, input []byte, args ...string) []wireReply {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	c := exec.CommandContext(ctx, dshBin, args...)
	c.Env = append(os.Environ(), "DSH_HOME="+t.TempDir(), "DEEPSEEK_API_KEY=test-key", "DEEPSEEK_BASE_URL=http://127.0.0.1:9")
	c.Stdin = bytes.NewReader(input)
	var out, errb bytes.Buffer
	c.Stdout, c.Stderr = &out, &errb
	if err := c.Run(); err != nil {
		t.Fatalf("dsh %v: %v\nstderr:\n%s", args, err, errb.String())
	}
	var replies []wireReply
	sc := bufio.NewScanner(&out)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var r wireReply
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

// hostileFrames are frames a broken or hostile client sends, each with
// the id and code dsh must answer it with.
var hostileFrames = []struct {
	frame string
	id    string
	code  int
}{
	{`not json`, "null", jsonrpc.CodeParseError},
	{"{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"session/list\"\xff", "null", jsonrpc.CodeParseError},
	{strings.Repeat("[", 100000) + strings.Repeat("]", 100000), "null", jsonrpc.CodeParseError},
	{`[{"jsonrpc":"2.0","id":3,"method":"session/list"}]`, "null", jsonrpc.CodeInvalidRequest},
	{`"initialize"`, "null", jsonrpc.CodeInvalidRequest},
	{`{"jsonrpc":"2.0","id":{"a":1},"method":"session/list"}`, "null", jsonrpc.CodeInvalidRequest},
	{`{"jsonrpc":"2.0","id":null,"method":"session/list"}`, "null", jsonrpc.CodeInvalidRequest},
	{`{"jsonrpc":"2.0","id":4,"method":["session/list"]}`, "4", jsonrpc.CodeInvalidRequest},
	{`{"jsonrpc":"2.0","id":5,"method":"session/list","result":{}}`, "5", jsonrpc.CodeInvalidRequest},
	// Over the 16 MiB limit, without its newline until the end.
	{`{"jsonrpc":"2.0","id":6,"method":"session/prompt","params":{"text":"` + strings.Repeat("a", jsonrpc.DefaultMaxLine) + `"}}`, "null", jsonrpc.CodeInvalidRequest},
}

// TestHostileFrames: dsh rpc, fed malformed frames and then the end of
// its input, answers each with the JSON-RPC error it calls for, answers
// every request it read (initialize included) before it exits 0, and
// ignores a response nobody asked for. Before, a line that was not JSON
// ended the connection, the other frames got no answer (a client waited
// for ever) and the end of the input dropped every answer not yet
// written.
func TestHostileFrames(t *testing.T) {
	var in bytes.Buffer
	in.WriteString(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}` + "\n")
	want := map[string]int{}
	for _, f := range hostileFrames {
		in.WriteString(f.frame + "\n")
		want[f.id+" "+itoa(f.code)]++
	}
	in.WriteString(`{"jsonrpc":"2.0","id":99,"result":{}}` + "\n")
	in.WriteString(`{"jsonrpc":"2.0","method":"no/such/notification"}` + "\n")
	replies := runRaw(t, in.Bytes(), "rpc")
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
		got[string(r.ID)+" "+itoa(r.Error.Code)]++
	}
	if !initialized {
		t.Error("initialize was not answered")
	}
	for k, n := range want {
		if got[k] != n {
			t.Errorf("%d answers %q, want %d (all: %v)", got[k], k, n, got)
		}
	}
	if len(replies) != len(hostileFrames)+1 {
		t.Errorf("%d answers, want %d", len(replies), len(hostileFrames)+1)
	}
}

func itoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}

// TestWrongParamsEveryMethod: params of the wrong JSON type, or with an
// unknown member, get -32602 from every method, and the connection
// serves on.
func TestWrongParamsEveryMethod(t *testing.T) {
	x := newHarness(t)
	x.must("initialize", map[string]any{}, nil)
	for _, m := range []string{"session/create", "session/resume", "session/prompt", "session/cancel", "session/list",
		"session/get", "session/events", "approval/respond", "question/respond"} {
		for _, p := range []any{json.RawMessage(`[1]`), json.RawMessage(`"s"`), json.RawMessage(`7`), json.RawMessage(`true`),
			map[string]any{"sessionId": 7}, map[string]any{"noSuchField": 1}} {
			if err := x.call(m, p, nil); err == nil || err.Code != jsonrpc.CodeInvalidParams {
				t.Errorf("%s %v: %v", m, p, err)
			}
		}
	}
	var r struct {
		Sessions []any `json:"sessions"`
	}
	x.must("session/list", map[string]any{}, &r)
}

// TestConcurrentRequests: many requests at once, all answered once and
// matched to their caller (run under -race).
func TestConcurrentRequests(t *testing.T) {
	x := newHarness(t)
	x.must("initialize", map[string]any{}, nil)
	id := x.create()
	var wg sync.WaitGroup
	errs := make(chan error, 200)
	for i := range 200 { // under jsonrpc.DefaultMaxInFlight
		wg.Go(func() {
			var r struct {
				Session host.Info `json:"session"`
			}
			switch i % 4 {
			case 0:
				if err := x.call("session/get", map[string]any{"sessionId": id}, &r); err != nil || r.Session.Header.ID != id {
					errs <- fmt.Errorf("get: %v %v", err, r.Session.Header.ID)
				}
			case 1:
				if err := x.call("session/get", map[string]any{"sessionId": "nope"}, nil); err == nil || err.Code != rpc.CodeHostError {
					errs <- fmt.Errorf("get nope: %v", err)
				}
			case 2:
				if err := x.call("session/events", map[string]any{"sessionId": id, "after": -1, "limit": 1}, nil); err != nil {
					errs <- fmt.Errorf("events: %v", err)
				}
			case 3:
				if err := x.call("session/cancel", map[string]any{"sessionId": id}, nil); err != nil {
					errs <- fmt.Errorf("cancel: %v", err)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestClientNeverReads: a client that sends requests whose answers fill
// the pipe, never reads them and closes its end of dsh's input gets dsh
// to exit 0 within its shutdown bound; nothing waits for ever on the
// blocked writes.
func TestClientNeverReads(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	c := exec.CommandContext(ctx, dshBin, "rpc")
	c.Env = append(os.Environ(), "DSH_HOME="+t.TempDir(), "DEEPSEEK_API_KEY=test-key", "DEEPSEEK_BASE_URL=http://127.0.0.1:9")
	var in bytes.Buffer
	id := strings.Repeat("i", 100<<10) // every answer is over the pipe's 64 KiB
	for i := range 20 {
		fmt.Fprintf(&in, `{"jsonrpc":"2.0","id":"%s%d","method":"initialize","params":{}}`+"\n", id, i)
	}
	c.Stdin = &in
	out, err := c.StdoutPipe() // never read until dsh exits
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	werr := make(chan error, 1)
	go func() { werr <- c.Wait() }()
	select {
	case err := <-werr:
		if err != nil {
			t.Fatalf("dsh rpc: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("dsh rpc did not exit with a client that never reads")
	}
	t.Logf("exited after %v", time.Since(start))
	_ = out
}
