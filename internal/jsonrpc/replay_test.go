package jsonrpc

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
)

// transcriptDir holds live Codex app-server wire transcripts: ">>> " lines
// were written by the client, "<<< " lines by the server.
const transcriptDir = "../../../shared/protocols/codex-app-server/transcripts"

type tline struct {
	client bool
	raw    string
	msg    inMessage
}

func loadTranscript(t *testing.T, path string) []tline {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Skipf("transcript not available: %v", err)
	}
	var out []tline
	for _, l := range strings.Split(strings.TrimRight(string(b), "\n"), "\n") {
		var tl tline
		switch {
		case strings.HasPrefix(l, ">>> "):
			tl.client = true
		case strings.HasPrefix(l, "<<< "):
		default:
			t.Fatalf("unexpected transcript line %q", l)
		}
		tl.raw = l[4:]
		if err := json.Unmarshal([]byte(tl.raw), &tl.msg); err != nil {
			t.Fatalf("transcript line not JSON: %v", err)
		}
		out = append(out, tl)
	}
	return out
}

func jsonEqual(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}

// TestReplayCodexTranscripts plays the server side of each real transcript
// against a Conn driven by the client side, and checks that the Conn writes
// exactly the client's messages (semantically; Codex dialect, no "jsonrpc"),
// gets every reply, and delivers every notification in order.
func TestReplayCodexTranscripts(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join(transcriptDir, "*.txt"))
	if len(files) == 0 {
		t.Skip("no transcripts under " + transcriptDir)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) { replay(t, loadTranscript(t, f)) })
	}
}

func replay(t *testing.T, lines []tline) {
	// Client request ids must be 0, 1, 2, ... to match the Conn's ids.
	answers := map[string]json.RawMessage{} // server request id -> client result
	replies := map[int]json.RawMessage{}    // client request id -> server result or error
	var wantNotes []string
	next := 0
	for _, l := range lines {
		m := l.msg
		switch {
		case l.client && len(m.Method) > 0 && len(m.ID) > 0:
			if string(m.ID) != string(mustJSON(next)) {
				t.Skipf("client ids not sequential at %s", m.ID)
			}
			next++
		case l.client && len(m.Method) == 0:
			if len(m.Result) == 0 {
				t.Skip("client error replies not replayed")
			}
			answers[string(m.ID)] = m.Result
		case !l.client && len(m.Method) == 0:
			var id int
			if err := json.Unmarshal(m.ID, &id); err != nil {
				t.Fatalf("server reply id %s", m.ID)
			}
			if len(m.Error) > 0 {
				replies[id] = m.Error
			} else {
				replies[id] = m.Result
			}
		case !l.client && len(m.ID) == 0:
			wantNotes = append(wantNotes, string(m.Method)+" "+string(compact(m.Params)))
		}
	}

	cr, pw := io.Pipe()
	pr, cw := io.Pipe()
	var notes []string
	var perrs []error
	conn := NewConn(cr, cw, Options{
		OnNotification: func(method string, params json.RawMessage) {
			notes = append(notes, mustJSONString(method)+" "+string(compact(params)))
		},
		OnRequest: func(_ context.Context, method string, params json.RawMessage) (any, *Error) {
			// Find the answer by looking the request up in the transcript.
			for _, l := range lines {
				if !l.client && len(l.msg.ID) > 0 && string(l.msg.Method) == mustJSONString(method) && jsonEqual(l.msg.Params, params) {
					return answers[string(l.msg.ID)], nil
				}
			}
			return nil, &Error{Code: CodeMethodNotFound, Message: method}
		},
		OnProtocolError: func(err error) { perrs = append(perrs, err) },
	})
	defer conn.Close()

	// Peer: write server lines, read and check client lines, and tell the
	// driver each time a client line has been consumed so that the driver's
	// writes happen in transcript order.
	consumed := make(chan int)
	peerErr := make(chan error, 1)
	go func() {
		defer close(consumed)
		br := newLineReader(pr)
		for i, l := range lines {
			if !l.client {
				if _, err := io.WriteString(pw, l.raw+"\n"); err != nil {
					peerErr <- err
					return
				}
				continue
			}
			got, err := br()
			if err != nil {
				peerErr <- err
				return
			}
			if bytes.Contains(got, []byte(`"jsonrpc"`)) || !jsonEqual(got, []byte(l.raw)) {
				t.Errorf("line %d: conn wrote %s, transcript has %s", i, got, l.raw)
			}
			consumed <- i
		}
		pw.Close()
		peerErr <- nil
	}()

	type res struct {
		id  int
		raw json.RawMessage
		err error
	}
	results := make(chan res, next)
	var wg sync.WaitGroup
	id := 0
	for i, l := range lines {
		if !l.client {
			continue
		}
		m := l.msg
		switch {
		case len(m.Method) > 0 && len(m.ID) > 0:
			var method string
			_ = json.Unmarshal(m.Method, &method)
			params := paramsOf(m.Params)
			myID := id
			id++
			wg.Go(func() {
				var raw json.RawMessage
				err := conn.Call(context.Background(), method, params, &raw)
				results <- res{myID, raw, err}
			})
		case len(m.Method) > 0:
			var method string
			_ = json.Unmarshal(m.Method, &method)
			if err := conn.Notify(method, paramsOf(m.Params)); err != nil {
				t.Fatal(err)
			}
		}
		if got, ok := <-consumed; !ok || got != i {
			t.Fatalf("peer consumed %d (ok=%v), want %d", got, ok, i)
		}
	}
	wg.Wait()
	close(results)
	for r := range results {
		want := replies[r.id]
		if e, ok := r.err.(*Error); ok {
			if !jsonEqual(mustJSON(e), want) {
				t.Errorf("call %d: error %s, want %s", r.id, mustJSON(e), want)
			}
		} else if r.err != nil || !jsonEqual(r.raw, want) {
			t.Errorf("call %d: got %s, %v; want %s", r.id, r.raw, r.err, want)
		}
	}
	if err := <-peerErr; err != nil {
		t.Fatal(err)
	}
	<-conn.Done() // the peer closed its side: EOF
	if conn.Err() != io.EOF || len(perrs) > 0 {
		t.Fatalf("Err %v, protocol errors %v", conn.Err(), perrs)
	}
	if strings.Join(notes, "\n") != strings.Join(wantNotes, "\n") {
		t.Fatalf("notifications differ:\n got %d\nwant %d", len(notes), len(wantNotes))
	}
}

func paramsOf(p json.RawMessage) any {
	if len(p) == 0 {
		return nil
	}
	return p
}

func compact(p json.RawMessage) []byte {
	var b bytes.Buffer
	if len(p) > 0 {
		_ = json.Compact(&b, p)
	}
	return b.Bytes()
}

func mustJSONString(s string) string { return string(mustJSON(s)) }

// newLineReader returns a function reading one "\n"-terminated line.
func newLineReader(r io.Reader) func() ([]byte, error) {
	var buf []byte
	tmp := make([]byte, 64<<10)
	return func() ([]byte, error) {
		for {
			if i := bytes.IndexByte(buf, '\n'); i >= 0 {
				line := append([]byte(nil), buf[:i]...)
				buf = buf[i+1:]
				return line, nil
			}
			n, err := r.Read(tmp)
			buf = append(buf, tmp[:n]...)
			if err != nil {
				return nil, err
			}
		}
	}
}
