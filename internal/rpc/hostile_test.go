package rpc_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dsh-dev/dsh/internal/host"
	"github.com/dsh-dev/dsh/internal/jsonrpc"
	"github.com/dsh-dev/dsh/internal/jsonrpc/jsonrpctest"
	"github.com/dsh-dev/dsh/internal/rpc"
)

// TestHostileFrames: dsh rpc, fed malformed frames and then the end of
// its input, answers each with the JSON-RPC error it calls for, answers
// every request it read (initialize included) before it exits 0, and
// ignores a response nobody asked for. Before, a line that was not JSON
// ended the connection, the other frames got no answer (a client waited
// for ever) and the end of the input dropped every answer not yet
// written.
func TestHostileFrames(t *testing.T) {
	frames := jsonrpctest.HostileFrames("session/list",
		`{"jsonrpc":"2.0","id":6,"method":"session/prompt","params":{"text":"`+strings.Repeat("a", jsonrpc.DefaultMaxLine)+`"}}`)
	jsonrpctest.CheckHostileFrames(t, dshBin, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`, frames, "rpc")
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
	c.Env = jsonrpctest.Env(t)
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
