package mcp

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/dsh-dev/dsh/internal/mcp/mcptest"
)

// trace collects the frames dsh writes to stdio servers and signals
// each one on a channel.
type trace struct {
	mu     sync.Mutex
	frames []string
	ch     chan struct{}
}

func newTrace() *trace { return &trace{ch: make(chan struct{}, 1000)} }

func (tr *trace) record(_ string, b []byte) {
	tr.mu.Lock()
	tr.frames = append(tr.frames, string(b))
	tr.mu.Unlock()
	select {
	case tr.ch <- struct{}{}:
	default:
	}
}

// find waits for a frame containing s.
func (tr *trace) find(t *testing.T, s string) string {
	t.Helper()
	deadline := time.NewTimer(20 * time.Second)
	defer deadline.Stop()
	for {
		tr.mu.Lock()
		for _, f := range tr.frames {
			if strings.Contains(f, s) {
				tr.mu.Unlock()
				return f
			}
		}
		tr.mu.Unlock()
		select {
		case <-tr.ch:
		case <-deadline.C:
			t.Fatalf("no frame with %q was sent", s)
		}
	}
}

func startOne(t *testing.T, cfg ServerConfig, o Options) (*Manager, *Server) {
	t.Helper()
	if o.Dir == "" {
		o.Dir = t.TempDir()
	}
	if o.Warn == nil {
		o.Warn = func(s string) { t.Log(s) }
	}
	m, err := Start(t.Context(), []ServerConfig{cfg}, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	s, _ := m.Server(cfg.Name)
	return m, s
}

func text(t *testing.T, res *sdk.CallToolResult) string {
	t.Helper()
	var parts []string
	for _, c := range res.Content {
		if tc, ok := c.(*sdk.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// TestEverythingOverStdio drives the real server-everything: echo, the
// scrubbed environment, structured content checked against its output
// schema, a call past tool_timeout (MCP_TIMEOUT, cancelled on the
// server) and a call cancelled by its caller (cancelled on the server).
func TestEverythingOverStdio(t *testing.T) {
	bin := mcptest.Everything(t)
	t.Setenv("DSH_TEST_SECRET_TOKEN", "hunter2-do-not-leak")
	tr := newTrace()
	_, s := startOne(t, ServerConfig{Name: "everything", Command: bin, ToolTimeout: 2 * time.Second, Env: map[string]string{"GIVEN": "on-purpose"}}, Options{Trace: tr.record})
	st := s.Status()
	if st.State != StateConnected || !st.Resources || !st.Prompts || st.PID == 0 {
		t.Fatalf("status %+v", st)
	}
	res, err := s.CallTool(t.Context(), "echo", json.RawMessage(`{"message":"hello"}`))
	if err != nil || text(t, res) != "Echo: hello" {
		t.Fatalf("echo: %v %+v", err, res)
	}

	res, err = s.CallTool(t.Context(), "get-env", nil)
	if err != nil {
		t.Fatal(err)
	}
	env := text(t, res)
	if strings.Contains(env, "hunter2") || strings.Contains(env, "DSH_TEST_SECRET_TOKEN") {
		t.Errorf("the server saw dsh's secret: %s", env)
	}
	if !strings.Contains(env, `"GIVEN": "on-purpose"`) || !strings.Contains(env, `"PATH"`) {
		t.Errorf("the server's environment lacks the configured or base variables: %s", env)
	}

	tool, ok := s.Lookup("mcp__everything__get-structured-content")
	if !ok || tool.OutputSchema == nil {
		t.Fatal("get-structured-content has no output schema")
	}
	res, err = s.CallTool(t.Context(), "get-structured-content", json.RawMessage(`{"location":"Chicago"}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := tool.CheckStructured(res); err != nil {
		t.Errorf("valid structured content rejected: %v", err)
	}
	res.StructuredContent = map[string]any{"temperature": "hot"}
	if err := tool.CheckStructured(res); CodeOf(err) != CodeSchema {
		t.Errorf("invalid structured content: %v", err)
	}

	// Past tool_timeout: MCP_TIMEOUT, and the request is cancelled on
	// the server.
	start := time.Now()
	_, err = s.CallTool(t.Context(), "trigger-long-running-operation", json.RawMessage(`{"duration":30,"steps":30}`))
	if CodeOf(err) != CodeTimeout {
		t.Fatalf("long call: %v", err)
	}
	if el := time.Since(start); el > 10*time.Second {
		t.Errorf("the timeout took %v", el)
	}
	call := tr.find(t, `"trigger-long-running-operation"`)
	id := requestID(t, call)
	tr.find(t, fmt.Sprintf(`"method":"notifications/cancelled","params":{"reason":"context deadline exceeded","requestId":%s}`, id))

	// The caller cancels (the turn was cancelled).
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		_, err := s.CallTool(ctx, "trigger-long-running-operation", json.RawMessage(`{"duration":29,"steps":29}`))
		done <- err
	}()
	call = tr.find(t, `"duration":29`)
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) || CodeOf(err) != "" {
		t.Errorf("cancelled call: %v", err)
	}
	tr.find(t, fmt.Sprintf(`"requestId":%s`, requestID(t, call)))

	// The server still works.
	if res, err := s.CallTool(t.Context(), "get-sum", json.RawMessage(`{"a":2,"b":3}`)); err != nil || !strings.Contains(text(t, res), "5") {
		t.Errorf("get-sum after cancellations: %v %v", err, res)
	}
}

func requestID(t *testing.T, frame string) string {
	t.Helper()
	var f struct {
		ID json.RawMessage `json:"id"`
	}
	if err := json.Unmarshal([]byte(frame), &f); err != nil || f.ID == nil {
		t.Fatalf("frame without id: %s", frame)
	}
	return string(f.ID)
}

// TestKill9Reconnects kills the server process with SIGKILL: its tools
// go away, the supervisor starts it again and they come back.
func TestKill9Reconnects(t *testing.T) {
	bin := mcptest.Everything(t)
	_, s := startOne(t, ServerConfig{Name: "everything", Command: bin}, Options{Backoff: Backoff{Initial: 20 * time.Millisecond}})
	ch, stop := changes(s)
	defer stop()
	pid := s.Status().PID
	n := len(s.Tools())
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	await(t, ch, "tools unregistered", func() bool { return len(s.Tools()) == 0 })
	t.Logf("unregistered %v after the kill", time.Since(killed))
	await(t, ch, "reconnection", func() bool { st := s.Status(); return st.State == StateConnected && st.PID != pid })
	st := s.Status()
	if st.Reconnects != 1 || len(st.Tools) != n {
		t.Errorf("after reconnecting: %+v", st)
	}
	if res, err := s.CallTool(t.Context(), "echo", json.RawMessage(`{"message":"again"}`)); err != nil || text(t, res) != "Echo: again" {
		t.Errorf("echo after reconnecting: %v", err)
	}
	if syscall.Kill(pid, 0) == nil {
		t.Errorf("the killed server %d is still there", pid)
	}
}

// TestCrashLoopGivesUp: a server that crashes at every restart is given
// up after the configured attempts; its tools stay unregistered and the
// error says why, with the server's own stderr.
func TestCrashLoopGivesUp(t *testing.T) {
	bin := mcptest.Everything(t)
	dir := t.TempDir()
	mark := filepath.Join(dir, "crash")
	script := filepath.Join(dir, "server.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\nif [ -e "+mark+" ]; then echo 'boom: database unreachable' >&2; exit 3; fi\nexec "+bin+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var warnings []string
	_, s := startOne(t, ServerConfig{Name: "flaky", Command: script}, Options{
		Backoff: Backoff{Initial: 10 * time.Millisecond, Max: 40 * time.Millisecond, Attempts: 3},
		Warn:    func(w string) { mu.Lock(); warnings = append(warnings, w); mu.Unlock() },
	})
	ch, stop := changes(s)
	defer stop()
	if err := os.WriteFile(mark, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(s.Status().PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	await(t, ch, "give-up", func() bool { return s.Status().State == StateFailed })
	st := s.Status()
	if len(st.Tools) != 0 || !strings.Contains(st.LastError, "gave up after 3 reconnection attempts") ||
		!strings.Contains(st.LastError, "exit status 3") || !strings.Contains(st.LastError, "boom: database unreachable") {
		t.Errorf("status %+v", st)
	}
	mu.Lock()
	defer mu.Unlock()
	if last := warnings[len(warnings)-1]; !strings.Contains(last, "flaky") || !strings.Contains(last, "its tools are unavailable") {
		t.Errorf("warnings %q", warnings)
	}
}

// TestRequiredServerFailsStart: a required server that cannot start
// fails Start; an optional one is skipped with a warning.
func TestRequiredServerFailsStart(t *testing.T) {
	var warned []string
	m, err := Start(t.Context(), []ServerConfig{{Name: "gone", Command: "/nonexistent/server"}}, Options{Dir: t.TempDir(), Warn: func(s string) { warned = append(warned, s) }})
	if err != nil {
		t.Fatal(err)
	}
	if st := m.Status()[0]; st.State != StateFailed || !strings.Contains(st.LastError, "MCP_START") || len(warned) != 1 {
		t.Errorf("optional: %+v %q", st, warned)
	}
	m.Close()
	_, err = Start(t.Context(), []ServerConfig{{Name: "gone", Command: "/nonexistent/server", Required: true}}, Options{Dir: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), "required mcp server gone failed to start") {
		t.Errorf("required: %v", err)
	}
}

// TestServersStartInParallel: each of three servers waits, before it
// starts, until all three have been launched (a barrier of marker
// files). Started in series, the first would wait forever and fail its
// startup timeout; started in parallel, all three connect.
func TestServersStartInParallel(t *testing.T) {
	bin := mcptest.Everything(t)
	dir := t.TempDir()
	marks := filepath.Join(dir, "marks")
	if err := os.Mkdir(marks, 0o755); err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(dir, "barrier.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\ntouch "+marks+"/$1\nwhile [ $(ls "+marks+" | wc -l) -lt 3 ]; do sleep 0.05; done\nexec "+bin+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	var cfgs []ServerConfig
	for _, n := range []string{"a", "b", "c"} {
		cfgs = append(cfgs, ServerConfig{Name: n, Command: script, Args: []string{n}, StartupTimeout: 20 * time.Second, Required: true})
	}
	m, err := Start(t.Context(), cfgs, Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	for _, st := range m.Status() {
		if st.State != StateConnected {
			t.Errorf("%+v", st)
		}
	}
}

// startHTTPEverything runs server-everything over streamable HTTP on
// port and returns once it listens; stop kills it.
func startHTTPEverything(t *testing.T, bin, port string) (stop func()) {
	t.Helper()
	cmd := exec.Command(bin, "streamableHttp")
	cmd.Env = append(os.Environ(), "PORT="+port)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = w
	err = cmd.Start()
	w.Close()
	if err != nil {
		r.Close()
		t.Fatal(err)
	}
	drained := make(chan struct{})
	var once sync.Once
	stop = func() {
		once.Do(func() {
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			_ = cmd.Wait()
			<-drained
			r.Close()
		})
	}
	t.Cleanup(stop)
	// The server says when it listens; the rest of its stderr is drained
	// until it dies.
	sc := bufio.NewScanner(r)
	for sc.Scan() && !strings.Contains(sc.Text(), "listening on port") {
	}
	go func() {
		defer close(drained)
		_, _ = io.Copy(io.Discard, r)
	}()
	return stop
}

// TestEverythingOverStreamableHTTP reaches server-everything over
// streamable HTTP on loopback, with a header that references the
// environment; when the server dies the tools go, and when it is back
// the supervisor reconnects.
func TestEverythingOverStreamableHTTP(t *testing.T) {
	bin := mcptest.Everything(t)
	port := freePort(t)
	stop := startHTTPEverything(t, bin, port)
	t.Setenv("DSH_TEST_MCP_TOKEN", "tok")
	_, s := startOne(t, ServerConfig{Name: "remote", URL: "http://127.0.0.1:" + port + "/mcp", Headers: map[string]string{"Authorization": "Bearer ${DSH_TEST_MCP_TOKEN}"}},
		Options{Backoff: Backoff{Initial: 50 * time.Millisecond, Max: time.Second, Attempts: 20}})
	st := s.Status()
	if st.State != StateConnected || st.Transport != TransportHTTP || len(st.Tools) == 0 {
		t.Fatalf("status %+v", st)
	}
	res, err := s.CallTool(t.Context(), "echo", json.RawMessage(`{"message":"over http"}`))
	if err != nil || text(t, res) != "Echo: over http" {
		t.Fatalf("echo: %v", err)
	}
	rs, _, err := s.ListResources(t.Context(), "")
	if err != nil || len(rs) == 0 {
		t.Fatalf("resources: %v %d", err, len(rs))
	}
	contents, err := s.ReadResource(t.Context(), rs[0].URI)
	if err != nil || len(contents) == 0 {
		t.Fatalf("read %s: %v", rs[0].URI, err)
	}
	p, err := s.GetPrompt(t.Context(), "simple-prompt", nil)
	if err != nil || len(p.Messages) != 1 {
		t.Fatalf("prompt: %v", err)
	}

	ch, stopWatch := changes(s)
	defer stopWatch()
	stop()
	await(t, ch, "disconnection", func() bool { return len(s.Tools()) == 0 })
	if _, err := s.CallTool(t.Context(), "echo", json.RawMessage(`{"message":"x"}`)); CodeOf(err) != CodeDisconnected {
		t.Errorf("call while down: %v", err)
	}
	startHTTPEverything(t, bin, port)
	await(t, ch, "reconnection", func() bool { return s.Status().Reconnects == 1 && s.Connected() })
	if res, err := s.CallTool(t.Context(), "echo", json.RawMessage(`{"message":"back"}`)); err != nil || text(t, res) != "Echo: back" {
		t.Errorf("echo after reconnecting: %v", err)
	}
}

func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	_, port, _ := net.SplitHostPort(l.Addr().String())
	return port
}

// TestFilesystemServer writes through server-filesystem rooted in a
// temporary directory, and is refused outside it.
func TestFilesystemServer(t *testing.T) {
	bin := mcptest.Filesystem(t)
	root := t.TempDir()
	_, s := startOne(t, ServerConfig{Name: "fs", Command: bin, Args: []string{root}}, Options{})
	target := filepath.Join(root, "note.txt")
	res, err := s.CallTool(t.Context(), "write_file", json.RawMessage(fmt.Sprintf(`{"path":%q,"content":"written over MCP"}`, target)))
	if err != nil || res.IsError {
		t.Fatalf("write_file: %v %v", err, res)
	}
	if b, _ := os.ReadFile(target); string(b) != "written over MCP" {
		t.Errorf("file = %q", b)
	}
	res, err = s.CallTool(t.Context(), "write_file", json.RawMessage(`{"path":"/etc/dsh-mcp-test","content":"x"}`))
	if err != nil || !res.IsError {
		t.Errorf("write outside the root: %v %+v", err, res)
	}
}

// TestStartupTimeout: a server that never answers the handshake fails
// after startup_timeout, and its process group is gone.
func TestStartupTimeout(t *testing.T) {
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "pid")
	script := filepath.Join(dir, "mute.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\necho $$ > "+pidFile+"\nexec sleep 600\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err := Start(t.Context(), []ServerConfig{{Name: "mute", Command: script, StartupTimeout: 300 * time.Millisecond, Required: true}}, Options{Dir: dir})
	if err == nil || !strings.Contains(err.Error(), "no handshake within the startup timeout") {
		t.Fatalf("err %v", err)
	}
	if el := time.Since(start); el > 5*time.Second {
		t.Errorf("took %v", el)
	}
	b, _ := os.ReadFile(pidFile)
	var pid int
	if _, err := fmt.Sscan(string(b), &pid); err != nil {
		t.Fatal(err)
	}
	if syscall.Kill(pid, 0) == nil {
		t.Errorf("the mute server %d is still running", pid)
	}
}

// TestHTTPHeadersFromEnvironment: configured headers reach the server,
// with ${NAME} taken from dsh's environment.
func TestHTTPHeadersFromEnvironment(t *testing.T) {
	got := make(chan string, 10)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case got <- r.Header.Get("Authorization"):
		default:
		}
		http.Error(w, "no", http.StatusUnauthorized)
	}))
	defer srv.Close()
	t.Setenv("DSH_TEST_MCP_TOKEN", "t0ken")
	m, err := Start(t.Context(), []ServerConfig{{Name: "h", URL: srv.URL + "/mcp", Headers: map[string]string{"Authorization": "Bearer ${DSH_TEST_MCP_TOKEN}"}}}, Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if h := <-got; h != "Bearer t0ken" {
		t.Errorf("Authorization %q", h)
	}
	if st := m.Status()[0]; st.State != StateFailed || !strings.Contains(st.LastError, "MCP_START") {
		t.Errorf("status %+v", st)
	}
	_, err = Start(t.Context(), []ServerConfig{{Name: "h", URL: srv.URL, Required: true, Headers: map[string]string{"X": "${DSH_TEST_UNSET_VARIABLE}"}}}, Options{Dir: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), "DSH_TEST_UNSET_VARIABLE is not set") {
		t.Errorf("unset variable: %v", err)
	}
}

// TestCloseStopsAServerThatIgnoresEOF: a server that does not exit when
// its stdin closes is terminated, with its whole process group, instead
// of holding dsh's exit up.
func TestCloseStopsAServerThatIgnoresEOF(t *testing.T) {
	bin := mcptest.Everything(t)
	dir := t.TempDir()
	pids := filepath.Join(dir, "pids")
	// The sleeper keeps the pipe into the server open after dsh closes
	// its end, so the server never reads EOF.
	script := filepath.Join(dir, "stubborn.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\nexec 3<&0\n( cat <&3; sleep 600 ) | "+bin+" &\necho $! > "+pids+"\nwait\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	m, err := Start(t.Context(), []ServerConfig{{Name: "stubborn", Command: script, StartupTimeout: 10 * time.Second}}, Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if st := m.Status()[0]; st.State != StateConnected {
		t.Fatalf("%+v", st)
	}
	b, _ := os.ReadFile(pids)
	var pid int
	if _, err := fmt.Sscan(string(b), &pid); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	m.Close()
	el := time.Since(start)
	t.Logf("Close took %v", el)
	if el > 10*time.Second {
		t.Errorf("Close took %v", el)
	}
	if alive(pid) {
		t.Errorf("the server %d outlived Close", pid)
	}
}

// alive reports whether pid is a live process (not gone, not a zombie
// waiting for whoever reaps orphans here).
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}
