package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dsh-dev/dsh/internal/jsonrpc"
)

type client struct {
	conn   *jsonrpc.Conn
	stderr *syncBuffer
	code   chan int

	mu     sync.Mutex
	chunks []string
	ids    []string
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// start runs the agent over io.Pipe and connects a jsonrpc client to it.
func start(t *testing.T, args ...string) *client {
	t.Helper()
	inR, inW := io.Pipe()   // client → agent
	outR, outW := io.Pipe() // agent → client
	c := &client{stderr: &syncBuffer{}, code: make(chan int, 1)}
	go func() {
		c.code <- run(context.Background(), args, inR, outW, c.stderr)
		_ = outW.Close()
	}()
	c.conn = jsonrpc.NewConn(outR, inW, jsonrpc.Options{
		Dialect: jsonrpc.V2,
		OnNotification: func(method string, params json.RawMessage) {
			if method != "session/update" {
				return
			}
			var p struct {
				SessionID string `json:"sessionId"`
				Update    struct {
					SessionUpdate string `json:"sessionUpdate"`
					Content       struct {
						Type string `json:"type"`
						Text string `json:"text"`
					} `json:"content"`
				} `json:"update"`
			}
			if err := json.Unmarshal(params, &p); err != nil {
				t.Errorf("bad update: %v", err)
				return
			}
			if p.Update.SessionUpdate != "agent_message_chunk" || p.Update.Content.Type != "text" {
				t.Errorf("unexpected update %s", params)
			}
			c.mu.Lock()
			c.chunks = append(c.chunks, p.Update.Content.Text)
			c.ids = append(c.ids, p.SessionID)
			c.mu.Unlock()
		},
	})
	t.Cleanup(func() { c.stop(t) })
	return c
}

// stop closes the client side and checks that run returns 0.
func (c *client) stop(t *testing.T) {
	t.Helper()
	_ = c.conn.Close()
	select {
	case code := <-c.code:
		if code != 0 {
			t.Errorf("run = %d, stderr %q", code, c.stderr.String())
		}
		c.code <- code
	case <-time.After(5 * time.Second):
		t.Fatal("run did not return after the client closed")
	}
}

func (c *client) takeChunks() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.chunks
	c.chunks, c.ids = nil, nil
	return out
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func (c *client) handshake(t *testing.T, cwd string) string {
	t.Helper()
	ctx := ctxT(t)
	var init struct {
		ProtocolVersion   int             `json:"protocolVersion"`
		AgentCapabilities json.RawMessage `json:"agentCapabilities"`
	}
	if err := c.conn.Call(ctx, "initialize", map[string]any{"protocolVersion": 1, "clientCapabilities": map[string]any{}}, &init); err != nil {
		t.Fatalf("initialize: %v", err)
	}
	if init.ProtocolVersion != 1 || string(init.AgentCapabilities) != "{}" {
		t.Fatalf("initialize result = %+v", init)
	}
	var sess struct {
		SessionID string `json:"sessionId"`
	}
	if err := c.conn.Call(ctx, "session/new", map[string]any{"cwd": cwd, "mcpServers": []any{}}, &sess); err != nil {
		t.Fatalf("session/new: %v", err)
	}
	if sess.SessionID != "fake-1" {
		t.Fatalf("sessionId = %q", sess.SessionID)
	}
	return sess.SessionID
}

func (c *client) prompt(ctx context.Context, session, text string) (string, error) {
	var res struct {
		StopReason string `json:"stopReason"`
	}
	err := c.conn.Call(ctx, "session/prompt", map[string]any{
		"sessionId": session,
		"prompt":    []map[string]string{{"type": "text", "text": text}},
	}, &res)
	return res.StopReason, err
}

func TestDefaultReplyAndCwdFile(t *testing.T) {
	cwdFile := filepath.Join(t.TempDir(), "cwd")
	c := start(t, "-cwd-file", cwdFile)
	sid := c.handshake(t, "/some/dir")
	got, err := os.ReadFile(cwdFile)
	if err != nil || string(got) != "/some/dir" {
		t.Fatalf("cwd file = %q, %v", got, err)
	}
	stop, err := c.prompt(ctxT(t), sid, "hello")
	if err != nil || stop != "end_turn" {
		t.Fatalf("prompt = %q, %v", stop, err)
	}
	c.mu.Lock()
	ids := c.ids
	c.mu.Unlock()
	chunks := c.takeChunks()
	if len(chunks) != 2 || strings.Join(chunks, "") != defaultReply {
		t.Fatalf("chunks = %q", chunks)
	}
	if ids[0] != sid || ids[1] != sid {
		t.Fatalf("session ids = %q", ids)
	}
}

func TestReplyFlagAndEcho(t *testing.T) {
	c := start(t, "-reply", "custom answer")
	sid := c.handshake(t, t.TempDir())
	ctx := ctxT(t)
	if stop, err := c.prompt(ctx, sid, "do something"); err != nil || stop != "end_turn" {
		t.Fatalf("prompt = %q, %v", stop, err)
	}
	if got := c.takeChunks(); len(got) != 2 || strings.Join(got, "") != "custom answer" {
		t.Fatalf("chunks = %q", got)
	}
	const text = "please ECHO this back"
	if stop, err := c.prompt(ctx, sid, text); err != nil || stop != "end_turn" {
		t.Fatalf("prompt = %q, %v", stop, err)
	}
	if got := c.takeChunks(); len(got) != 2 || strings.Join(got, "") != "echo: "+text {
		t.Fatalf("chunks = %q", got)
	}
	// ECHO must be a word of its own.
	if _, err := c.prompt(ctx, sid, "ECHOES"); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(c.takeChunks(), ""); got != "custom answer" {
		t.Fatalf("reply = %q", got)
	}
}

func TestWaitCancel(t *testing.T) {
	c := start(t, "-wait")
	sid := c.handshake(t, "/")
	type result struct {
		stop string
		err  error
	}
	done := make(chan result, 1)
	go func() {
		stop, err := c.prompt(ctxT(t), sid, "hi")
		done <- result{stop, err}
	}()
	deadline := time.Now().Add(5 * time.Second)
	for {
		c.mu.Lock()
		n := len(c.chunks)
		c.mu.Unlock()
		if n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no first chunk")
		}
		time.Sleep(5 * time.Millisecond)
	}
	select {
	case r := <-done:
		t.Fatalf("prompt answered before cancel: %+v", r)
	case <-time.After(50 * time.Millisecond):
	}
	if err := c.conn.Notify("session/cancel", map[string]string{"sessionId": sid}); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil || r.stop != "cancelled" {
		t.Fatalf("prompt = %+v", r)
	}
	if got := c.takeChunks(); len(got) != 1 {
		t.Fatalf("chunks = %q", got)
	}
}

func TestUnknownMethod(t *testing.T) {
	c := start(t)
	err := c.conn.Call(ctxT(t), "session/load", map[string]any{}, nil)
	var rpcErr *jsonrpc.Error
	if !errors.As(err, &rpcErr) || rpcErr.Code != jsonrpc.CodeMethodNotFound {
		t.Fatalf("err = %v", err)
	}
}

func TestBadFlags(t *testing.T) {
	var stderr bytes.Buffer
	if code := run(context.Background(), []string{"-nope"}, strings.NewReader(""), io.Discard, &stderr); code != 2 {
		t.Fatalf("run = %d", code)
	}
	if code := run(context.Background(), []string{"extra"}, strings.NewReader(""), io.Discard, &stderr); code != 2 {
		t.Fatalf("run = %d", code)
	}
}

func TestContextEndsRun(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	inR, _ := io.Pipe()
	code := make(chan int, 1)
	go func() { code <- run(ctx, nil, inR, io.Discard, io.Discard) }()
	cancel()
	select {
	case c := <-code:
		if c != 0 {
			t.Fatalf("run = %d", c)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("run did not return")
	}
}

func TestSplit(t *testing.T) {
	for _, s := range []string{"", "a", "ab", "abc", "a b", "héllo", "x ", " x", "one two three"} {
		a, b := split(s)
		if a+b != s {
			t.Errorf("split(%q) = %q, %q", s, a, b)
		}
	}
}
