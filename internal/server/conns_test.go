package server_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/dsh-dev/dsh/internal/server"
	"github.com/dsh-dev/dsh/internal/server/servertest"
)

// farBeyond is how long a test waits for a connection the server should
// close after a timeout of well under a second: long enough that a
// loaded machine never fails the test, short enough that a server which
// never cuts the connection fails it.
const farBeyond = 15 * time.Second

// limitedEnv is a real server whose listener has lim's timeouts and cap,
// on loopback TCP. states receives every connection state change the
// server made (buffered, never blocks the server).
type limitedEnv struct {
	*env
	addr   string
	states chan http.ConnState
	logs   chan string
}

func newLimitedEnv(t *testing.T, lim server.Limits, opts ...envOpt) *limitedEnv {
	t.Helper()
	e := newEnv(t, "", opts...)
	le := &limitedEnv{env: e, states: make(chan http.ConnState, 1024), logs: make(chan string, 64)}
	lim.Logf = func(format string, args ...any) {
		select {
		case le.logs <- fmt.Sprintf(format, args...):
		default:
		}
	}
	lim = server.WithStateHook(lim, func(_ net.Conn, st http.ConnState) {
		select {
		case le.states <- st:
		default:
			t.Error("state channel full")
		}
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	le.addr = ln.Addr().String()
	hs, capped := server.NewHTTPServer(ln, e.srv, lim)
	hs.RegisterOnShutdown(e.srv.Close)
	served := make(chan error, 1)
	go func() { served <- hs.Serve(capped) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := hs.Shutdown(ctx); err != nil {
			_ = hs.Close()
		}
		if err := <-served; !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("serve: %v", err)
		}
	})
	return le
}

// await takes state changes until n of want have been seen.
func (le *limitedEnv) await(want http.ConnState, n int) {
	le.t.Helper()
	timeout := time.After(farBeyond)
	for n > 0 {
		select {
		case st := <-le.states:
			if st == want {
				n--
			}
		case <-timeout:
			le.t.Fatalf("still waiting for %d connection(s) to become %v", n, want)
		}
	}
}

func (le *limitedEnv) dial() net.Conn {
	le.t.Helper()
	c, err := net.Dial("tcp", le.addr)
	if err != nil {
		le.t.Fatal(err)
	}
	le.t.Cleanup(func() { c.Close() })
	return c
}

// request writes a raw HTTP/1.1 request (keep-alive), with the token
// when auth is set.
func (le *limitedEnv) request(c net.Conn, method, path string, auth bool, extra string) {
	le.t.Helper()
	req := fmt.Sprintf("%s %s HTTP/1.1\r\nHost: %s\r\n", method, path, le.addr)
	if auth {
		req += "Authorization: Bearer " + testToken + "\r\n"
	}
	if _, err := io.WriteString(c, req+extra+"\r\n"); err != nil {
		le.t.Fatal(err)
	}
}

// readResponse reads one response on br and returns its status.
func readResponse(t *testing.T, br *bufio.Reader) int {
	t.Helper()
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// TestSlowBodyCut: a client that sends headers promising a body and then
// stalls (with or without the token) is cut once the read timeout has
// passed; before, only the header timeout existed and the connection
// stayed open for good.
func TestSlowBodyCut(t *testing.T) {
	const readTimeout = 300 * time.Millisecond
	le := newLimitedEnv(t, server.Limits{ReadTimeout: readTimeout, ReadHeaderTimeout: readTimeout})
	for _, auth := range []bool{false, true} {
		t.Run(fmt.Sprintf("token=%v", auth), func(t *testing.T) {
			start := time.Now() // before the server can start its clock
			c := le.dial()
			le.request(c, "POST", "/api/sessions", auth, "Content-Type: application/json\r\nContent-Length: 100000\r\n")
			if _, err := io.WriteString(c, `{"cwd":`); err != nil {
				t.Fatal(err)
			}
			if d := servertest.ClosedWithin(t, c, start, farBeyond); d < readTimeout {
				t.Fatalf("closed after %v, before the read timeout", d)
			}
		})
	}
}

// TestIdleKeepAliveClosed: a keep-alive connection that made a request
// (no token needed: /api/health) and then sends nothing is closed after
// the idle timeout.
func TestIdleKeepAliveClosed(t *testing.T) {
	const idle = 300 * time.Millisecond
	le := newLimitedEnv(t, server.Limits{IdleTimeout: idle})
	c := le.dial()
	br := bufio.NewReader(c)
	le.request(c, "GET", "/api/health", false, "")
	if st := readResponse(t, br); st != 200 {
		t.Fatalf("health: %d", st)
	}
	servertest.ClosedWithin(t, c, time.Now(), farBeyond)
}

// TestConnCapEvictsIdle: at the cap, tokenless connections waiting for a
// request (the attack: many idle keep-alive connections) give way to a
// new client, oldest first, and its authenticated request works.
func TestConnCapEvictsIdle(t *testing.T) {
	const max = 4
	le := newLimitedEnv(t, server.Limits{MaxConns: max})
	var idle []net.Conn
	for range max {
		c := le.dial()
		br := bufio.NewReader(c)
		le.request(c, "GET", "/api/health", false, "")
		if st := readResponse(t, br); st != 200 {
			t.Fatalf("health: %d", st)
		}
		idle = append(idle, c)
	}
	le.await(http.StateIdle, max)
	c := le.dial()
	le.request(c, "GET", "/api/sessions", true, "")
	if st := readResponse(t, bufio.NewReader(c)); st != 200 {
		t.Fatalf("authenticated request over the cap: %d", st)
	}
	// One of them gave way (the one whose wait began first; the server
	// marks a connection idle after its answer has left, so the test
	// cannot tell which).
	le.await(http.StateClosed, 1)
	closed := make(chan int, len(idle))
	for i, c := range idle {
		go func() {
			_ = c.SetReadDeadline(time.Now().Add(farBeyond))
			if _, err := io.Copy(io.Discard, c); err == nil || !isTimeout(err) {
				closed <- i
			}
		}()
	}
	select {
	case <-closed:
	case <-time.After(farBeyond + time.Second):
		t.Fatal("no idle connection was closed")
	}
	for _, c := range idle {
		c.Close() // ends the readers
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// TestConnCapEvictsSlowHeaders: connections that trickle their headers
// (slowloris) hold no place a new client needs: at the cap they give way
// before the header timeout, which is set far off here.
func TestConnCapEvictsSlowHeaders(t *testing.T) {
	const max = 2
	le := newLimitedEnv(t, server.Limits{MaxConns: max, ReadHeaderTimeout: time.Hour, ReadTimeout: time.Hour})
	var slow []net.Conn
	for range max {
		c := le.dial()
		if _, err := fmt.Fprintf(c, "GET /api/health HTTP/1.1\r\nHost: %s\r\nX-Slow: ", le.addr); err != nil {
			t.Fatal(err)
		}
		slow = append(slow, c)
	}
	c := le.dial()
	le.request(c, "GET", "/api/sessions", true, "")
	if st := readResponse(t, bufio.NewReader(c)); st != 200 {
		t.Fatalf("authenticated request over the cap: %d", st)
	}
	le.await(http.StateClosed, 1)
	servertest.ClosedWithin(t, slow[0], time.Now(), farBeyond)
}

// TestConnCapRefusesWhenBusy: when every connection under the cap is
// inside a request (here event streams), a further connection is closed
// at once with a log line, and the streams go on (their heartbeat comes).
// Once one ends, a new authenticated request gets in.
func TestConnCapRefusesWhenBusy(t *testing.T) {
	const max = 2
	le := newLimitedEnv(t, server.Limits{MaxConns: max}, func(o *server.Options) { o.Heartbeat = 50 * time.Millisecond })
	type stream struct {
		c  net.Conn
		br *bufio.Reader
	}
	var streams []stream
	for range max {
		c := le.dial()
		br := bufio.NewReader(c)
		le.request(c, "GET", "/api/events", true, "")
		resp, err := http.ReadResponse(br, nil)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("stream: %v %v", resp, err)
		}
		streams = append(streams, stream{c, bufio.NewReader(resp.Body)})
	}
	over := le.dial()
	servertest.ClosedWithin(t, over, time.Now(), farBeyond)
	select {
	case line := <-le.logs:
		if !strings.Contains(line, "refused 1 connection") {
			t.Errorf("log line %q", line)
		}
	case <-time.After(farBeyond):
		t.Fatal("no log line for the refused connection")
	}
	for i, s := range streams {
		if !awaitPing(t, s.br) {
			t.Fatalf("stream %d got no heartbeat after the refusal", i)
		}
	}
	streams[0].c.Close()
	le.await(http.StateClosed, 1)
	c := le.dial()
	le.request(c, "GET", "/api/sessions", true, "")
	if st := readResponse(t, bufio.NewReader(c)); st != 200 {
		t.Fatalf("request after a stream ended: %d", st)
	}
}

// awaitPing reads a stream's chunked body until a ": ping" comment.
func awaitPing(t *testing.T, br *bufio.Reader) bool {
	t.Helper()
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Logf("stream: %v", err)
			return false
		}
		if strings.HasPrefix(line, ": ping") {
			return true
		}
	}
}

// TestStreamOutlivesTimeouts: an event stream stays open well past the
// read, write and idle timeouts and keeps receiving its heartbeat (the
// read timeout would otherwise end its request, the write timeout its
// response).
func TestStreamOutlivesTimeouts(t *testing.T) {
	const timeout = 200 * time.Millisecond
	le := newLimitedEnv(t, server.Limits{ReadHeaderTimeout: timeout, ReadTimeout: timeout, WriteTimeout: timeout, IdleTimeout: timeout},
		func(o *server.Options) { o.Heartbeat = 50 * time.Millisecond })
	for _, path := range []string{"/api/events", "/api/sessions/" + le.newSession() + "/stream"} {
		t.Run(path, func(t *testing.T) {
			c := le.dial()
			br := bufio.NewReader(c)
			start := time.Now()
			le.request(c, "GET", path, true, "")
			resp, err := http.ReadResponse(br, nil)
			if err != nil || resp.StatusCode != 200 {
				t.Fatalf("stream: %v %v", resp, err)
			}
			body := bufio.NewReader(resp.Body)
			if err := c.SetReadDeadline(time.Now().Add(farBeyond)); err != nil {
				t.Fatal(err)
			}
			for time.Since(start) < 5*timeout {
				if !awaitPing(t, body) {
					t.Fatalf("the stream ended after %v", time.Since(start))
				}
			}
		})
	}
}

// newSession creates a session and returns its id.
func (le *limitedEnv) newSession() string {
	le.t.Helper()
	var out struct {
		Header struct{ ID string } `json:"header"`
	}
	le.call("POST", "/api/sessions", map[string]any{"cwd": le.cwd}, 201, &out)
	if out.Header.ID == "" {
		le.t.Fatal("no session id")
	}
	return out.Header.ID
}
