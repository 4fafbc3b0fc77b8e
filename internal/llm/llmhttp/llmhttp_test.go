package llmhttp

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/dsh-dev/dsh/internal/llm"
	"github.com/dsh-dev/dsh/internal/llm/llmhttp/llmhttptest"
	"github.com/dsh-dev/dsh/internal/llm/sse"
)

func TestJoinURL(t *testing.T) {
	tests := []struct{ base, def, path, want string }{
		{"", "https://api.example.com/v1", "/chat/completions", "https://api.example.com/v1/chat/completions"},
		{"http://local:8080//", "https://x", "/v1/messages", "http://local:8080/v1/messages"},
		{"http://gw/anthropic", "https://x", "/v1/messages", "http://gw/anthropic/v1/messages"},
	}
	for _, tt := range tests {
		if got := JoinURL(tt.base, tt.def, tt.path); got != tt.want {
			t.Errorf("JoinURL(%q, %q, %q) = %q; want %q", tt.base, tt.def, tt.path, got, tt.want)
		}
	}
}

func TestEmitter(t *testing.T) {
	var got []llm.ChunkType
	var errs []error
	e := Emitter{Yield: func(c llm.Chunk, err error) bool {
		if err != nil {
			errs = append(errs, err)
			return false
		}
		got = append(got, c.Type)
		return len(got) < 2
	}}
	e.Fail(nil)
	if !e.Emit(llm.Chunk{Type: llm.ChunkTextDelta}) || e.Stopped() {
		t.Fatal("first Emit: consumer wants more")
	}
	if e.Emit(llm.Chunk{Type: llm.ChunkUsage}) || !e.Stopped() {
		t.Fatal("second Emit: consumer stopped")
	}
	e.Emit(llm.Chunk{Type: llm.ChunkFinish})
	e.Fail(&llm.Failure{Code: llm.CodeServer})
	if len(got) != 2 || len(errs) != 0 {
		t.Fatalf("yielded %v and errors %v after the consumer stopped", got, errs)
	}

	e = Emitter{Yield: func(c llm.Chunk, err error) bool { errs = append(errs, err); return true }}
	e.Fail(&llm.Failure{Code: llm.CodeServer})
	if len(errs) != 1 {
		t.Fatalf("Fail yielded %v", errs)
	}
}

type textPartial string

func (p textPartial) Final() llm.Block { return llm.TextBlock(string(p)) }

// TestEmitterBlocks: blocks are numbered in start order, end once, and
// Finish ends the rest in start order before usage and finish.
func TestEmitterBlocks(t *testing.T) {
	var got []string
	e := Emitter{Yield: func(c llm.Chunk, err error) bool {
		s := fmt.Sprintf("%s:%d", c.Type, c.Index)
		if c.Block != nil {
			s += ":" + c.Block.Text
		}
		got = append(got, s)
		return true
	}}
	a := e.StartBlock(llm.BlockText, textPartial("a"))
	b := e.StartBlock(llm.BlockToolCall, textPartial("b"))
	c := e.StartBlock(llm.BlockText, textPartial("c"))
	e.EndBlock(b)
	e.EndBlock(b) // not open any more
	e.EmitUsage(nil)
	e.Finish(&llm.Finish{Reason: llm.FinishStop}, &llm.Usage{OutputTokens: 1})
	want := "block-start:0 block-start:1 block-start:2 block-end:1:b block-end:0:a block-end:2:c usage:0 finish:0"
	if a != 0 || b != 1 || c != 2 || strings.Join(got, " ") != want {
		t.Errorf("indexes %d %d %d, chunks\n got %s\nwant %s", a, b, c, strings.Join(got, " "), want)
	}
}

// fakeDecoder records events; the event with data "end" is the end
// marker and one with data "finish" makes the answer complete.
type fakeDecoder struct {
	Emitter
	events   []string
	complete bool
	ended    string
}

func (d *fakeDecoder) Event(ev sse.Event) (bool, *llm.Failure) {
	d.events = append(d.events, ev.Event+":"+ev.Data)
	switch ev.Data {
	case "end":
		return true, nil
	case "finish":
		d.complete = true
	case "fail":
		return false, &llm.Failure{Code: llm.CodeServer, Message: "event failed"}
	}
	d.Emit(llm.Chunk{Type: llm.ChunkTextDelta, Text: ev.Data})
	return false, nil
}

func (d *fakeDecoder) End(marker bool) *llm.Failure {
	d.ended = fmt.Sprint(marker)
	if !d.complete {
		return &llm.Failure{Code: llm.CodeStreamClosed, Message: "no finish"}
	}
	return nil
}

func (d *fakeDecoder) Complete() bool { return d.complete }

func newFake() *fakeDecoder {
	return &fakeDecoder{Emitter: Emitter{Yield: func(llm.Chunk, error) bool { return true }}}
}

func TestEndpointStream(t *testing.T) {
	sseWrite := func(w http.ResponseWriter, s string) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, s)
	}
	tests := []struct {
		name   string
		handle func(w http.ResponseWriter, r *http.Request)
		code   llm.Code // "" for success
		events string
		ended  string
	}{
		{"end marker", func(w http.ResponseWriter, r *http.Request) {
			sseWrite(w, ": ping\n\nevent: a\ndata: finish\n\ndata: end\n\ndata: never\n\n")
		}, "", "a:finish :end", "true"},
		{"clean EOF", func(w http.ResponseWriter, r *http.Request) {
			sseWrite(w, "data: finish\n\n")
		}, "", ":finish", "false"},
		{"clean EOF before finish", func(w http.ResponseWriter, r *http.Request) {
			sseWrite(w, "data: x\n\n")
		}, llm.CodeStreamClosed, ":x", "false"},
		{"cut after finish", func(w http.ResponseWriter, r *http.Request) {
			sseWrite(w, "data: finish\n\ndata: par")
		}, "", ":finish", "false"},
		{"cut before finish", func(w http.ResponseWriter, r *http.Request) {
			sseWrite(w, "data: x\n\ndata: par")
		}, llm.CodeTransport, ":x", ""},
		{"event failure", func(w http.ResponseWriter, r *http.Request) {
			sseWrite(w, "data: fail\n\ndata: never\n\n")
		}, llm.CodeServer, ":fail", ""},
		{"HTTP error", func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusTooManyRequests)
		}, llm.CodeRateLimit, "", ""},
		{"JSON error body", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json; charset=utf-8")
			fmt.Fprint(w, `{"error":{"message":"nope","type":"auth"}}`)
		}, llm.CodeAuth, "", ""},
		{"JSON body without error", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"choices":[]}`)
		}, llm.CodeMalformedResponse, "", ""},
		{"stall", func(w http.ResponseWriter, r *http.Request) {
			sseWrite(w, "data: x\n\n")
			w.(http.Flusher).Flush()
			<-r.Context().Done()
		}, llm.CodeTimeout, ":x", ""},
	}
	for _, tt := range tests {
		// In a synctest bubble over in-memory connections the 100 ms idle
		// limit is fake time: only the stall case reaches it, however
		// loaded the machine.
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				url, client, capture := llmhttptest.PipeServer(t, tt.handle)
				ep := Endpoint{
					URL: url, Client: client, IdleTimeout: 100 * time.Millisecond, Failer: Failer{Provider: "p"},
					JSONError: func(e APIError) (llm.Code, bool) { return llm.CodeAuth, e.Message != "" },
				}
				d := newFake()
				f := ep.Stream(t.Context(), map[string]string{"model": "m"}, func(h http.Header) { h.Set("X-Test", "yes") }, d)
				if (f == nil) != (tt.code == "") || (f != nil && f.Code != tt.code) {
					t.Fatalf("failure = %v; want %q", f, tt.code)
				}
				if f != nil && !strings.HasPrefix(f.Message, "p: ") && tt.code != llm.CodeServer && tt.code != llm.CodeStreamClosed {
					t.Errorf("message %q lacks the provider", f.Message)
				}
				if e := strings.Join(d.events, " "); e != tt.events || d.ended != tt.ended {
					t.Errorf("events %q, ended %q; want %q, %q", e, d.ended, tt.events, tt.ended)
				}
				header, _, body := capture.Get()
				if body["model"] != "m" || header.Get("X-Test") != "yes" {
					t.Errorf("server got %v, %v", body, header)
				}
			})
		})
	}
}

func TestEndpointStreamCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	ep := Endpoint{URL: "http://127.0.0.1:1", IdleTimeout: time.Second, Failer: Failer{Provider: "p"}}
	f := ep.Stream(ctx, struct{}{}, func(http.Header) {}, newFake())
	if f == nil || f.Code != llm.CodeAborted {
		t.Fatalf("failure = %v; want ABORTED", f)
	}
	f = ep.Stream(t.Context(), func() {}, func(http.Header) {}, newFake())
	if f == nil || f.Code != llm.CodeInvalidRequest || !strings.Contains(f.Message, "encode request") {
		t.Fatalf("failure = %v; want INVALID_REQUEST for an unencodable body", f)
	}
}

// TestEndpointStreamStopped: a consumer that stops ends the stream at
// once, without a failure.
func TestEndpointStreamStopped(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "data: a\n\ndata: b\n\n")
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}))
	defer srv.Close()
	d := &fakeDecoder{Emitter: Emitter{Yield: func(llm.Chunk, error) bool { return false }}}
	ep := Endpoint{URL: srv.URL, IdleTimeout: time.Minute}
	if f := ep.Stream(t.Context(), nil, func(http.Header) {}, d); f != nil || len(d.events) != 1 {
		t.Fatalf("failure %v after events %v; want nil after one", f, d.events)
	}
}

func TestEndpointHeaders(t *testing.T) {
	var got http.Header
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r.Header.Clone()
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "data: finish\n\n")
	}))
	defer srv.Close()
	ep := Endpoint{URL: srv.URL, UserAgent: "dsh/1", Headers: map[string]string{"X-Key": "from-config", "Accept": "*/*"}}
	provider := func(h http.Header) { h.Set("X-Key", "from-provider"); h.Set("X-Version", "2") }
	if f := ep.Stream(t.Context(), nil, provider, newFake()); f != nil {
		t.Fatal(f)
	}
	for k, want := range map[string]string{
		"Content-Type": "application/json", "Accept": "*/*", "User-Agent": "dsh/1", "X-Key": "from-config", "X-Version": "2",
	} {
		if got.Get(k) != want {
			t.Errorf("header %s = %q; want %q", k, got.Get(k), want)
		}
	}
}

// TestEndpointBody checks that a Body in pieces arrives as the one JSON
// document it spells, with its length declared as for an encoded value
// (not chunked), and that any other body is encoded as JSON.
func TestEndpointBody(t *testing.T) {
	type received struct {
		body     string
		length   int64
		encoding []string
	}
	var got received
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got = received{string(b), r.ContentLength, r.TransferEncoding}
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "data: finish\n\n")
	}))
	defer srv.Close()
	ep := Endpoint{URL: srv.URL}
	for _, tc := range []struct {
		body any
		want string
	}{
		{Body{[]byte(`{"a":`), nil, []byte(`[1,`), []byte(`2]}`)}, `{"a":[1,2]}`},
		{map[string]int{"b": 1}, `{"b":1}`},
	} {
		if f := ep.Stream(t.Context(), tc.body, nil, newFake()); f != nil {
			t.Fatal(f)
		}
		if want := (received{tc.want, int64(len(tc.want)), nil}); !reflect.DeepEqual(got, want) {
			t.Errorf("server received %+v; want %+v", got, want)
		}
	}
}
