package mcp

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

func TestToolName(t *testing.T) {
	if got := ToolName("github", "create_issue"); got != "mcp__github__create_issue" {
		t.Errorf("plain name = %q", got)
	}
	dotted := ToolName("fs", "read.file")
	if !strings.HasPrefix(dotted, "mcp__fs__read_file_") || len(dotted) != len("mcp__fs__read_file_")+12 {
		t.Errorf("normalised name = %q", dotted)
	}
	if ToolName("fs", "read.file") != dotted {
		t.Error("the name is not a pure function of (server, raw)")
	}
	if ToolName("fs", "read_file") == dotted || ToolName("fs", "read/file") == dotted {
		t.Error("distinct raw names collide")
	}
	long := ToolName("a-server-with-a-long-name", strings.Repeat("x", 80))
	if len(long) != 64 {
		t.Errorf("long name has %d characters: %q", len(long), long)
	}
	for _, n := range []string{dotted, long, ToolName("s", "ünï côdé")} {
		for _, c := range n {
			if !(c == '_' || c == '-' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) {
				t.Errorf("%q has %q", n, c)
			}
		}
	}
}

func TestBackoffDelay(t *testing.T) {
	var got []time.Duration
	for n := 1; n <= 10; n++ {
		got = append(got, DefaultBackoff.Delay(n))
	}
	want := []time.Duration{500 * time.Millisecond, time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second, 30 * time.Second, 30 * time.Second, 30 * time.Second, 30 * time.Second}
	if !slicesEqual(got, want) {
		t.Errorf("delays %v, want %v", got, want)
	}
}

func slicesEqual[T comparable](a, b []T) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		cfg  ServerConfig
		want string
	}{
		{ServerConfig{Name: "bad name", Command: "x"}, "must be 1 to 32"},
		{ServerConfig{Name: strings.Repeat("a", 33), Command: "x"}, "must be 1 to 32"},
		{ServerConfig{Name: "a", Command: "x", URL: "http://h/mcp"}, "not both"},
		{ServerConfig{Name: "a"}, "needs command"},
		{ServerConfig{Name: "a", URL: "ftp://h"}, "http or https"},
		{ServerConfig{Name: "a", Command: "x", Headers: map[string]string{"A": "b"}}, "headers apply"},
		{ServerConfig{Name: "a", URL: "http://h/mcp", Cwd: "/"}, "apply to stdio"},
		{ServerConfig{Name: "a", Command: "x", Approval: "yes"}, "ask or auto"},
		{ServerConfig{Name: "a", Command: "x", Tools: ToolFilter{Allow: []string{"["}}}, "tool pattern"},
		{ServerConfig{Name: "a__b", Command: "x"}, `mcp server name "a__b" must not contain "__"`},
		{ServerConfig{Name: "a_", Command: "x"}, `mcp server name "a_" must not contain "__" or end with "_"`},
	} {
		if err := tc.cfg.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.cfg, err, tc.want)
		}
	}
	if err := ValidateSet([]ServerConfig{{Name: "a", Command: "x"}, {Name: "a", URL: "http://h"}}); err == nil || !strings.Contains(err.Error(), "twice") {
		t.Errorf("duplicate: %v", err)
	}
	f := ToolFilter{Allow: []string{"read_*", "list"}, Deny: []string{"read_secret"}}
	for name, want := range map[string]bool{"read_file": true, "list": true, "read_secret": false, "write": false} {
		if f.Match(name) != want {
			t.Errorf("filter %s = %v", name, !want)
		}
	}
	t.Setenv("DSH_TEST_TOKEN", "s3cret")
	if v, err := expand("Bearer ${DSH_TEST_TOKEN} $HOME"); err != nil || v != "Bearer s3cret $HOME" {
		t.Errorf("expand = %q, %v", v, err)
	}
	if _, err := expand("${DSH_TEST_UNSET_VARIABLE}"); err == nil || !strings.Contains(err.Error(), "DSH_TEST_UNSET_VARIABLE") {
		t.Errorf("unset variable: %v", err)
	}
}

// inproc is an MCP server implemented with the official SDK inside the
// test process, reached through Options.Transport.
type inproc struct {
	srv      *sdk.Server
	refuse   atomic.Bool // new connections fail
	failList atomic.Bool // tools/list answers with an error
	attempts atomic.Int32

	mu       sync.Mutex
	sessions []served
}

type echoIn struct {
	Message string `json:"message"`
}

func newInproc() *inproc {
	p := &inproc{srv: sdk.NewServer(&sdk.Implementation{Name: "inproc", Version: "1"}, nil)}
	sdk.AddTool(p.srv, &sdk.Tool{Name: "echo", Description: "echoes"}, func(_ context.Context, _ *sdk.CallToolRequest, in echoIn) (*sdk.CallToolResult, any, error) {
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "Echo: " + in.Message}}}, nil, nil
	})
	p.srv.AddReceivingMiddleware(func(next sdk.MethodHandler) sdk.MethodHandler {
		return func(ctx context.Context, method string, req sdk.Request) (sdk.Result, error) {
			if method == "tools/list" && p.failList.Load() {
				return nil, errors.New("listing is broken")
			}
			return next(ctx, method, req)
		}
	})
	return p
}

func (p *inproc) transport(ServerConfig) (sdk.Transport, error) {
	p.attempts.Add(1)
	if p.refuse.Load() {
		return nil, errors.New("connection refused")
	}
	// A pipe of our own rather than sdk.NewInMemoryTransports: drop must
	// be able to cut the server's end of it.
	cc, sc := net.Pipe()
	ss, err := p.srv.Connect(context.Background(), &sdk.IOTransport{Reader: sc, Writer: sc}, nil)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	p.sessions = append(p.sessions, served{ss, sc})
	p.mu.Unlock()
	return &sdk.IOTransport{Reader: cc, Writer: cc}, nil
}

// served is one connection the server accepted: its session and the
// server's end of the pipe.
type served struct {
	session *sdk.ServerSession
	conn    net.Conn
}

// drop ends every connection from the server's side, as a crash does: it
// cuts the pipe, which fails the session's reads and cancels its in-flight
// handlers, then waits for the session to end. (ServerSession.Close would
// wait for in-flight handlers first, and the client's long-lived
// subscriptions/listen call only ends when its connection does.)
func (p *inproc) drop() {
	p.mu.Lock()
	ss := p.sessions
	p.sessions = nil
	p.mu.Unlock()
	for _, s := range ss {
		_ = s.conn.Close()
		_ = s.session.Wait()
	}
}

// changes returns a channel that receives after every watcher call.
func changes(s *Server) (<-chan struct{}, func()) {
	ch := make(chan struct{}, 100)
	stop := s.Watch(func() {
		select {
		case ch <- struct{}{}:
		default:
		}
	})
	return ch, stop
}

// await waits for cond, re-checking after each watcher call.
func await(t *testing.T, ch <-chan struct{}, what string, cond func() bool) {
	t.Helper()
	deadline := time.NewTimer(20 * time.Second)
	defer deadline.Stop()
	for !cond() {
		select {
		case <-ch:
		case <-deadline.C:
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// TestReconnectBackoff runs the supervisor in a synctest bubble: after
// the connection drops, reconnection attempts come 500 ms, 1 s, 2 s, …
// 30 s apart, the tools are unregistered while it is down, and after 10
// failed attempts the server is given up with a clear error.
func TestReconnectBackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newInproc()
		var warnings []string
		var wmu sync.Mutex
		m, err := Start(t.Context(), []ServerConfig{{Name: "x", Command: "in-process"}}, Options{
			Transport: p.transport,
			Warn: func(s string) {
				wmu.Lock()
				warnings = append(warnings, s)
				wmu.Unlock()
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		s, _ := m.Server("x")
		if names := s.Status().Tools; !slicesEqual(names, []string{"mcp__x__echo"}) {
			t.Fatalf("tools %v", names)
		}
		// One drop with a server that comes back at the second attempt.
		p.refuse.Store(true)
		before := p.attempts.Load()
		start := time.Now()
		p.drop()
		synctest.Wait()
		if st := s.Status(); st.State != StateReconnecting || len(st.Tools) != 0 {
			t.Fatalf("after the drop: %+v", st)
		}
		time.Sleep(500 * time.Millisecond) // fake time: the first attempt
		synctest.Wait()
		if got := p.attempts.Load() - before; got != 1 {
			t.Fatalf("%d attempts after 500ms", got)
		}
		p.refuse.Store(false)
		time.Sleep(time.Second) // the second attempt succeeds
		synctest.Wait()
		if st := s.Status(); st.State != StateConnected || st.Reconnects != 1 || len(st.Tools) != 1 {
			t.Fatalf("after reconnecting: %+v", st)
		}
		if time.Since(start) != 1500*time.Millisecond {
			t.Fatalf("reconnected after %v", time.Since(start))
		}

		// A permanent outage after a stable connection (which ended the
		// first outage): 10 attempts at the doubling, capped delays.
		time.Sleep(DefaultBackoff.StableAfter)
		p.refuse.Store(true)
		before = p.attempts.Load()
		start = time.Now()
		p.drop()
		time.Sleep(151500*time.Millisecond - time.Nanosecond)
		synctest.Wait()
		if st := s.Status(); st.State != StateReconnecting || p.attempts.Load()-before != 9 {
			t.Fatalf("just before the 10th attempt: %+v, %d attempts", st, p.attempts.Load()-before)
		}
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		if got := p.attempts.Load() - before; got != 10 {
			t.Errorf("%d attempts, want 10", got)
		}
		if el := time.Since(start); el != 151500*time.Millisecond {
			t.Errorf("gave up after %v, want 2m31.5s (0.5+1+2+4+8+16+30·4 s)", el)
		}
		st := s.Status()
		if len(st.Tools) != 0 || !strings.Contains(st.LastError, "gave up after 10 reconnection attempts") || !strings.Contains(st.LastError, "connection refused") {
			t.Errorf("failed status %+v", st)
		}
		if _, err := s.CallTool(t.Context(), "echo", nil); CodeOf(err) != CodeDisconnected {
			t.Errorf("call while failed: %v", err)
		}
		wmu.Lock()
		defer wmu.Unlock()
		if len(warnings) == 0 || !strings.Contains(warnings[len(warnings)-1], "its tools are unavailable") {
			t.Errorf("warnings %q", warnings)
		}
		p.drop()
	})
}

// TestResyncAfterListChanged: a tool added on the server reaches the
// list through notifications/tools/list_changed; a resync that fails
// keeps the previous list.
func TestResyncAfterListChanged(t *testing.T) {
	p := newInproc()
	defer p.drop()
	m, err := Start(t.Context(), []ServerConfig{{Name: "x", Command: "in-process"}}, Options{Transport: p.transport})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	s, _ := m.Server("x")
	ch, stop := changes(s)
	defer stop()
	before := s.Tools()
	sdk.AddTool(p.srv, &sdk.Tool{Name: "added", Description: "new"}, func(context.Context, *sdk.CallToolRequest, echoIn) (*sdk.CallToolResult, any, error) {
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "added"}}}, nil, nil
	})
	await(t, ch, "resync", func() bool { return len(s.Tools()) == 2 })
	after := s.Tools()
	if after[0].Name != "mcp__x__added" || after[1] != before[0] {
		t.Errorf("tools after resync: %v, %v (the unchanged tool must keep its value)", after[0].Name, after[1].Name)
	}
	if res, err := s.CallTool(t.Context(), "added", []byte(`{"message":""}`)); err != nil || res.Content[0].(*sdk.TextContent).Text != "added" {
		t.Fatalf("call the new tool: %v", err)
	}

	p.failList.Store(true)
	n := s.Status().Resyncs
	p.srv.RemoveTools("added")
	await(t, ch, "failed resync", func() bool { return s.Status().Resyncs > n })
	st := s.Status()
	if len(st.Tools) != 2 || !strings.Contains(st.LastError, "resync failed (keeping the previous list)") {
		t.Errorf("after a failed resync: %+v", st)
	}
}

// TestToolListPaging: a server that pages its tool list is read to the
// end.
func TestToolListPaging(t *testing.T) {
	p := newInproc()
	p.srv = sdk.NewServer(&sdk.Implementation{Name: "paged", Version: "1"}, &sdk.ServerOptions{PageSize: 2})
	for _, n := range []string{"a", "b", "c", "d", "e"} {
		sdk.AddTool(p.srv, &sdk.Tool{Name: n}, func(context.Context, *sdk.CallToolRequest, echoIn) (*sdk.CallToolResult, any, error) {
			return &sdk.CallToolResult{}, nil, nil
		})
	}
	defer p.drop()
	m, err := Start(t.Context(), []ServerConfig{{Name: "x", Command: "in-process", Tools: ToolFilter{Deny: []string{"c"}}}}, Options{Transport: p.transport})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if names := m.Status()[0].Tools; strings.Join(names, ",") != "mcp__x__a,mcp__x__b,mcp__x__d,mcp__x__e" {
		t.Errorf("tools over three pages, c denied: %v", names)
	}
}
