package jsonrpc

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"
	"time"
)

// peer is the fake remote end of a Conn, joined by two io.Pipes.
type peer struct {
	t    *testing.T
	in   *bufio.Reader  // what the Conn writes
	out  *io.PipeWriter // what the Conn reads
	inR  *io.PipeReader
	conn *Conn
}

func newPeer(t *testing.T, opts Options) *peer {
	t.Helper()
	cr, pw := io.Pipe() // peer -> conn
	pr, cw := io.Pipe() // conn -> peer
	p := &peer{t: t, in: bufio.NewReader(pr), out: pw, inR: pr}
	p.conn = NewConn(cr, cw, opts)
	t.Cleanup(func() {
		p.conn.Close()
		pw.Close()
		pr.Close()
	})
	return p
}

// recv returns the next line the Conn wrote, without its newline.
func (p *peer) recv() string {
	p.t.Helper()
	line, err := p.in.ReadString('\n')
	if err != nil {
		p.t.Fatalf("peer recv: %v (partial %q)", err, line)
	}
	return strings.TrimSuffix(line, "\n")
}

// send writes one line to the Conn.
func (p *peer) send(line string) {
	p.t.Helper()
	if _, err := io.WriteString(p.out, line+"\n"); err != nil {
		p.t.Fatalf("peer send: %v", err)
	}
}

// wait fails the test if ch is not ready within a generous deadline; it
// detects deadlocks, it is not used for ordering.
func wait[T any](t *testing.T, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatal("timed out: deadlock?")
		panic("unreachable")
	}
}

type callResult struct {
	raw json.RawMessage
	err error
}

func asyncCall(c *Conn, ctx context.Context, method string, params any) <-chan callResult {
	ch := make(chan callResult, 1)
	go func() {
		var raw json.RawMessage
		err := c.Call(ctx, method, params, &raw)
		ch <- callResult{raw, err}
	}()
	return ch
}

func TestCallReplyCodexBytes(t *testing.T) {
	p := newPeer(t, Options{})
	res := asyncCall(p.conn, context.Background(), "initialize", map[string]any{"clientInfo": map[string]string{"name": "dsh"}})
	if got, want := p.recv(), `{"id":0,"method":"initialize","params":{"clientInfo":{"name":"dsh"}}}`; got != want {
		t.Fatalf("wrote %s, want %s", got, want)
	}
	p.send(`{"id":0,"result":{"userAgent":"x"}}`)
	r := wait(t, res)
	if r.err != nil || string(r.raw) != `{"userAgent":"x"}` {
		t.Fatalf("got %s, %v", r.raw, r.err)
	}
	// Notify without params: no params, no jsonrpc member.
	go func() { _ = p.conn.Notify("initialized", nil) }()
	if got, want := p.recv(), `{"method":"initialized"}`; got != want {
		t.Fatalf("wrote %s, want %s", got, want)
	}
	// Second call gets the next id, and decodes into a typed result.
	done := make(chan error, 1)
	var out struct{ N int }
	go func() { done <- p.conn.Call(context.Background(), "m", nil, &out) }()
	if got, want := p.recv(), `{"id":1,"method":"m"}`; got != want {
		t.Fatalf("wrote %s, want %s", got, want)
	}
	p.send(`{"id":1,"result":{"N":7}}`)
	if err := wait(t, done); err != nil || out.N != 7 {
		t.Fatalf("got %+v, %v", out, err)
	}
}

func TestV2Bytes(t *testing.T) {
	var got []string
	var mu sync.Mutex
	p := newPeer(t, Options{Dialect: V2, OnRequest: func(ctx context.Context, method string, params json.RawMessage) (any, *Error) {
		return map[string]any{"outcome": map[string]string{"outcome": "selected", "optionId": "approved"}}, nil
	}, OnNotification: func(m string, params json.RawMessage) {
		mu.Lock()
		got = append(got, m+" "+string(params))
		mu.Unlock()
	}})
	res := asyncCall(p.conn, context.Background(), "session/new", map[string]any{"cwd": "/p", "mcpServers": []any{}})
	if g, w := p.recv(), `{"jsonrpc":"2.0","id":0,"method":"session/new","params":{"cwd":"/p","mcpServers":[]}}`; g != w {
		t.Fatalf("wrote %s, want %s", g, w)
	}
	// A string-id server request is answered with the same id, verbatim.
	p.send(`{"jsonrpc":"2.0","id":"d2af-381b","method":"session/request_permission","params":{"sessionId":"s"}}`)
	if g, w := p.recv(), `{"jsonrpc":"2.0","id":"d2af-381b","result":{"outcome":{"optionId":"approved","outcome":"selected"}}}`; g != w {
		t.Fatalf("wrote %s, want %s", g, w)
	}
	p.send(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s"}}`)
	p.send(`{"jsonrpc":"2.0","id":0,"result":{"sessionId":"s"}}`)
	if r := wait(t, res); r.err != nil || string(r.raw) != `{"sessionId":"s"}` {
		t.Fatalf("got %s, %v", r.raw, r.err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 1 || got[0] != `session/update {"sessionId":"s"}` {
		t.Fatalf("notifications %q", got)
	}
	go func() { _ = p.conn.Notify("session/cancel", map[string]string{"sessionId": "s"}) }()
	if g, w := p.recv(), `{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"s"}}`; g != w {
		t.Fatalf("wrote %s, want %s", g, w)
	}
}

func TestNotificationBeforeReply(t *testing.T) {
	var notes []string // written on the reader goroutine, read after Call returns
	p := newPeer(t, Options{OnNotification: func(m string, params json.RawMessage) {
		notes = append(notes, m+" "+string(params))
	}})
	res := asyncCall(p.conn, context.Background(), "turn/start", nil)
	p.recv()
	p.send(`{"method":"warning","params":{"message":"w"},"emittedAtMs":1}`)
	p.send(`{"method":"thread/status/changed","params":{}}`)
	p.send(`{"id":0,"result":{"turn":{}}}`)
	if r := wait(t, res); r.err != nil {
		t.Fatal(r.err)
	}
	// Notifications that preceded the reply were delivered before Call returned.
	want := []string{`warning {"message":"w"}`, `thread/status/changed {}`}
	if strings.Join(notes, "|") != strings.Join(want, "|") {
		t.Fatalf("notes %q, want %q", notes, want)
	}
}

func TestOutOfOrderReplies(t *testing.T) {
	p := newPeer(t, Options{})
	const n = 8
	results := make([]<-chan callResult, n)
	for i := range n {
		results[i] = asyncCall(p.conn, context.Background(), "m", map[string]int{"i": i})
	}
	// Collect all requests; map id -> i.
	idToI := map[int]int{}
	for range n {
		var req struct {
			ID     *int
			Method string
			Params struct{ I int }
		}
		if err := json.Unmarshal([]byte(p.recv()), &req); err != nil || req.ID == nil {
			t.Fatalf("bad request: %v", err)
		}
		idToI[*req.ID] = req.Params.I
	}
	// Reply in reverse id order, each result naming the caller's i.
	for id := n - 1; id >= 0; id-- {
		b, _ := json.Marshal(map[string]any{"id": id, "result": idToI[id]})
		p.send(string(b))
	}
	for i := range n {
		r := wait(t, results[i])
		if r.err != nil || string(r.raw) != strings.TrimSpace(string(mustJSON(i))) {
			t.Fatalf("call %d got %s, %v", i, r.raw, r.err)
		}
	}
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

func TestServerRequestDuringCall(t *testing.T) {
	gotParams := make(chan string, 1)
	p := newPeer(t, Options{OnRequest: func(ctx context.Context, method string, params json.RawMessage) (any, *Error) {
		switch method {
		case "item/commandExecution/requestApproval":
			gotParams <- string(params)
			return map[string]string{"decision": "accept"}, nil
		case "boom":
			panic("kaboom")
		case "nil":
			return nil, nil
		case "bad":
			return func() {}, nil
		}
		return nil, &Error{Code: CodeInvalidParams, Message: "nope", Data: json.RawMessage(`{"k":1}`)}
	}})
	res := asyncCall(p.conn, context.Background(), "turn/start", nil)
	p.recv()
	p.send(`{"method":"item/commandExecution/requestApproval","id":0,"params":{"itemId":"call_1"}}`)
	if g, w := p.recv(), `{"id":0,"result":{"decision":"accept"}}`; g != w {
		t.Fatalf("wrote %s, want %s", g, w)
	}
	if g := wait(t, gotParams); g != `{"itemId":"call_1"}` {
		t.Fatalf("params %s", g)
	}
	p.send(`{"method":"other","id":1}`)
	if g, w := p.recv(), `{"id":1,"error":{"code":-32602,"message":"nope","data":{"k":1}}}`; g != w {
		t.Fatalf("wrote %s, want %s", g, w)
	}
	p.send(`{"method":"boom","id":2}`)
	if g := p.recv(); !strings.HasPrefix(g, `{"id":2,"error":{"code":-32603,"message":"handler panic: kaboom"`) {
		t.Fatalf("wrote %s", g)
	}
	p.send(`{"method":"nil","id":3}`)
	if g, w := p.recv(), `{"id":3,"result":null}`; g != w {
		t.Fatalf("wrote %s, want %s", g, w)
	}
	p.send(`{"method":"bad","id":4}`)
	if g := p.recv(); !strings.HasPrefix(g, `{"id":4,"error":{"code":-32603,`) {
		t.Fatalf("wrote %s", g)
	}
	p.send(`{"id":0,"result":{}}`)
	if r := wait(t, res); r.err != nil {
		t.Fatal(r.err)
	}
}

func TestServerRequestNoHandler(t *testing.T) {
	p := newPeer(t, Options{})
	p.send(`{"method":"item/fileChange/requestApproval","id":0,"params":{}}`)
	if g, w := p.recv(), `{"id":0,"error":{"code":-32601,"message":"method not found: item/fileChange/requestApproval"}}`; g != w {
		t.Fatalf("wrote %s, want %s", g, w)
	}
}

func TestErrorReplies(t *testing.T) {
	p := newPeer(t, Options{})
	res := asyncCall(p.conn, context.Background(), "x", nil)
	p.recv()
	p.send(`{"error":{"code":-32600,"message":"Not initialized"},"id":0}`)
	r := wait(t, res)
	var e *Error
	if !errors.As(r.err, &e) || e.Code != CodeInvalidRequest || e.Message != "Not initialized" || e.Data != nil {
		t.Fatalf("got %#v", r.err)
	}
	res = asyncCall(p.conn, context.Background(), "x", nil)
	p.recv()
	p.send(`{"id":1,"error":{"code":-32001,"message":"overloaded","data":{"retry":true}}}`)
	r = wait(t, res)
	if !errors.As(r.err, &e) || e.Code != CodeServerOverloaded || string(e.Data) != `{"retry":true}` {
		t.Fatalf("got %#v", r.err)
	}
	// Malformed error objects and result+error fail the call with a
	// ProtocolError instead of leaving it hanging.
	for i, reply := range []string{
		`{"id":%d,"error":"boom"}`,
		`{"id":%d,"error":{"message":"no code"}}`,
		`{"id":%d,"error":{"code":1.5,"message":"x"}}`,
		`{"id":%d,"result":1,"error":{"code":1,"message":"x"}}`,
	} {
		res = asyncCall(p.conn, context.Background(), "x", nil)
		p.recv()
		p.send(strings.Replace(reply, "%d", string(mustJSON(i+2)), 1))
		r = wait(t, res)
		var pe *ProtocolError
		if !errors.As(r.err, &pe) || pe.Fatal {
			t.Fatalf("%s: got %#v", reply, r.err)
		}
	}
}

func TestMalformedLines(t *testing.T) {
	perrs := make(chan error, 64)
	notes := make(chan string, 64)
	p := newPeer(t, Options{
		OnProtocolError: func(err error) { perrs <- err },
		OnNotification:  func(m string, _ json.RawMessage) { notes <- m },
	})
	bad := []string{
		`[1,2]`,
		`"str"`,
		`null`,
		`{}`,
		`{"id":5}`,
		`{"id":99,"result":{}}`,                  // unknown response id
		`{"id":"abc","result":{}}`,               // id we never issued
		`{"result":{}}`,                          // response without id
		`{"method":7}`,                           // method not a string
		`{"method":null}`,                        // method null
		`{"method":"m","id":{"x":1}}`,            // bad request id
		`{"method":"m","id":null}`,               // null request id
		`{"method":"m","result":1}`,              // method and result
		`{"jsonrpc":"1.0","method":"m"}`,         // wrong version
		`{"jsonrpc":"2.0","id":1.5,"result":{}}`, // non-integer id
	}
	for _, l := range bad {
		p.send(l)
		err := wait(t, perrs)
		var pe *ProtocolError
		if !errors.As(err, &pe) || pe.Fatal {
			t.Fatalf("%s: got %v", l, err)
		}
	}
	// Blank lines and CRLF are tolerated; the connection is still alive.
	p.send("")
	p.send("  \r")
	p.send(`{"method":"still-alive"}` + "\r")
	if m := wait(t, notes); m != "still-alive" {
		t.Fatalf("got %s", m)
	}
	select {
	case err := <-perrs:
		t.Fatalf("unexpected protocol error %v", err)
	default:
	}
	// A line that is not JSON at all is fatal.
	res := asyncCall(p.conn, context.Background(), "x", nil)
	p.recv()
	p.send(`{"id":0,"result":`)
	err := wait(t, perrs)
	var pe *ProtocolError
	if !errors.As(err, &pe) || !pe.Fatal {
		t.Fatalf("got %v", err)
	}
	r := wait(t, res)
	if !errors.Is(r.err, ErrClosed) || !errors.As(r.err, &pe) {
		t.Fatalf("call got %v", r.err)
	}
	wait(t, p.conn.Done())
	if !errors.As(p.conn.Err(), &pe) {
		t.Fatalf("Err %v", p.conn.Err())
	}
	if err := p.conn.Notify("x", nil); !errors.Is(err, ErrClosed) {
		t.Fatalf("Notify after end: %v", err)
	}
}

func TestLineTooLong(t *testing.T) {
	perrs := make(chan error, 4)
	notes := make(chan string, 4)
	p := newPeer(t, Options{MaxLine: 32,
		OnProtocolError: func(err error) { perrs <- err },
		OnNotification:  func(m string, _ json.RawMessage) { notes <- m }})
	// Exactly MaxLine bytes is fine (the newline does not count).
	ok := `{"method":"` + strings.Repeat("a", 32-13) + `"}`
	if len(ok) != 32 {
		t.Fatalf("len %d", len(ok))
	}
	p.send(ok)
	wait(t, notes)
	res := asyncCall(p.conn, context.Background(), "x", nil)
	p.recv()
	go func() { // the Conn stops reading mid-line; don't block the test on it
		_, _ = io.WriteString(p.out, `{"method":"`+strings.Repeat("a", 100)+"\"}\n")
	}()
	if err := wait(t, perrs); !errors.Is(err, ErrLineTooLong) {
		t.Fatalf("got %v", err)
	}
	r := wait(t, res)
	if !errors.Is(r.err, ErrClosed) || !errors.Is(r.err, ErrLineTooLong) {
		t.Fatalf("call got %v", r.err)
	}
	wait(t, p.conn.Done())
	if !errors.Is(p.conn.Err(), ErrLineTooLong) {
		t.Fatalf("Err %v", p.conn.Err())
	}
}

func TestLongLineWithinDefaultLimit(t *testing.T) {
	p := newPeer(t, Options{})
	res := asyncCall(p.conn, context.Background(), "x", nil)
	p.recv()
	big := strings.Repeat("x", 1<<20) // well over bufio's buffer
	go func() { _, _ = io.WriteString(p.out, `{"id":0,"result":"`+big+"\"}\n") }()
	r := wait(t, res)
	if r.err != nil || len(r.raw) != len(big)+2 {
		t.Fatalf("got %d bytes, %v", len(r.raw), r.err)
	}
}

func TestPeerClosesMidCall(t *testing.T) {
	p := newPeer(t, Options{})
	res := asyncCall(p.conn, context.Background(), "turn/start", nil)
	p.recv()
	p.out.Close() // EOF on the Conn's reader
	r := wait(t, res)
	if !errors.Is(r.err, ErrClosed) || !errors.Is(r.err, io.EOF) {
		t.Fatalf("got %v", r.err)
	}
	// A call that failed with ErrClosed finds Done already closed:
	// callers classify the failure by it.
	select {
	case <-p.conn.Done():
	default:
		t.Fatal("call failed with ErrClosed before Done closed")
	}
	if p.conn.Err() != io.EOF {
		t.Fatalf("Err %v", p.conn.Err())
	}
	if err := p.conn.Call(context.Background(), "late", nil, nil); !errors.Is(err, ErrClosed) {
		t.Fatalf("Call after end: %v", err)
	}
}

func TestFinalLineWithoutNewline(t *testing.T) {
	notes := make(chan string, 1)
	c := NewConn(strings.NewReader(`{"method":"last"}`), io.Discard, Options{
		OnNotification: func(m string, _ json.RawMessage) { notes <- m },
	})
	wait(t, c.Done())
	if m := wait(t, notes); m != "last" || c.Err() != io.EOF {
		t.Fatalf("got %s, %v", m, c.Err())
	}
}

func TestLocalClose(t *testing.T) {
	handlerDone := make(chan error, 1)
	started := make(chan struct{})
	p := newPeer(t, Options{OnRequest: func(ctx context.Context, _ string, _ json.RawMessage) (any, *Error) {
		close(started)
		<-ctx.Done()
		handlerDone <- ctx.Err()
		return nil, nil
	}})
	p.send(`{"method":"approve","id":0}`)
	wait(t, started)
	res := asyncCall(p.conn, context.Background(), "x", nil)
	p.recv()
	p.conn.Close()
	r := wait(t, res)
	if !errors.Is(r.err, ErrClosed) {
		t.Fatalf("got %v", r.err)
	}
	if err := wait(t, handlerDone); err == nil {
		t.Fatal("handler ctx not cancelled")
	}
	if p.conn.Err() != ErrClosed {
		t.Fatalf("Err %v", p.conn.Err())
	}
	p.conn.Close() // idempotent
}

func TestContextCancel(t *testing.T) {
	perrs := make(chan error, 4)
	p := newPeer(t, Options{Dialect: V2, CancelMethod: ACPCancelMethod,
		OnProtocolError: func(err error) { perrs <- err }})
	ctx, cancel := context.WithCancel(context.Background())
	res := asyncCall(p.conn, ctx, "session/prompt", nil)
	p.recv()
	cancel()
	if r := wait(t, res); !errors.Is(r.err, context.Canceled) {
		t.Fatalf("got %v", r.err)
	}
	if g, w := p.recv(), `{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":0}}`; g != w {
		t.Fatalf("wrote %s, want %s", g, w)
	}
	// The late reply is dropped silently; the next call still works.
	p.send(`{"jsonrpc":"2.0","id":0,"result":{"stopReason":"cancelled"}}`)
	res = asyncCall(p.conn, context.Background(), "y", nil)
	if g := p.recv(); g != `{"jsonrpc":"2.0","id":1,"method":"y"}` {
		t.Fatalf("wrote %s", g)
	}
	p.send(`{"jsonrpc":"2.0","id":1,"result":true}`)
	if r := wait(t, res); r.err != nil || string(r.raw) != "true" {
		t.Fatalf("got %s %v", r.raw, r.err)
	}
	select {
	case err := <-perrs:
		t.Fatalf("unexpected protocol error %v", err)
	default:
	}
	// An already-cancelled context sends nothing.
	if err := p.conn.Call(ctx, "z", nil, nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v", err)
	}
}

func TestContextCancelCodexSendsNothing(t *testing.T) {
	p := newPeer(t, Options{})
	ctx, cancel := context.WithCancel(context.Background())
	res := asyncCall(p.conn, ctx, "a", nil)
	p.recv()
	cancel()
	if r := wait(t, res); !errors.Is(r.err, context.Canceled) {
		t.Fatalf("got %v", r.err)
	}
	res = asyncCall(p.conn, context.Background(), "b", nil)
	// The next line is the next request, not a cancel notification.
	if g := p.recv(); g != `{"id":1,"method":"b"}` {
		t.Fatalf("wrote %s", g)
	}
	p.send(`{"id":1,"result":null}`)
	if r := wait(t, res); r.err != nil || string(r.raw) != "null" {
		t.Fatalf("got %s %v", r.raw, r.err)
	}
}

func TestConcurrentWritesNeverInterleave(t *testing.T) {
	p := newPeer(t, Options{})
	const n = 50
	payload := strings.Repeat("z", 10000)
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() { _ = p.conn.Notify("n", map[string]string{"p": payload}) })
	}
	for range n {
		var m struct {
			Method string
			Params struct{ P string }
		}
		if err := json.Unmarshal([]byte(p.recv()), &m); err != nil || m.Params.P != payload {
			t.Fatalf("interleaved or bad line: %v", err)
		}
	}
	wg.Wait()
}
