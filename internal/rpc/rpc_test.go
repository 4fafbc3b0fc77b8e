package rpc_test

import (
	"context"
	"encoding/json"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dsh-dev/dsh/internal/app"
	"github.com/dsh-dev/dsh/internal/host"
	"github.com/dsh-dev/dsh/internal/jsonrpc"
	"github.com/dsh-dev/dsh/internal/llm/llmtest"
	"github.com/dsh-dev/dsh/internal/rpc"
	"github.com/dsh-dev/dsh/internal/session"
)

type note struct {
	method string
	params map[string]any
}

// harness runs rpc.Serve in process with a raw JSON-RPC client.
type harness struct {
	t      *testing.T
	srv    *llmtest.Server
	h      *host.Host
	client *jsonrpc.Conn
	cwd    string

	mu      sync.Mutex
	notes   []note
	changed chan struct{}
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	srv := llmtest.New()
	t.Cleanup(srv.Close)
	t.Setenv("DSH_HOME", t.TempDir())
	t.Setenv("DEEPSEEK_API_KEY", "test-key")
	t.Setenv("DEEPSEEK_BASE_URL", srv.URL())
	a, err := app.Open(t.Context(), app.Options{})
	if err != nil {
		t.Fatal(err)
	}
	h, err := host.New(host.Config{App: a, Holder: "rpc test"})
	if err != nil {
		t.Fatal(err)
	}
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	x := &harness{t: t, srv: srv, h: h, cwd: t.TempDir(), changed: make(chan struct{})}
	served := make(chan error, 1)
	go func() {
		served <- rpc.Serve(context.Background(), h, inR, outW, rpc.Options{})
		outW.Close()
	}()
	x.client = jsonrpc.NewConn(outR, inW, jsonrpc.Options{Dialect: jsonrpc.V2,
		OnNotification: func(method string, params json.RawMessage) {
			var p map[string]any
			_ = json.Unmarshal(params, &p)
			x.mu.Lock()
			x.notes = append(x.notes, note{method, p})
			close(x.changed)
			x.changed = make(chan struct{})
			x.mu.Unlock()
		}})
	t.Cleanup(func() {
		inW.Close()
		if err := <-served; err != nil {
			t.Error(err)
		}
		x.client.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := h.Close(ctx); err != nil {
			t.Error(err)
		}
		if err := a.Close(); err != nil {
			t.Error(err)
		}
	})
	return x
}

func (x *harness) call(method string, params, result any) *jsonrpc.Error {
	x.t.Helper()
	ctx, cancel := context.WithTimeout(x.t.Context(), 30*time.Second)
	defer cancel()
	err := x.client.Call(ctx, method, params, result)
	if err == nil {
		return nil
	}
	if re, ok := err.(*jsonrpc.Error); ok {
		return re
	}
	x.t.Fatalf("%s: %v", method, err)
	return nil
}

func (x *harness) must(method string, params, result any) {
	x.t.Helper()
	if err := x.call(method, params, result); err != nil {
		x.t.Fatalf("%s: %v", method, err)
	}
}

// waitNote waits for a notification satisfying ok.
func (x *harness) waitNote(ok func(note) bool) note {
	x.t.Helper()
	ctx, cancel := context.WithTimeout(x.t.Context(), 30*time.Second)
	defer cancel()
	seen := 0
	for {
		x.mu.Lock()
		notes, ch := x.notes, x.changed
		x.mu.Unlock()
		for ; seen < len(notes); seen++ {
			if ok(notes[seen]) {
				return notes[seen]
			}
		}
		select {
		case <-ch:
		case <-ctx.Done():
			x.t.Fatal("notification never came")
		}
	}
}

func eventOf(n note) (sid string, typ string, data map[string]any) {
	if n.method != "session/event" {
		return "", "", nil
	}
	e, _ := n.params["event"].(map[string]any)
	d, _ := e["data"].(map[string]any)
	t, _ := e["type"].(string)
	s, _ := n.params["sessionId"].(string)
	return s, t, d
}

func (x *harness) create() string {
	var r struct {
		Session host.Info `json:"session"`
	}
	x.must("session/create", map[string]any{"cwd": x.cwd}, &r)
	return r.Session.Header.ID
}

type promptResult struct {
	Result rpc.TurnResult `json:"result"`
}

func TestProtocolErrors(t *testing.T) {
	x := newHarness(t)
	if err := x.call("session/list", nil, nil); err == nil || err.Code != rpc.CodeNotInitialized {
		t.Fatalf("before initialize: %v", err)
	}
	x.must("initialize", map[string]any{"clientInfo": map[string]string{"name": "t"}}, nil)
	for _, tc := range []struct {
		method string
		params any
		code   int
		data   string
	}{
		{"session/create", map[string]any{}, jsonrpc.CodeInvalidParams, host.CodeInvalidArgument},
		{"session/create", map[string]any{"cwd": "relative/dir"}, jsonrpc.CodeInvalidParams, host.CodeInvalidArgument},
		{"session/create", map[string]any{"cwd": x.cwd, "bogus": 1}, jsonrpc.CodeInvalidParams, host.CodeInvalidArgument},
		{"session/create", map[string]any{"cwd": x.cwd, "permission": "yolo"}, rpc.CodeHostError, host.CodeInvalidArgument},
		{"session/prompt", map[string]any{"sessionId": "nope", "text": "x"}, rpc.CodeHostError, host.CodeSessionNotFound},
		{"session/prompt", map[string]any{"sessionId": "nope"}, jsonrpc.CodeInvalidParams, host.CodeInvalidArgument},
		{"session/events", map[string]any{"sessionId": "nope"}, rpc.CodeHostError, host.CodeSessionNotFound},
		{"approval/respond", map[string]any{"sessionId": "nope", "approvalId": "a", "decision": "maybe"}, rpc.CodeHostError, host.CodeInvalidArgument},
		{"nope", nil, jsonrpc.CodeMethodNotFound, ""},
	} {
		err := x.call(tc.method, tc.params, nil)
		if err == nil || err.Code != tc.code {
			t.Errorf("%s %v: %v", tc.method, tc.params, err)
			continue
		}
		var d struct{ Code string }
		_ = json.Unmarshal(err.Data, &d)
		if d.Code != tc.data {
			t.Errorf("%s %v: data code %q, want %q", tc.method, tc.params, d.Code, tc.data)
		}
	}
}

// TestChildrenEventsCancelAndPaging: a prompt whose turn delegates to a
// subagent child streams the child's events too; a cancelled prompt
// answers aborted; session/events pages the log.
func TestChildrenEventsCancelAndPaging(t *testing.T) {
	x := newHarness(t)
	x.must("initialize", nil, nil)
	// The child runs beside its parent (continuable), so answers go by
	// who asks, not by order; its settle notice may steer into the
	// parent's turn (one more request, 7 more input tokens) or start the
	// next one.
	x.srv.SetFallback(func(r llmtest.Request) llmtest.Response {
		all := jsonOf(r.Messages())
		switch {
		case !strings.Contains(all, "delegate"):
			return llmtest.Response{Text: "child answer"}
		case strings.Contains(all, "stall"):
			return llmtest.Response{Text: "never finished words", ChunkRunes: 2, StallAfter: 3}
		case r.ToolResultCount() == 0:
			return llmtest.Response{ToolCalls: []llmtest.ToolCall{{ID: "s1", Name: "subagent", Arguments: `{"description":"look","prompt":"child task"}`}}}
		}
		return llmtest.Response{Text: "parent done", Usage: &llmtest.Usage{Input: 7, Output: 3}}
	})
	id := x.create()
	var r promptResult
	x.must("session/prompt", map[string]any{"sessionId": id, "text": "delegate"}, &r)
	if r.Result.Status != session.EndCompleted || r.Result.Text != "parent done" || r.Result.Usage.InputTokens%7 != 0 || r.Result.Usage.InputTokens == 0 {
		t.Fatalf("result %+v", r.Result)
	}
	start := x.waitNote(func(n note) bool { s, typ, _ := eventOf(n); return s == id && typ == session.TypeSubagentStart })
	_, _, d := eventOf(start)
	child, _ := d["childId"].(string)
	if child == "" || child == id {
		t.Fatalf("subagent/start %v", d)
	}
	x.waitNote(func(n note) bool {
		s, typ, d := eventOf(n)
		if s != child || typ != session.TypeAssistantMsg {
			return false
		}
		b, _ := json.Marshal(d)
		return contains(string(b), "child answer")
	})
	x.waitNote(func(n note) bool { return n.method == "session/status" && n.params["sessionId"] == id })

	// Cancel a stalled turn.
	done := make(chan promptResult, 1)
	go func() {
		var r promptResult
		_ = x.client.Call(context.Background(), "session/prompt", map[string]any{"sessionId": id, "text": "stall"}, &r)
		done <- r
	}()
	x.waitNote(func(n note) bool {
		s, typ, d := eventOf(n)
		return s == id && typ == session.TypeAssistantChunk && d != nil && contains(jsonOf(d), `"text":"ne"`)
	})
	x.must("session/cancel", map[string]any{"sessionId": id}, nil)
	if r := <-done; r.Result.Status != session.EndAborted || r.Result.Cause != "user" {
		t.Fatalf("cancelled prompt %+v", r.Result)
	}

	// Paging.
	var page struct {
		Events []session.Event `json:"events"`
		Next   int64           `json:"next"`
	}
	x.must("session/events", map[string]any{"sessionId": id, "after": -1, "limit": 3}, &page)
	if len(page.Events) != 3 || page.Next != 2 || page.Events[0].Seq != 0 {
		t.Fatalf("first page %d events, next %d", len(page.Events), page.Next)
	}
	x.must("session/events", map[string]any{"sessionId": id, "after": page.Next, "limit": 2}, &page)
	if len(page.Events) != 2 || page.Events[0].Seq != 3 {
		t.Fatalf("second page %+v", page)
	}
	var list struct {
		Sessions []host.Info `json:"sessions"`
	}
	x.must("session/list", map[string]any{"cwd": x.cwd}, &list)
	if len(list.Sessions) != 1 || list.Sessions[0].Header.ID != id {
		t.Fatalf("list %+v", list)
	}
	x.must("session/list", map[string]any{"cwd": x.cwd, "includeChildren": true}, &list)
	if len(list.Sessions) != 2 {
		t.Fatalf("list with children: %d", len(list.Sessions))
	}
	var p1, p2 struct {
		Sessions   []host.Info `json:"sessions"`
		NextCursor string      `json:"nextCursor"`
	}
	x.must("session/list", map[string]any{"cwd": x.cwd, "includeChildren": true, "limit": 1}, &p1)
	x.must("session/list", map[string]any{"cwd": x.cwd, "includeChildren": true, "limit": 1, "cursor": p1.NextCursor}, &p2)
	if len(p1.Sessions) != 1 || p1.NextCursor == "" || len(p2.Sessions) != 1 || p2.NextCursor != "" ||
		p1.Sessions[0].Header.ID == p2.Sessions[0].Header.ID {
		t.Fatalf("pages %+v / %+v", p1, p2)
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }

func jsonOf(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
