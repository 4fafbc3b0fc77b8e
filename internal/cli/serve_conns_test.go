package cli_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/dsh-dev/dsh/internal/server/servertest"
)

// farBeyond is how long these tests wait for a connection dsh serve
// should cut after a timeout of a second or two.
const farBeyond = 20 * time.Second

// TestServeCutsSlowClients runs the real dsh serve with both listeners
// and config.yaml's serve limits set low: a slow body is cut on the
// webhook and on the API port after the read timeout, an idle keep-alive
// connection (no token needed) after the idle timeout, and with every
// webhook connection inside a request, a further one is refused at once
// with a log line. Before, only a header timeout existed and all of these
// stayed open.
func TestServeCutsSlowClients(t *testing.T) {
	e := newEnv(t)
	// The read timeout leaves the cap's sub-test time to open its second
	// connection while the first is still inside its request.
	const timeout = 2 * time.Second
	cfg := "github:\n  webhook_secret_env: DSH_TEST_WEBHOOK_HMAC\n" +
		"serve:\n  read_header_timeout: 2s\n  read_timeout: 2s\n  idle_timeout: 1s\n  webhook_max_conns: 1\n"
	if err := os.WriteFile(filepath.Join(e.home, "config.yaml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	stdout, stderr, stop := startServe(t, e, ctx, []string{"DSH_TEST_WEBHOOK_HMAC=s3cret"}, "--github-webhook", "127.0.0.1:0")
	hookLine, _ := stdout.ReadString('\n')
	hm := regexp.MustCompile(`listening on http://(127\.0\.0\.1:[0-9]+)/github\n$`).FindStringSubmatch(hookLine)
	apiLine, _ := stdout.ReadString('\n')
	am := regexp.MustCompile(`listening on http://(127\.0\.0\.1:[0-9]+)\n$`).FindStringSubmatch(apiLine)
	if hm == nil || am == nil {
		t.Fatalf("start-up lines %q %q", hookLine, apiLine)
	}
	go func() { _, _ = io.Copy(io.Discard, stdout) }()
	hookAddr, apiAddr := hm[1], am[1]

	dial := func(addr string) net.Conn {
		t.Helper()
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	// slowBody sends headers that promise a signed body, then part of it,
	// and stops; with expect100 it first waits for the server to start
	// reading the body (the connection is then inside a request). The body
	// is under the 256 KiB net/http drains after a handler that did not
	// read it (a 401): above that, it closes at once.
	slowBody := func(addr, path string, expect100 bool) (net.Conn, time.Time) {
		t.Helper()
		start := time.Now() // before dsh serve can start its clock
		c := dial(addr)
		req := fmt.Sprintf("POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n"+
			"X-GitHub-Event: ping\r\nX-GitHub-Delivery: d1\r\nX-Hub-Signature-256: sha256=%s\r\n", path, addr, strings.Repeat("0", 64))
		if expect100 {
			req += "Expect: 100-continue\r\n"
		}
		if _, err := io.WriteString(c, req+"\r\n"); err != nil {
			t.Fatal(err)
		}
		if expect100 {
			line, err := bufio.NewReader(c).ReadString('\n')
			if err != nil || !strings.HasPrefix(line, "HTTP/1.1 100") {
				t.Fatalf("no 100 Continue: %q %v", line, err)
			}
		}
		if _, err := io.WriteString(c, `{"zen":`); err != nil {
			t.Fatal(err)
		}
		return c, start
	}

	t.Run("webhook slow body", func(t *testing.T) {
		c, start := slowBody(hookAddr, "/github", false)
		if d := servertest.ClosedWithin(t, c, start, farBeyond); d < timeout {
			t.Fatalf("closed after %v, before the read timeout", d)
		}
	})
	t.Run("api slow body", func(t *testing.T) {
		c, start := slowBody(apiAddr, "/api/sessions", false)
		if d := servertest.ClosedWithin(t, c, start, farBeyond); d < timeout {
			t.Fatalf("closed after %v, before the read timeout", d)
		}
	})
	t.Run("api idle keep-alive", func(t *testing.T) {
		c := dial(apiAddr)
		if _, err := fmt.Fprintf(c, "GET /api/health HTTP/1.1\r\nHost: %s\r\n\r\n", apiAddr); err != nil {
			t.Fatal(err)
		}
		br := bufio.NewReader(c)
		if line, err := br.ReadString('\n'); err != nil || !strings.HasPrefix(line, "HTTP/1.1 200") {
			t.Fatalf("health: %q %v", line, err)
		}
		servertest.ClosedWithin(t, c, time.Now(), farBeyond)
	})
	t.Run("webhook cap", func(t *testing.T) {
		busy, _ := slowBody(hookAddr, "/github", true)
		over := dial(hookAddr)
		start := time.Now()
		servertest.ClosedWithin(t, over, start, farBeyond)
		waitLines(t, stderr, regexp.MustCompile(`dsh serve: refused 1 connection\(s\) on 127\.0\.0\.1:[0-9]+: the cap of 1 connections is reached`), 1)
		servertest.ClosedWithin(t, busy, start, farBeyond)
	})
	stop()
}
