package mcp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/dsh-dev/dsh/internal/proc"
)

// conn is one live connection to a server: the SDK session and, for a
// stdio server, its process group.
type conn struct {
	cs   *sdk.ClientSession
	proc *proc.Process // nil for HTTP
	// done is closed when the connection ended by itself or was closed.
	done      chan struct{}
	closeOnce sync.Once
	// endErr says why the connection ended (valid once done is closed).
	endErr error
}

// Session returns the SDK session.
func (c *conn) session() *sdk.ClientSession { return c.cs }

// close ends the session and tears down the process group, and waits
// for both. Closing the session closes a stdio server's stdin, which
// asks it to exit; one that has not exited after closeGrace is
// terminated (TERM, then KILL, the whole group). When the Manager closes,
// the end of its lifetime context has already started that teardown
// (proc.Start), so shutting down never waits for a server. Safe to call
// more than once.
func (c *conn) close() {
	c.closeOnce.Do(func() {
		closed := make(chan struct{})
		go func() { // ends when the transport does: at the latest after Teardown below
			defer close(closed)
			if c.cs != nil {
				_ = c.cs.Close()
			}
		}()
		if c.proc != nil {
			t := time.NewTimer(closeGrace)
			select {
			case <-c.proc.Exited():
			case <-t.C:
			}
			t.Stop()
			c.proc.Teardown(context.Background())
		}
		<-closed
	})
	<-c.done
}

// closeGrace is how long a stdio server gets to exit after its stdin
// closed.
const closeGrace = 2 * time.Second

// dial starts (stdio) or reaches (HTTP) the server and completes the
// MCP handshake. ctx bounds the start-up only; the connection then lives
// until close (or lifetime ends, which tears a stdio child down).
func dial(ctx, lifetime context.Context, cfg ServerConfig, o Options, handlers *sdk.ClientOptions) (*conn, error) {
	version := o.ClientVersion
	if version == "" {
		version = "dev"
	}
	client := sdk.NewClient(&sdk.Implementation{Name: "dsh", Version: version}, handlers)
	c := &conn{done: make(chan struct{})}
	var transport sdk.Transport
	if o.Transport != nil {
		t, err := o.Transport(cfg)
		if err != nil {
			return nil, errorf(CodeStart, cfg.Name, "%w", err)
		}
		transport = t
	}
	switch {
	case transport != nil:
	case cfg.Transport() == TransportHTTP:
		headers := http.Header{}
		for k, v := range cfg.Headers {
			ev, err := expand(v)
			if err != nil {
				return nil, errorf(CodeStart, cfg.Name, "header %s: %w", k, err)
			}
			headers.Set(k, ev)
		}
		transport = &sdk.StreamableClientTransport{
			Endpoint:   cfg.URL,
			HTTPClient: &http.Client{Transport: headerTransport{base: http.DefaultTransport, h: headers}},
			// A dropped connection is a disconnection the supervisor
			// reconnects; the SDK's own retries would hide it.
			MaxRetries: -1,
		}
	default:
		env := map[string]string{}
		for k, v := range cfg.Env {
			ev, err := expand(v)
			if err != nil {
				return nil, errorf(CodeStart, cfg.Name, "env %s: %w", k, err)
			}
			env[k] = ev
		}
		dir, err := proc.ResolveDir(cfg.Cwd, o.Dir)
		if err != nil {
			return nil, errorf(CodeStart, cfg.Name, "%w", err)
		}
		p, err := proc.Start(lifetime, proc.Spec{
			Argv: append([]string{cfg.Command}, cfg.Args...), Dir: dir,
			Env: proc.EnvPolicy{Passthrough: slices.Clone(cfg.EnvPassthrough), Set: env},
		})
		if err != nil {
			return nil, errorf(CodeStart, cfg.Name, "start %s: %w", cfg.Command, err)
		}
		c.proc = p
		var w io.WriteCloser = p.Stdin()
		if o.Trace != nil {
			w = traceWriter{WriteCloser: w, f: func(b []byte) { o.Trace(cfg.Name, b) }}
		}
		transport = &sdk.IOTransport{Reader: io.NopCloser(p.Stdout()), Writer: w}
	}
	cs, err := client.Connect(ctx, transport, nil)
	if err != nil {
		err = c.startError(ctx, cfg.Name, err)
		if c.proc != nil {
			c.proc.Teardown(context.Background())
		}
		return nil, err
	}
	c.watch(cs)
	return c, nil
}

// watch publishes the session and starts the goroutine that notices the
// connection's end; it ends with the connection.
func (c *conn) watch(cs *sdk.ClientSession) {
	c.cs = cs
	go func() {
		// Wait ends when the connection closes: the child's stdout hit
		// EOF (it exited), the HTTP session broke, or close was called.
		werr := cs.Wait()
		if c.proc != nil {
			// Its stdout ends a moment before it is reaped; the grace
			// only bounds the wait for a child that closed stdout and
			// lives on.
			t := time.NewTimer(exitGrace)
			select {
			case <-c.proc.Exited():
				info, _ := c.proc.Wait()
				werr = fmt.Errorf("the server exited (%s)%s", exitText(info), stderrNote(c.proc))
			case <-t.C:
			}
			t.Stop()
		}
		if werr == nil {
			werr = errors.New("the connection closed")
		}
		c.endErr = werr
		close(c.done)
	}()
}

// startError explains a failed handshake, with the child's exit status
// and stderr when it died.
func (c *conn) startError(ctx context.Context, server string, err error) error {
	if c.proc != nil {
		// A handshake that failed by itself usually means the child died:
		// wait (briefly) for its status. After the startup timeout the
		// child is alive and mute, and there is nothing to wait for.
		grace := exitGrace
		if ctx.Err() != nil {
			grace = 0
		}
		t := time.NewTimer(grace)
		defer t.Stop()
		select {
		case <-c.proc.Exited():
			info, _ := c.proc.Wait()
			return errorf(CodeStart, server, "the server exited during start-up (%s)%s", exitText(info), stderrNote(c.proc))
		case <-t.C:
		}
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return errorf(CodeStart, server, "no handshake within the startup timeout: %w", err)
	}
	return errorf(CodeStart, server, "handshake: %w", err)
}

// exitGrace bounds the wait for a child's exit status after its stdout
// closed.
const exitGrace = 2 * time.Second

func exitText(info proc.ExitInfo) string {
	if info.Signaled {
		return fmt.Sprintf("killed by signal %d, %s", int(info.Signal), info.Signal)
	}
	return fmt.Sprintf("exit status %d", info.Code)
}

func stderrNote(p *proc.Process) string {
	if t := p.StderrTail(400); t != "" {
		return "; stderr: " + t
	}
	return ""
}

// headerTransport adds the configured headers to every request.
type headerTransport struct {
	base http.RoundTripper
	h    http.Header
}

func (t headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if len(t.h) == 0 {
		return t.base.RoundTrip(r)
	}
	r = r.Clone(r.Context())
	for k, vs := range t.h {
		r.Header[k] = slices.Clone(vs)
	}
	return t.base.RoundTrip(r)
}

// traceWriter copies every frame written to a stdio server to f.
type traceWriter struct {
	io.WriteCloser
	f func([]byte)
}

func (t traceWriter) Write(b []byte) (int, error) {
	t.f(slices.Clone(b))
	return t.WriteCloser.Write(b)
}
