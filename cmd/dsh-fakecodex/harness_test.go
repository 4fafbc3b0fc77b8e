package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/dsh-dev/dsh/internal/jsonrpc"
)

// TestMain doubles as the fake itself when re-executed by startProc.
func TestMain(m *testing.M) {
	if os.Getenv("DSH_FAKECODEX_TEST_MAIN") == "1" {
		main()
	}
	os.Exit(m.Run())
}

const waitLimit = 10 * time.Second // failsafe only; nothing waits on time

// env is one test's CODEX_HOME, script and log.
type env struct {
	home, script, log string
}

func newEnv(t *testing.T, script any) *env {
	t.Helper()
	e := &env{home: t.TempDir()}
	e.log = filepath.Join(e.home, "fake.log")
	if script != nil {
		b, err := json.Marshal(script)
		if err != nil {
			t.Fatal(err)
		}
		e.script = filepath.Join(e.home, "script.json")
		if err := os.WriteFile(e.script, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return e
}

func (e *env) getenv(k string) string {
	switch k {
	case "CODEX_HOME":
		return e.home
	case "DSH_FAKECODEX_SCRIPT":
		return e.script
	case "DSH_FAKECODEX_LOG":
		return e.log
	}
	return ""
}

// logLines returns the log as parsed JSON objects.
func (e *env) logLines(t *testing.T) []map[string]any {
	t.Helper()
	b, err := os.ReadFile(e.log)
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimRight(string(b), "\n"), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("log line %q: %v", l, err)
		}
		out = append(out, m)
	}
	return out
}

// wmsg is one frame the fake wrote.
type wmsg struct {
	ID          json.RawMessage `json:"id"`
	Method      string          `json:"method"`
	Params      json.RawMessage `json:"params"`
	Result      json.RawMessage `json:"result"`
	Error       *rpcError       `json:"error"`
	EmittedAtMs *int64          `json:"emittedAtMs"`
	raw         string
}

func (m wmsg) isResponse() bool { return len(m.ID) > 0 && m.Method == "" }

// param decodes params (or result, for responses) into a generic map.
func (m wmsg) param() map[string]any {
	src := m.Params
	if m.isResponse() {
		src = m.Result
	}
	var v map[string]any
	_ = json.Unmarshal(src, &v)
	return v
}

// recorder keeps every line the fake wrote, in wire order.
type recorder struct {
	mu      sync.Mutex
	partial []byte
	lines   []wmsg
	changed chan struct{}
}

func newRecorder() *recorder { return &recorder{changed: make(chan struct{})} }

func (r *recorder) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.partial = append(r.partial, p...)
	grew := false
	for {
		i := bytes.IndexByte(r.partial, '\n')
		if i < 0 {
			break
		}
		line := string(r.partial[:i])
		r.partial = r.partial[i+1:]
		m := wmsg{raw: line}
		_ = json.Unmarshal([]byte(line), &m)
		r.lines = append(r.lines, m)
		grew = true
	}
	if grew {
		close(r.changed)
		r.changed = make(chan struct{})
	}
	return len(p), nil
}

func (r *recorder) snapshot() ([]wmsg, <-chan struct{}) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]wmsg(nil), r.lines...), r.changed
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

type readCloser struct {
	io.Reader
	io.Closer
}

// fake is a running dsh-fakecodex (in-process or a child process) with a
// jsonrpc client (Codex dialect) attached.
type fake struct {
	t      *testing.T
	env    *env
	conn   *jsonrpc.Conn
	rec    *recorder
	stdin  io.Closer
	stderr *syncBuffer
	code   chan int
	pid    int

	mu       sync.Mutex
	decide   func(method string, params json.RawMessage) any
	exited   bool
	exitCode int
}

func (f *fake) attach(stdout io.ReadCloser, stdin io.WriteCloser) {
	f.rec = newRecorder()
	f.stdin = stdin
	f.conn = jsonrpc.NewConn(readCloser{io.TeeReader(stdout, f.rec), stdout}, stdin, jsonrpc.Options{
		Dialect: jsonrpc.Codex,
		OnRequest: func(_ context.Context, method string, params json.RawMessage) (any, *jsonrpc.Error) {
			f.mu.Lock()
			d := f.decide
			f.mu.Unlock()
			if d == nil {
				return map[string]string{"decision": "decline"}, nil
			}
			res := d(method, params)
			if je, ok := res.(*jsonrpc.Error); ok {
				return nil, je
			}
			return res, nil
		},
	})
	f.t.Cleanup(func() {
		_ = f.stdin.Close()
		f.waitExit()
		_ = f.conn.Close()
	})
}

// start runs the fake in-process over pipes.
func start(t *testing.T, e *env) *fake {
	t.Helper()
	f := &fake{t: t, env: e, stderr: &syncBuffer{}, code: make(chan int, 1), pid: os.Getpid()}
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	go func() {
		code := run([]string{"app-server"}, inR, outW, f.stderr, e.getenv)
		_ = outW.Close()
		_ = inR.Close() // unblocks the reader goroutine after exit_at
		f.code <- code
	}()
	f.attach(outR, inW)
	return f
}

// startProc runs the fake as a child process (the re-executed test
// binary) in its own process group.
func startProc(t *testing.T, e *env) *fake {
	t.Helper()
	f := &fake{t: t, env: e, stderr: &syncBuffer{}, code: make(chan int, 1)}
	inR, inW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "app-server", "-c", "model=x")
	cmd.Env = append(os.Environ(), "DSH_FAKECODEX_TEST_MAIN=1",
		"GORACE=atexit_sleep_ms=0", // a -race child otherwise lingers 1s at exit
		"CODEX_HOME="+e.home, "DSH_FAKECODEX_SCRIPT="+e.script, "DSH_FAKECODEX_LOG="+e.log)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, f.stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	_ = inR.Close()
	_ = outW.Close()
	f.pid = cmd.Process.Pid
	t.Cleanup(func() { _ = syscall.Kill(-f.pid, syscall.SIGKILL) }) // runs last
	go func() {
		_ = cmd.Wait()
		f.code <- cmd.ProcessState.ExitCode()
	}()
	f.attach(outR, inW)
	return f
}

// waitExit waits for the fake to end and returns its exit status.
func (f *fake) waitExit() int {
	if f.exited {
		return f.exitCode
	}
	select {
	case f.exitCode = <-f.code:
		f.exited = true
		return f.exitCode
	case <-time.After(waitLimit):
		f.t.Errorf("fake did not exit; stderr: %s", f.stderr.String())
		return -1
	}
}

// writeRaw writes one line straight to the fake's stdin; it returns once
// the fake has read it (pipes), so it orders against closeAndWait.
func (f *fake) writeRaw(line string) {
	f.t.Helper()
	if _, err := io.WriteString(f.stdin.(io.Writer), line+"\n"); err != nil {
		f.t.Fatal(err)
	}
}

// closeAndWait closes stdin and returns the exit status.
func (f *fake) closeAndWait() int {
	_ = f.stdin.Close()
	return f.waitExit()
}

func (f *fake) setDecide(d func(method string, params json.RawMessage) any) {
	f.mu.Lock()
	f.decide = d
	f.mu.Unlock()
}

// call sends a request and returns its result or *jsonrpc.Error.
func (f *fake) call(method string, params any) (map[string]any, error) {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	var res map[string]any
	err := f.conn.Call(ctx, method, params, &res)
	return res, err
}

func (f *fake) mustCall(method string, params any) map[string]any {
	f.t.Helper()
	res, err := f.call(method, params)
	if err != nil {
		f.t.Fatalf("%s: %v", method, err)
	}
	return res
}

// callErr expects an error reply and returns it.
func (f *fake) callErr(method string, params any) *jsonrpc.Error {
	f.t.Helper()
	_, err := f.call(method, params)
	var je *jsonrpc.Error
	if err == nil || !errors.As(err, &je) {
		f.t.Fatalf("%s: want a JSON-RPC error, got %v", method, err)
	}
	return je
}

func (f *fake) initialize() {
	f.t.Helper()
	f.mustCall("initialize", map[string]any{
		"clientInfo":   map[string]any{"name": "dsh_test", "title": nil, "version": "0.0.1"},
		"capabilities": nil,
	})
	if err := f.conn.Notify("initialized", nil); err != nil {
		f.t.Fatal(err)
	}
	// The last frame of the handshake, so later indexes start clean.
	f.waitFor(0, "remoteControl/status/changed", isMethod("remoteControl/status/changed"))
}

func (f *fake) startThread(params map[string]any) string {
	f.t.Helper()
	res := f.mustCall("thread/start", params)
	id := res["thread"].(map[string]any)["id"].(string)
	f.waitFor(0, "thread/started", func(m wmsg) bool {
		return m.Method == "thread/started" && m.param()["thread"].(map[string]any)["id"] == id
	})
	return id
}

func textInput(s string) []any {
	return []any{map[string]any{"type": "text", "text": s, "text_elements": []any{}}}
}

// startTurn sends turn/start and returns the turn id.
func (f *fake) startTurn(threadID, text string) string {
	f.t.Helper()
	res := f.mustCall("turn/start", map[string]any{"threadId": threadID, "input": textInput(text)})
	return res["turn"].(map[string]any)["id"].(string)
}

// waitFor blocks until a frame at index >= from satisfies pred and
// returns its index.
func (f *fake) waitFor(from int, what string, pred func(wmsg) bool) int {
	f.t.Helper()
	deadline := time.After(waitLimit)
	for {
		lines, changed := f.rec.snapshot()
		for i := from; i < len(lines); i++ {
			if pred(lines[i]) {
				return i
			}
		}
		select {
		case <-changed:
		case <-deadline:
			f.t.Fatalf("timed out waiting for %s; got:\n%s", what, dump(lines))
		}
	}
}

func isMethod(method string) func(wmsg) bool {
	return func(m wmsg) bool { return m.Method == method }
}

// turnCompleted waits for turn/completed of turnID and returns its turn.
func (f *fake) turnCompleted(turnID string) (int, map[string]any) {
	f.t.Helper()
	i := f.waitFor(0, "turn/completed", func(m wmsg) bool {
		return m.Method == "turn/completed" && m.param()["turn"].(map[string]any)["id"] == turnID
	})
	lines, _ := f.rec.snapshot()
	return i, lines[i].param()["turn"].(map[string]any)
}

func (f *fake) lines() []wmsg {
	l, _ := f.rec.snapshot()
	return l
}

func dump(lines []wmsg) string {
	var b strings.Builder
	for _, l := range lines {
		s := l.raw
		if len(s) > 300 {
			s = s[:300] + "…"
		}
		b.WriteString(s + "\n")
	}
	return b.String()
}

// methods lists the frames from index from as method names, "response"
// for responses.
func methods(lines []wmsg, from int) []string {
	var out []string
	for _, l := range lines[from:] {
		if l.isResponse() {
			out = append(out, "response")
		} else {
			out = append(out, l.Method)
		}
	}
	return out
}
