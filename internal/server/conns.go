package server

import (
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"
)

// The connection limits of dsh serve's listeners (the API and the GitHub
// webhook). A client that sends slowly, reads slowly or sits idle is cut
// after a bounded time, and no listener holds more than a fixed number of
// connections, so neither port can be made to keep file descriptors and
// goroutines without end.
const (
	// DefaultReadHeaderTimeout bounds the reading of a request's headers.
	DefaultReadHeaderTimeout = 10 * time.Second
	// DefaultReadTimeout bounds the reading of a whole request, body
	// included (32 MiB at 1 MiB/s fits).
	DefaultReadTimeout = 30 * time.Second
	// DefaultWriteTimeout bounds the writing of a response. Event streams
	// are exempt: each of their writes has its own deadline (writeTimeout).
	DefaultWriteTimeout = 60 * time.Second
	// DefaultIdleTimeout is how long a keep-alive connection may wait for
	// its next request. It is far above DefaultHeartbeat, though streams
	// are not idle connections (they are inside a request).
	DefaultIdleTimeout = 120 * time.Second
	// DefaultMaxConns caps the API listener's open connections.
	DefaultMaxConns = 1024
	// DefaultWebhookMaxConns caps the webhook listener's: GitHub delivers
	// one event per connection and never needs many at once.
	DefaultWebhookMaxConns = 256
)

// refusalLogEvery spaces the log lines about refused connections: a flood
// must not become a flood of log lines.
const refusalLogEvery = 10 * time.Second

// Limits are one listener's timeouts and connection cap; a zero field
// takes its default.
type Limits struct {
	ReadHeaderTimeout time.Duration
	ReadTimeout       time.Duration
	WriteTimeout      time.Duration
	IdleTimeout       time.Duration
	MaxConns          int
	// Logf reports refused connections (nil: not reported).
	Logf func(format string, args ...any)

	// onState, when set (tests), sees every connection state change after
	// the cap has recorded it.
	onState func(net.Conn, http.ConnState)
}

// withDefaults fills the zero fields; maxConns is the cap's default.
func (l Limits) withDefaults(maxConns int) Limits {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&l.ReadHeaderTimeout, DefaultReadHeaderTimeout)
	def(&l.ReadTimeout, DefaultReadTimeout)
	def(&l.WriteTimeout, DefaultWriteTimeout)
	def(&l.IdleTimeout, DefaultIdleTimeout)
	if l.MaxConns <= 0 {
		l.MaxConns = maxConns
	}
	return l
}

// NewHTTPServer returns the http.Server for h with l's timeouts, and ln
// capped at l.MaxConns connections (default DefaultMaxConns): serve the
// returned listener. At the cap, the connection that has waited longest
// between requests (or for its first one) is closed to make room, as a
// proxy drops its idle keep-alive connections; when every connection is
// inside a request, the new one is closed at once, with a log line.
// Refusing rather than leaving it in the kernel's accept queue gives the
// client an immediate answer; evicting idle ones first means connections
// that send nothing cannot keep a legitimate client out.
func NewHTTPServer(ln net.Listener, h http.Handler, l Limits) (*http.Server, net.Listener) {
	l = l.withDefaults(DefaultMaxConns)
	cl := &capListener{Listener: ln, max: l.MaxConns, logf: l.Logf, conns: map[*capConn]uint64{}}
	hs := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: l.ReadHeaderTimeout,
		ReadTimeout:       l.ReadTimeout,
		WriteTimeout:      l.WriteTimeout,
		IdleTimeout:       l.IdleTimeout,
		ConnState: func(c net.Conn, st http.ConnState) {
			cl.state(c, st)
			if l.onState != nil {
				l.onState(c, st)
			}
		},
	}
	return hs, cl
}

// WebhookLimits are l with the webhook listener's default cap.
func WebhookLimits(l Limits) Limits {
	if l.MaxConns <= 0 {
		l.MaxConns = DefaultWebhookMaxConns
	}
	return l
}

// capListener holds at most max connections open.
type capListener struct {
	net.Listener
	max  int
	logf func(format string, args ...any)

	mu sync.Mutex
	// conns are the open connections: 0 while inside a request, else the
	// order in which they became reusable (waiting for a request).
	conns   map[*capConn]uint64
	seq     uint64
	refused int       // since the last log line
	logged  time.Time // when the last line was written
}

// capConn is a connection the cap counts until it is closed.
type capConn struct {
	net.Conn
	l    *capListener
	once sync.Once
}

// Close releases the connection's place under the cap.
func (c *capConn) Close() error {
	c.once.Do(func() {
		c.l.mu.Lock()
		delete(c.l.conns, c)
		c.l.mu.Unlock()
	})
	return c.Conn.Close()
}

// Accept returns the next connection, making room or refusing as
// NewHTTPServer says; refusals never end the accept loop.
func (l *capListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		l.mu.Lock()
		var victim *capConn
		if len(l.conns) >= l.max {
			victim = l.oldestIdle()
			if victim != nil {
				// Off the books now: the server's own Close of it later
				// finds it gone.
				delete(l.conns, victim)
			}
		}
		if len(l.conns) >= l.max {
			l.refused++
			var line string
			if now := time.Now(); now.Sub(l.logged) >= refusalLogEvery {
				line = fmt.Sprintf("refused %d connection(s) on %s: the cap of %d connections is reached and none is idle", l.refused, l.Addr(), l.max)
				l.refused, l.logged = 0, now
			}
			l.mu.Unlock()
			_ = c.Close()
			if line != "" && l.logf != nil {
				l.logf("%s", line)
			}
			continue
		}
		l.seq++
		cc := &capConn{Conn: c, l: l}
		l.conns[cc] = l.seq // waiting for its first request
		l.mu.Unlock()
		if victim != nil {
			// Its server goroutine sees the read fail and ends.
			_ = victim.Conn.Close()
		}
		return cc, nil
	}
}

// oldestIdle is the connection that has waited longest for a request, or
// nil when all are inside one. Called with mu held; a linear scan is
// cheap at these caps and only happens at the cap.
func (l *capListener) oldestIdle() *capConn {
	var best *capConn
	var bestSeq uint64
	for c, s := range l.conns {
		if s != 0 && (best == nil || s < bestSeq) {
			best, bestSeq = c, s
		}
	}
	return best
}

// state records whether c is inside a request (http.Server.ConnState).
func (l *capListener) state(nc net.Conn, st http.ConnState) {
	c, ok := nc.(*capConn)
	if !ok {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, open := l.conns[c]; !open {
		return
	}
	switch st {
	case http.StateNew, http.StateIdle:
		l.seq++
		l.conns[c] = l.seq
	case http.StateActive, http.StateHijacked:
		l.conns[c] = 0
	}
}
