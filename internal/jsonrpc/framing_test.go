package jsonrpc

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"strconv"
	"strings"
	"testing"
)

// headerPeer is the fake remote end of a Conn using Headers framing.
type headerPeer struct {
	t    *testing.T
	in   *bufio.Reader
	out  *io.PipeWriter
	conn *Conn
}

func newHeaderPeer(t *testing.T, opts Options) *headerPeer {
	t.Helper()
	opts.Framing = Headers
	cr, pw := io.Pipe()
	pr, cw := io.Pipe()
	p := &headerPeer{t: t, in: bufio.NewReader(pr), out: pw}
	p.conn = NewConn(cr, cw, opts)
	t.Cleanup(func() {
		p.conn.Close()
		pw.Close()
		pr.Close()
	})
	return p
}

func (p *headerPeer) recv() string {
	p.t.Helper()
	b, err := readHeaderFrame(p.in, DefaultMaxLine)
	if err != nil {
		p.t.Fatalf("peer recv: %v", err)
	}
	return string(b)
}

func (p *headerPeer) sendRaw(s string) {
	p.t.Helper()
	if _, err := io.WriteString(p.out, s); err != nil {
		p.t.Fatalf("peer send: %v", err)
	}
}

func (p *headerPeer) send(body string) {
	p.t.Helper()
	p.sendRaw("Content-Length: " + strconv.Itoa(len(body)) + "\r\nContent-Type: application/vscode-jsonrpc; charset=utf-8\r\n\r\n" + body)
}

func TestHeadersCallNotifyAndServerRequest(t *testing.T) {
	notes := make(chan string, 1)
	p := newHeaderPeer(t, Options{
		Dialect:        V2,
		OnNotification: func(method string, params json.RawMessage) { notes <- method + " " + string(params) },
		OnRequest: func(_ context.Context, method string, _ json.RawMessage) (any, *Error) {
			return []any{nil}, nil
		},
	})
	type reply struct {
		v   string
		err error
	}
	done := make(chan reply, 1)
	go func() {
		var v string
		err := p.conn.Call(context.Background(), "textDocument/hover", map[string]string{"q": "é𝔘"}, &v)
		done <- reply{v, err}
	}()
	if got, want := p.recv(), `{"jsonrpc":"2.0","id":0,"method":"textDocument/hover","params":{"q":"é𝔘"}}`; got != want {
		t.Fatalf("request = %s, want %s", got, want)
	}
	// A server request and a notification arrive before the reply.
	p.send(`{"jsonrpc":"2.0","id":"cfg","method":"workspace/configuration","params":{}}`)
	if got, want := p.recv(), `{"jsonrpc":"2.0","id":"cfg","result":[null]}`; got != want {
		t.Fatalf("answer = %s, want %s", got, want)
	}
	p.send(`{"jsonrpc":"2.0","method":"window/logMessage","params":{"message":"ünïcode"}}`)
	if got := wait(t, notes); got != `window/logMessage {"message":"ünïcode"}` {
		t.Fatalf("notification = %s", got)
	}
	p.send(`{"jsonrpc":"2.0","id":0,"result":"ok"}`)
	r := wait(t, done)
	if r.err != nil || r.v != "ok" {
		t.Fatalf("call = %q, %v", r.v, r.err)
	}
}

func TestHeadersCancelUsesIDKey(t *testing.T) {
	p := newHeaderPeer(t, Options{Dialect: V2, CancelMethod: "$/cancelRequest", CancelIDKey: "id"})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.conn.Call(ctx, "slow", nil, nil) }()
	p.recv()
	cancel()
	if err := wait(t, done); !errors.Is(err, context.Canceled) {
		t.Fatalf("call = %v, want context.Canceled", err)
	}
	if got, want := p.recv(), `{"jsonrpc":"2.0","method":"$/cancelRequest","params":{"id":0}}`; got != want {
		t.Fatalf("cancel = %s, want %s", got, want)
	}
}

func TestHeadersMalformedFramesAreFatal(t *testing.T) {
	for name, raw := range map[string]string{
		"no colon":        "Content-Length 5\r\n\r\n{}",
		"bad length":      "Content-Length: x\r\n\r\n{}",
		"missing length":  "Content-Type: a\r\n\r\n{}",
		"not json":        "Content-Length: 3\r\n\r\nabc",
		"too long":        "Content-Length: 999999\r\n\r\n",
		"cut in the body": "Content-Length: 10\r\n\r\n{}",
	} {
		t.Run(name, func(t *testing.T) {
			perrs := make(chan error, 4)
			p := newHeaderPeer(t, Options{Dialect: V2, MaxLine: 1000, OnProtocolError: func(err error) { perrs <- err }})
			go func() {
				p.sendRaw(raw)
				p.out.Close()
			}()
			<-p.conn.Done()
			err := p.conn.Err()
			if err == nil || errors.Is(err, io.EOF) {
				t.Fatalf("Err = %v, want a framing error", err)
			}
			if name == "too long" && !errors.Is(err, ErrLineTooLong) {
				t.Fatalf("Err = %v, want ErrLineTooLong", err)
			}
			if name == "cut in the body" && !errors.Is(err, io.ErrUnexpectedEOF) {
				t.Fatalf("Err = %v, want io.ErrUnexpectedEOF", err)
			}
			if strings.Contains(name, "length") || name == "no colon" {
				var pe *ProtocolError
				if !errors.As(err, &pe) || !pe.Fatal {
					t.Fatalf("Err = %v (%T), want a fatal *ProtocolError", err, err)
				}
			}
		})
	}
}

func TestHeadersCleanEOF(t *testing.T) {
	p := newHeaderPeer(t, Options{Dialect: V2})
	p.send(`{"jsonrpc":"2.0","method":"x"}`)
	p.out.Close()
	<-p.conn.Done()
	if err := p.conn.Err(); !errors.Is(err, io.EOF) {
		t.Fatalf("Err = %v, want io.EOF", err)
	}
}

// FuzzHeaderFrame: any byte stream gives frames or an error, never a
// panic, and a frame is never longer than the limit.
func FuzzHeaderFrame(f *testing.F) {
	f.Add([]byte("Content-Length: 2\r\n\r\n{}"))
	f.Add([]byte("Content-Length: 2\r\nContent-Type: x\r\n\r\n{}Content-Length: 1\r\n\r\n"))
	f.Add([]byte("content-length:   -1\r\n\r\n"))
	f.Add([]byte("\r\n\r\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		br := bufio.NewReader(strings.NewReader(string(in)))
		for range 8 {
			b, err := readHeaderFrame(br, 64)
			if err != nil {
				return
			}
			if len(b) > 64 {
				t.Fatalf("frame of %d bytes over the limit", len(b))
			}
		}
	})
}
