package cli_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dsh-dev/dsh/internal/llm/llmtest"
	"github.com/dsh-dev/dsh/internal/session"
	"github.com/dsh-dev/dsh/internal/session/sessiontest"
)

// TestServeEndToEnd runs the real dsh serve: the first stdout line is
// parsed for the address, the token file is private, the API works with
// the token, and SIGTERM during a running turn exits 0 within 5 s with
// the turn aborted, the log balanced and the lease released (dsh run
// --resume continues it at once).
func TestServeEndToEnd(t *testing.T) {
	e := newEnv(t)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	c := e.cmd(ctx, "serve", "--listen", "127.0.0.1:0")
	stdout, err := c.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	c.Stderr = &stderr
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- c.Wait() }()
	defer func() {
		_ = c.Process.Kill()
	}()
	lines := bufio.NewReader(stdout)
	first, err := lines.ReadString('\n')
	if err != nil {
		t.Fatalf("first line: %v (stderr %s)", err, stderr.String())
	}
	m := regexp.MustCompile(`^dsh serve listening on (http://127\.0\.0\.1:[0-9]+)\n$`).FindStringSubmatch(first)
	if m == nil {
		t.Fatalf("first line %q", first)
	}
	base := m[1]
	second, _ := lines.ReadString('\n')
	tm := regexp.MustCompile(`^open ` + regexp.QuoteMeta(base) + `/\?token=([0-9a-f]{64})\n$`).FindStringSubmatch(second)
	if tm == nil {
		t.Fatalf("second line %q", second)
	}
	token := tm[1]
	go func() { _, _ = io.Copy(io.Discard, lines) }()

	fi, err := os.Stat(filepath.Join(e.home, "serve", "token"))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("token file: %v %v", fi, err)
	}
	if b, _ := os.ReadFile(filepath.Join(e.home, "serve", "token")); strings.TrimSpace(string(b)) != token {
		t.Fatal("the printed token is not the file's")
	}

	api := func(method, path string, body any, want int) map[string]any {
		t.Helper()
		var r io.Reader
		if body != nil {
			b, _ := json.Marshal(body)
			r = bytes.NewReader(b)
		}
		req, _ := http.NewRequestWithContext(ctx, method, base+path, r)
		req.Header.Set("Authorization", "Bearer "+token)
		if body != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&out)
		if resp.StatusCode != want {
			t.Fatalf("%s %s: %d %v", method, path, resp.StatusCode, out)
		}
		return out
	}
	if resp, err := http.Get(base + "/api/sessions"); err != nil || resp.StatusCode != 401 {
		t.Fatalf("no token: %v %v", resp, err)
	}

	// A turn that streams a little and then waits on the model.
	e.srv.Enqueue(llmtest.Response{Text: "partial answer that never ends", ChunkRunes: 4, StallAfter: 3})
	info := api("POST", "/api/sessions", map[string]any{"cwd": e.cwd}, 201)
	sid := info["header"].(map[string]any)["id"].(string)
	api("POST", "/api/sessions/"+sid+"/messages", map[string]any{"text": "go"}, 202)
	if err := e.srv.WaitRequests(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if st := api("GET", "/api/sessions/"+sid, nil, 200)["status"]; st != "running" {
		t.Fatalf("status %v", st)
	}

	// A client streaming the session and one watching the feed: shutdown
	// must end both rather than wait for them.
	var streamsDone []chan error
	for _, path := range []string{"/api/sessions/" + sid + "/stream", "/api/events"} {
		req, _ := http.NewRequestWithContext(ctx, "GET", base+path, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("open %s: %v %v", path, resp, err)
		}
		done := make(chan error, 1)
		go func() {
			_, err := io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			done <- err
		}()
		streamsDone = append(streamsDone, done)
	}

	start := time.Now()
	if err := c.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("dsh serve after SIGTERM: %v\n%s", err, stderr.String())
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("dsh serve still running 5 s after SIGTERM\n%s", stderr.String())
	}
	t.Logf("exit %v after SIGTERM", time.Since(start))
	for _, done := range streamsDone {
		<-done // ended (cleanly, or cut when the process exited)
	}

	_, events, _ := exportEvents(t, e, sid)
	sessiontest.CheckBalanced(t, events)
	ends := sessiontest.EventsOf[session.TurnEnd](t, events, session.TypeTurnEnd)
	if len(ends) != 1 || ends[0].Reason.Kind != session.EndAborted {
		t.Fatalf("turn ends %+v", ends)
	}

	// The lease is free: no takeover, no busy error.
	e.srv.Enqueue(llmtest.Response{Text: "resumed"})
	out, errOut, code := e.dsh("", "run", "--json", "--resume", sid, "again")
	if code != 0 || strings.Contains(errOut, "taking it over") {
		t.Fatalf("resume: exit %d\n%s", code, errOut)
	}
	if _, res := parseJSONRun(t, out); res.Text != "resumed" {
		t.Fatalf("run/result %+v", res)
	}

	// A second start reuses the token.
	c2 := e.cmd(ctx, "serve", "--listen", "127.0.0.1:0")
	out2, err := c2.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := c2.Start(); err != nil {
		t.Fatal(err)
	}
	r2 := bufio.NewReader(out2)
	_, _ = r2.ReadString('\n')
	line, _ := r2.ReadString('\n')
	if !strings.HasSuffix(line, "?token="+token+"\n") {
		t.Errorf("second start printed %q", line)
	}
	_ = c2.Process.Signal(syscall.SIGINT)
	if err := c2.Wait(); err != nil {
		t.Errorf("SIGINT: %v", err)
	}
}

// TestServeWarnsOffLoopback: a non-loopback listen address starts (the
// token is always on) with a warning that nothing is encrypted; a bad
// address is a usage error.
func TestServeWarnsOffLoopback(t *testing.T) {
	e := newEnv(t)
	_, stderr, code := e.dsh("", "serve", "--listen", "nonsense")
	if code != 2 || !strings.Contains(stderr, "HOST:PORT") {
		t.Fatalf("bad listen: %d %s", code, stderr)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	c := e.cmd(ctx, "serve", "--listen", "0.0.0.0:0")
	out, err := c.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	errPipe, err := c.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	first, _ := bufio.NewReader(out).ReadString('\n')
	if !strings.HasPrefix(first, "dsh serve listening on http://0.0.0.0:") {
		t.Fatalf("first line %q", first)
	}
	warn, _ := bufio.NewReader(errPipe).ReadString('\n')
	if !strings.Contains(warn, "not encrypted") {
		t.Fatalf("no warning: %q", warn)
	}
	_ = c.Process.Signal(syscall.SIGTERM)
	if err := c.Wait(); err != nil {
		t.Fatalf("exit: %v", err)
	}
}

// TestServeOpen: --open runs xdg-open (a script here) with a URL that
// holds a one-time sign-in code and not the token (the opener's command
// line is readable by every local user), without dsh's credentials in its
// environment; no process on the machine has the token in its command
// line. The code is traded once for the token's cookie, which the API
// accepts; a second use gets the error page.
func TestServeOpen(t *testing.T) {
	e := newEnv(t)
	bin := t.TempDir()
	fifo := filepath.Join(bin, "opened")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	script := "#!/bin/sh\necho \"$1 key=${DEEPSEEK_API_KEY:-none}\" > " + fifo + "\n"
	if err := os.WriteFile(filepath.Join(bin, "xdg-open"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	c := e.cmd(ctx, "serve", "--listen", "127.0.0.1:0", "--open")
	c.Env = append(c.Env, "PATH="+bin+":"+os.Getenv("PATH"))
	out, err := c.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(out)
	first, _ := r.ReadString('\n')
	base := strings.TrimPrefix(strings.TrimSpace(first), "dsh serve listening on ")
	urlLine, _ := r.ReadString('\n')
	_, token, _ := strings.Cut(strings.TrimSpace(urlLine), "?token=")
	if len(token) != 64 {
		t.Fatalf("no token in %q", urlLine)
	}
	opened, err := os.ReadFile(fifo) // blocks until the opener writes
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`^(` + regexp.QuoteMeta(base) + `/login\?code=[A-Za-z0-9_-]{43}) key=none\n$`).FindStringSubmatch(string(opened))
	if m == nil || strings.Contains(string(opened), token) {
		t.Fatalf("opener got %q", opened)
	}
	// Every process's command line, dsh serve's children included.
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		if b, err := os.ReadFile(p); err == nil && bytes.Contains(b, []byte(token)) {
			t.Errorf("%s holds the token: %q", p, b)
		}
	}

	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noRedirect.Get(m[1])
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	var cookie *http.Cookie
	for _, ck := range resp.Cookies() {
		if ck.Name == "dsh_token" && ck.Value == token {
			cookie = ck
		}
	}
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/" || cookie == nil {
		t.Fatalf("sign-in: %d to %q, cookies %v", resp.StatusCode, resp.Header.Get("Location"), resp.Cookies())
	}
	req, _ := http.NewRequestWithContext(ctx, "GET", base+"/api/sessions", nil)
	req.AddCookie(cookie)
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 200 {
		t.Fatalf("API with the cookie: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
	resp, err = noRedirect.Get(m[1])
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(page), "already been used") || len(resp.Cookies()) != 0 {
		t.Fatalf("second use: %d %v %s", resp.StatusCode, resp.Cookies(), page)
	}
	_ = c.Process.Signal(syscall.SIGTERM)
	if err := c.Wait(); err != nil {
		t.Fatalf("exit: %v", err)
	}
}
