package jsonrpc

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
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

// FuzzFraming feeds arbitrary bytes to the reader. The Conn must never
// panic, must end (Done) once the input is exhausted, must fail a pending
// call rather than hang, and everything it writes must be one JSON object
// per line.
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
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		out := &lockedBuffer{}
		pr, pw := io.Pipe()
		c := NewConn(pr, out, Options{
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
		case <-c.Done():
		case <-deadline:
			t.Fatal("reader did not end")
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
		sc := bufio.NewScanner(bytes.NewReader(written))
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var m map[string]json.RawMessage
			if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
				t.Fatalf("wrote a non-object line %q: %v", sc.Bytes(), err)
			}
		}
	})
}
