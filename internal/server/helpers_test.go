package server_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dsh-dev/dsh/internal/app"
	"github.com/dsh-dev/dsh/internal/host"
	"github.com/dsh-dev/dsh/internal/leakcheck"
	"github.com/dsh-dev/dsh/internal/llm/llmtest"
	"github.com/dsh-dev/dsh/internal/sandbox"
	"github.com/dsh-dev/dsh/internal/server"
	"github.com/dsh-dev/dsh/internal/workspace"
)

func TestMain(m *testing.M) {
	// bash runs under the sandbox, which re-executes this binary as its
	// helper.
	sandbox.RunHelperIfRequested()
	os.Exit(leakcheck.Run(m))
}

const testToken = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

// env is a real server over a real host, store and fake model.
type env struct {
	t     *testing.T
	home  string
	cwd   string
	model *llmtest.Server
	app   *app.App
	host  *host.Host
	reg   *workspace.Registry
	srv   *server.Server
	ts    *httptest.Server
}

type envOpt func(*server.Options)

// newEnv starts everything; config is written to $DSH_HOME/config.yaml
// when not empty.
func newEnv(t *testing.T, config string, opts ...envOpt) *env {
	t.Helper()
	e := &env{t: t, home: t.TempDir(), cwd: t.TempDir(), model: llmtest.New()}
	t.Cleanup(e.model.Close)
	t.Setenv("DSH_HOME", e.home)
	t.Setenv("DEEPSEEK_API_KEY", "test-key")
	t.Setenv("DEEPSEEK_BASE_URL", e.model.URL())
	base := "profile:\n  - {id: codex, module: codex, disabled: true}\n  - {id: claude-code, module: claude-code, disabled: true}\n"
	if err := os.WriteFile(filepath.Join(e.home, "config.yaml"), []byte(base+config), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	a, err := app.Open(ctx, app.Options{})
	if err != nil {
		t.Fatal(err)
	}
	e.app = a
	h, err := host.New(host.Config{App: a, Holder: "dsh serve test"})
	if err != nil {
		t.Fatal(err)
	}
	e.host = h
	e.reg = workspace.NewRegistry(a.Store)
	e.ts = httptest.NewUnstartedServer(nil)
	o := server.Options{Token: testToken, Listen: e.ts.Listener.Addr().String(), Version: "test", App: a, Home: e.cwd}
	for _, f := range opts {
		f(&o)
	}
	e.srv = server.New(h, e.reg, o)
	e.ts.Config.Handler = e.srv
	e.ts.Config.RegisterOnShutdown(e.srv.Close)
	e.ts.Start()
	t.Cleanup(func() {
		e.srv.Close()
		e.ts.Close()
		cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := h.Close(cctx); err != nil {
			t.Errorf("host close: %v", err)
		}
		if err := a.Close(); err != nil {
			t.Errorf("app close: %v", err)
		}
	})
	return e
}

// req builds a request with the token; body may be nil, a string (sent as
// JSON) or any value (marshalled).
func (e *env) req(method, path string, body any) *http.Request {
	e.t.Helper()
	var r io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		r = strings.NewReader(b)
	case io.Reader:
		r = b
	default:
		j, err := json.Marshal(b)
		if err != nil {
			e.t.Fatal(err)
		}
		r = bytes.NewReader(j)
	}
	req, err := http.NewRequest(method, e.ts.URL+path, r)
	if err != nil {
		e.t.Fatal(err)
	}
	if r != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Authorization", "Bearer "+testToken)
	return req
}

// do sends req and decodes a JSON answer into out (when not nil),
// returning the status.
func (e *env) do(req *http.Request, out any) int {
	e.t.Helper()
	resp, err := e.ts.Client().Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	if out != nil && len(b) > 0 {
		if err := json.Unmarshal(b, out); err != nil {
			e.t.Fatalf("%s %s: decode %q: %v", req.Method, req.URL.Path, b, err)
		}
	}
	return resp.StatusCode
}

// call is do(req(...)) expecting status want.
func (e *env) call(method, path string, body any, want int, out any) {
	e.t.Helper()
	var raw json.RawMessage
	got := e.do(e.req(method, path, body), &raw)
	if got != want {
		e.t.Fatalf("%s %s: status %d, want %d: %s", method, path, got, want, raw)
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			e.t.Fatalf("decode %s: %v", raw, err)
		}
	}
}

// apiErr is the error body.
type apiErr struct {
	Error struct{ Code, Message string } `json:"error"`
}

// wantError sends req and checks the status and code.
func (e *env) wantError(req *http.Request, status int, code string) {
	e.t.Helper()
	var ae apiErr
	got := e.do(req, &ae)
	if got != status || ae.Error.Code != code {
		e.t.Errorf("%s %s: got %d %q (%s), want %d %s", req.Method, req.URL, got, ae.Error.Code, ae.Error.Message, status, code)
	}
}

// sseEvent is one received Server-Sent Event.
type sseEvent struct {
	ID, Event, Data string
	Comment         string
}

// sseStream reads events of one response.
type sseStream struct {
	resp  *http.Response
	sc    *bufio.Scanner
	retry string // the last retry: field read
}

func (e *env) openSSE(req *http.Request) *sseStream {
	e.t.Helper()
	return e.openSSEWith(e.ts.Client(), req)
}

func (e *env) openSSEWith(client *http.Client, req *http.Request) *sseStream {
	e.t.Helper()
	resp, err := client.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		e.t.Fatalf("stream %s: %d %s", req.URL, resp.StatusCode, b)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<24)
	return &sseStream{resp: resp, sc: sc}
}

// next returns the next event or comment; io.EOF at the end.
func (s *sseStream) next() (sseEvent, error) {
	var ev sseEvent
	var data []string
	seen := false
	for s.sc.Scan() {
		line := s.sc.Text()
		switch {
		case line == "":
			if seen && data != nil {
				ev.Data = strings.Join(data, "\n")
				return ev, nil
			}
			// A block without data (a lone retry:) dispatches nothing.
			ev, data, seen = sseEvent{}, nil, false
		case strings.HasPrefix(line, ":"):
			return sseEvent{Comment: strings.TrimSpace(line[1:])}, nil
		default:
			seen = true
			k, v, _ := strings.Cut(line, ":")
			v = strings.TrimPrefix(v, " ")
			switch k {
			case "id":
				ev.ID = v
			case "event":
				ev.Event = v
			case "data":
				data = append(data, v)
			case "retry":
				s.retry = v
			}
		}
	}
	if err := s.sc.Err(); err != nil {
		return ev, err
	}
	return ev, io.EOF
}

func (s *sseStream) close() { s.resp.Body.Close() }

// hostHeader lets a test send any Host header over the loopback
// connection.
func hostOf(ts *httptest.Server) string {
	u := strings.TrimPrefix(ts.URL, "http://")
	_, port, _ := net.SplitHostPort(u)
	return port
}
