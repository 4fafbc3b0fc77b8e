package jsonrpc

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"
	"time"
)

// lockedBuffer collects what the Conn writes.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// FuzzFraming feeds arbitrary bytes to the reader, as a client or as a
// server (mode bit 0) of newline-delimited or Content-Length framed
// messages (mode bit 1). The Conn must never panic, must stop reading
// (ReadDone; Done as a client) once the input is exhausted, must fail a
// pending call rather than hang, a server must answer what it read
// (Drain), and everything it writes must be one JSON object per frame.
func FuzzFraming(f *testing.F) {
	for _, s := range []string{
		`{"id":0,"result":{}}` + "\n",
		`{"method":"n","params":{}}` + "\n" + `{"id":0,"error":{"code":-1,"message":"x"}}`,
		`{"jsonrpc":"2.0","id":"a","method":"req","params":[1]}` + "\n",
		`{"method":"req","id":3}` + "\r\n\n" + `{"id":0,"result":null,"error":null}`,
		`[{"id":0}]`, `nul`, "\n\n\n", `{"id":1e400,"result":1}`,
		`{"id":0,"error":{"code":1e3,"message":"x","data":null}}`,
		string(bytes.Repeat([]byte("a"), 100)),
	} {
		for mode := range byte(4) {
			f.Add([]byte(s), mode)
		}
	}
	f.Add([]byte("Content-Length: 2\r\n\r\n{}Content-Length: 21\r\n\r\n{\"id\":1,\"method\":\"m\"}"), byte(3))
	f.Add([]byte(`{"id":1,"method":"m"}`+"\n"+`{"id":1,"method":"m"}`+"\n"+`{"id":"1","method":"m"}`), byte(1))
	f.Fuzz(func(t *testing.T, data []byte, mode byte) {
		server, framing := mode&1 != 0, Lines
		if mode&2 != 0 {
			framing = Headers
		}
		out := &lockedBuffer{}
		pr, pw := io.Pipe()
		c := NewConn(pr, out, Options{
			Server:          server,
			Framing:         framing,
			MaxInFlight:     4,
			MaxLine:         64,
			OnNotification:  func(string, json.RawMessage) {},
			OnProtocolError: func(error) {},
			OnRequest: func(_ context.Context, m string, p json.RawMessage) (any, *Error) {
				if len(p)%2 == 0 {
					return p, nil
				}
				return nil, &Error{Code: 1, Message: m}
			},
		})
		// A call is pending while the input is read; it must return.
		callDone := make(chan error, 1)
		go func() { callDone <- c.Call(context.Background(), "m", nil, nil) }()
		go func() {
			_, _ = pw.Write(data)
			pw.Close()
		}()
		deadline := time.After(10 * time.Second)
		select {
		case <-c.ReadDone():
		case <-deadline:
			t.Fatal("reader did not end")
		}
		if server {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			if err := c.Drain(ctx); err != nil {
				t.Fatal("requests read were not answered")
			}
			cancel()
			c.Close()
		}
		select {
		case <-callDone:
		case <-deadline:
			t.Fatal("call hung")
		}
		if c.Err() == nil {
			t.Fatal("Err nil after Done")
		}
		out.mu.Lock()
		written := append([]byte(nil), out.buf.Bytes()...)
		out.mu.Unlock()
		// Read back by a Conn that issued no call: answers to unknown ids
		// are expected, any other protocol error is not.
		rc := NewConn(bytes.NewReader(written), io.Discard, Options{Framing: framing, OnProtocolError: func(err error) {
			var pe *ProtocolError
			if errors.As(err, &pe) && !pe.Fatal && strings.HasPrefix(pe.Reason, "response") {
				return
			}
			t.Errorf("wrote an invalid frame: %v", err)
		}})
		<-rc.Done()
		if !errors.Is(rc.Err(), io.EOF) {
			t.Fatalf("what it wrote does not read back: %v", rc.Err())
		}
	})
}
