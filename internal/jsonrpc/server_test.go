package jsonrpc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"runtime"
	"strings"
	"testing"
)

// reply is an error or result the Conn wrote, decoded.
type reply struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  json.RawMessage `json:"result"`
	Error   *Error          `json:"error"`
}

func (p *peer) reply() reply {
	p.t.Helper()
	line := p.recv()
	var r reply
	if err := json.Unmarshal([]byte(line), &r); err != nil {
		p.t.Fatalf("reply %q: %v", line, err)
	}
	return r
}

// echoServer answers "echo" with its params; "block" waits for release.
func echoServer(t *testing.T, o Options, release <-chan struct{}, started chan<- string) *peer {
	t.Helper()
	o.Dialect, o.Server = V2, true
	o.OnProtocolError = func(error) {}
	o.OnRequest = func(ctx context.Context, method string, params json.RawMessage) (any, *Error) {
		if method == "block" {
			started <- string(params)
			select {
			case <-release:
			case <-ctx.Done():
			}
		}
		return params, nil
	}
	return newPeer(t, o)
}

// TestServerAnswersInvalidFrames: a server answers every frame it cannot
// serve with a JSON-RPC error (id null unless the frame had a usable id),
// never answers a response-shaped frame, and goes on serving. Before,
// none was answered (a client waited for ever) and a line that was not
// JSON ended the connection.
func TestServerAnswersInvalidFrames(t *testing.T) {
	p := echoServer(t, Options{}, nil, nil)
	deep := strings.Repeat("[", 20000) + strings.Repeat("]", 20000)
	for _, c := range []struct {
		frame string
		id    string
		code  int
	}{
		{`not json`, "null", CodeParseError},
		{`{"jsonrpc":"2.0","id":1,"method":"echo"`, "null", CodeParseError},
		{deep, "null", CodeParseError},
		{"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"e\xffcho\"", "null", CodeParseError},
		{`[{"jsonrpc":"2.0","id":1,"method":"echo"}]`, "null", CodeInvalidRequest},
		{`[]`, "null", CodeInvalidRequest},
		{`"str"`, "null", CodeInvalidRequest},
		{`7`, "null", CodeInvalidRequest},
		{`null`, "null", CodeInvalidRequest},
		{`{}`, "null", CodeInvalidRequest},
		{`{"jsonrpc":"2.0","id":{"a":1},"method":"echo"}`, "null", CodeInvalidRequest},
		{`{"jsonrpc":"2.0","id":null,"method":"echo"}`, "null", CodeInvalidRequest},
		{`{"jsonrpc":"2.0","id":true,"method":"echo"}`, "null", CodeInvalidRequest},
		{`{"jsonrpc":"2.0","id":[1],"method":"echo"}`, "null", CodeInvalidRequest},
		{`{"jsonrpc":"2.0","id":3,"method":7}`, "3", CodeInvalidRequest},
		{`{"jsonrpc":"2.0","id":"s","method":null}`, `"s"`, CodeInvalidRequest},
		{`{"jsonrpc":"1.0","id":4,"method":"echo"}`, "4", CodeInvalidRequest},
		{`{"jsonrpc":"2.0","id":5}`, "5", CodeInvalidRequest},
		{`{"jsonrpc":"2.0","id":6,"method":"echo","result":1}`, "6", CodeInvalidRequest},
	} {
		p.send(c.frame)
		r := p.reply()
		if r.Error == nil || r.Error.Code != c.code || string(r.ID) != c.id || r.JSONRPC != "2.0" {
			t.Fatalf("%.60s: got id %s error %+v, want id %s code %d", c.frame, r.ID, r.Error, c.id, c.code)
		}
	}
	// Responses nobody asked for are not answered (two servers would
	// answer each other for ever); the next line is the echo's answer.
	for _, f := range []string{
		`{"jsonrpc":"2.0","id":99,"result":{}}`,
		`{"jsonrpc":"2.0","id":"x","error":{"code":1,"message":"m"}}`,
		`{"jsonrpc":"1.0","id":98,"result":{}}`,
		`{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"parse error"}}`,
		`{"jsonrpc":"2.0","method":"unknown/notification","params":{}}`,
	} {
		p.send(f)
	}
	// Ids of every usable JSON type come back as they were sent.
	for _, id := range []string{`"ok"`, `0`, `-1`, `1.5`, `1e400`, `123456789012345678901234567890`, `""`, `"\u0000\n"`} {
		p.send(`{"jsonrpc":"2.0","id":` + id + `,"method":"echo","params":[1]}`)
		r := p.reply()
		if string(r.ID) != id || string(r.Result) != "[1]" {
			t.Fatalf("id %s: got %+v", id, r)
		}
	}
	select {
	case <-p.conn.Done():
		t.Fatalf("connection ended: %v", p.conn.Err())
	default:
	}
}

// countingReader yields n bytes of 'a' without a newline, allocating
// nothing.
type countingReader struct{ n int }

func (r *countingReader) Read(b []byte) (int, error) {
	if r.n == 0 {
		return 0, io.EOF
	}
	k := min(len(b), r.n)
	for i := range b[:k] {
		b[i] = 'a'
	}
	r.n -= k
	return k, nil
}

// TestServerOverlongLine: a line over MaxLine is answered (id null,
// CodeInvalidRequest naming the limit), skipped without being buffered,
// and the next request is served. Before, the connection ended without
// an answer.
func TestServerOverlongLine(t *testing.T) {
	p := echoServer(t, Options{MaxLine: 1 << 10}, nil, nil)
	go func() {
		_, _ = io.WriteString(p.out, `{"jsonrpc":"2.0","id":1,"method":"echo","params":"`+strings.Repeat("x", 1<<20)+"\"}\n")
		_, _ = io.WriteString(p.out, `{"jsonrpc":"2.0","id":2,"method":"echo","params":2}`+"\n")
	}()
	r := p.reply()
	if r.Error == nil || r.Error.Code != CodeInvalidRequest || string(r.ID) != "null" || !strings.Contains(r.Error.Message, "1024-byte limit") {
		t.Fatalf("got %+v %+v", r, r.Error)
	}
	if r := p.reply(); string(r.ID) != "2" || string(r.Result) != "2" {
		t.Fatalf("got %+v", r)
	}
}

// TestServerHugeFrameBoundedMemory: 100 MB without a newline is answered
// once and read through in bounded memory; the input's end then ends the
// read side cleanly.
func TestServerHugeFrameBoundedMemory(t *testing.T) {
	out := &lockedBuffer{}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	c := NewConn(&countingReader{n: 100 << 20}, out, Options{Dialect: V2, Server: true, MaxLine: 1 << 20})
	wait(t, c.ReadDone())
	runtime.ReadMemStats(&after)
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 16<<20 {
		t.Fatalf("reading a 100 MB line allocated %d bytes", grew)
	}
	c.Close()
	out.mu.Lock()
	defer out.mu.Unlock()
	if got := out.buf.String(); strings.Count(got, "\n") != 1 || !strings.Contains(got, `"id":null`) || !strings.Contains(got, fmt.Sprint(CodeInvalidRequest)) {
		t.Fatalf("wrote %q", got)
	}
	if !errors.Is(c.Err(), ErrClosed) {
		t.Fatalf("Err %v", c.Err())
	}
}

// TestDuplicateInFlightID: a request whose id is being served is
// refused with CodeInvalidRequest and never reaches the handler; the
// first is answered once, and the id is free again after. A string id
// never collides with a number. Before, both ran and two answers carried
// one id.
func TestDuplicateInFlightID(t *testing.T) {
	release := make(chan struct{})
	started := make(chan string, 4)
	p := echoServer(t, Options{}, release, started)
	p.send(`{"jsonrpc":"2.0","id":7,"method":"block","params":"first"}`)
	if got := wait(t, started); got != `"first"` {
		t.Fatalf("started %s", got)
	}
	p.send(`{"jsonrpc":"2.0","id":7,"method":"block","params":"second"}`)
	r := p.reply()
	if r.Error == nil || r.Error.Code != CodeInvalidRequest || string(r.ID) != "7" || !strings.Contains(r.Error.Message, "already in flight") {
		t.Fatalf("got %+v %+v", r, r.Error)
	}
	p.send(`{"jsonrpc":"2.0","id":"7","method":"echo","params":"string id"}`)
	if r := p.reply(); string(r.ID) != `"7"` || string(r.Result) != `"string id"` {
		t.Fatalf("got %+v", r)
	}
	close(release)
	if r := p.reply(); string(r.ID) != "7" || string(r.Result) != `"first"` {
		t.Fatalf("got %+v", r)
	}
	wait(t, drained(p.conn))
	p.send(`{"jsonrpc":"2.0","id":7,"method":"echo","params":"again"}`)
	if r := p.reply(); string(r.ID) != "7" || string(r.Result) != `"again"` {
		t.Fatalf("got %+v", r)
	}
	select {
	case s := <-started:
		t.Fatalf("the duplicate ran (%s)", s)
	default:
	}
}

// drained is closed once no request is being served.
func drained(c *Conn) <-chan error {
	ch := make(chan error, 1)
	go func() { ch <- c.Drain(context.Background()) }()
	return ch
}

// TestServerMaxInFlight: one request over MaxInFlight is answered with
// CodeServerOverloaded at once; the others are served.
func TestServerMaxInFlight(t *testing.T) {
	release := make(chan struct{})
	started := make(chan string, 4)
	p := echoServer(t, Options{MaxInFlight: 2}, release, started)
	p.send(`{"jsonrpc":"2.0","id":1,"method":"block","params":1}`)
	p.send(`{"jsonrpc":"2.0","id":2,"method":"block","params":2}`)
	wait(t, started)
	wait(t, started)
	p.send(`{"jsonrpc":"2.0","id":3,"method":"block","params":3}`)
	r := p.reply()
	if r.Error == nil || r.Error.Code != CodeServerOverloaded || string(r.ID) != "3" {
		t.Fatalf("got %+v %+v", r, r.Error)
	}
	close(release)
	got := map[string]bool{}
	for range 2 {
		got[string(p.reply().ID)] = true
	}
	if !got["1"] || !got["2"] {
		t.Fatalf("answered %v", got)
	}
}

// TestServerAnswersAfterEOF: with Server, the end of the input ends only
// the read side: a request read before it is still answered, a Call
// fails at once (nobody can answer it), Drain waits for the answer.
// Before, EOF closed the connection and the answer was lost.
func TestServerAnswersAfterEOF(t *testing.T) {
	release := make(chan struct{})
	started := make(chan string, 1)
	p := echoServer(t, Options{}, release, started)
	pending := asyncCall(p.conn, context.Background(), "ask", nil)
	p.recv()
	p.send(`{"jsonrpc":"2.0","id":1,"method":"block","params":"late"}`)
	wait(t, started)
	p.out.Close()
	wait(t, p.conn.ReadDone())
	if r := wait(t, pending); !errors.Is(r.err, ErrClosed) || !errors.Is(r.err, io.EOF) {
		t.Fatalf("pending call: %v", r.err)
	}
	if err := p.conn.Call(context.Background(), "x", nil, nil); !errors.Is(err, ErrClosed) {
		t.Fatalf("call after EOF: %v", err)
	}
	select {
	case <-p.conn.Done():
		t.Fatal("Done before Close")
	default:
	}
	close(release)
	if r := p.reply(); string(r.ID) != "1" || string(r.Result) != `"late"` {
		t.Fatalf("got %+v", r)
	}
	if err := wait(t, drained(p.conn)); err != nil {
		t.Fatal(err)
	}
	p.conn.Close()
	wait(t, p.conn.Done())
}
