package cli

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/dsh-dev/dsh/internal/app"
	"github.com/dsh-dev/dsh/internal/host"
	"github.com/dsh-dev/dsh/internal/server"
	"github.com/dsh-dev/dsh/internal/workspace"
)

// serveShutdown bounds the orderly stop after SIGINT/SIGTERM; the whole
// exit must fit in 5 s.
const serveShutdown = 4 * time.Second

// serveCmd is "dsh serve": the session host behind the HTTP API and the
// web UI, until SIGINT or SIGTERM.
func serveCmd(ctx context.Context, args []string, stdio IO) int {
	fs := newFlags("serve", stdio)
	listen := fs.String("listen", "127.0.0.1:3080", "address to listen on")
	var trusted patchFlags
	fs.Var(&trusted, "trusted-host", "another Host header value to accept (repeatable)")
	open := fs.Bool("open", false, "open the web UI in a browser")
	ghAddr := fs.String("github-webhook", "", "address of the GitHub review webhook listener")
	rest, err := parseInterspersed(fs, args)
	if err != nil {
		return ExitUsage
	}
	if len(rest) > 0 {
		fmt.Fprintf(stdio.Stderr, "dsh serve: unexpected argument %q\n", rest[0])
		return ExitUsage
	}
	listenHost, _, err := net.SplitHostPort(*listen)
	if err != nil {
		fmt.Fprintf(stdio.Stderr, "dsh serve: --listen %q: want HOST:PORT (%v)\n", *listen, err)
		return ExitUsage
	}

	// Signals first: a SIGTERM during start-up still ends the process
	// through the orderly path.
	sigCtx, stopSignals := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stopSignals()

	a, code := openApp(ctx, stdio, nil)
	if a == nil {
		return code
	}
	defer a.Close()
	token, err := server.LoadOrCreateToken(a.Home)
	if err != nil {
		return fail(stdio, err)
	}
	reg := workspace.NewRegistry(a.Store)
	if err := reg.Bootstrap(ctx); err != nil {
		return fail(stdio, fmt.Errorf("bootstrap workspaces: %w", err))
	}
	h, err := host.New(host.Config{App: a, Holder: "dsh serve"})
	if err != nil {
		return fail(stdio, err)
	}
	// deadline is set when the orderly stop begins; the host's close
	// shares it with the HTTP shutdown.
	deadline := time.Now().Add(serveShutdown)
	closeHost := func() error {
		cctx, cancel := context.WithDeadline(context.WithoutCancel(ctx), deadline)
		defer cancel()
		return h.Close(cctx)
	}
	// Automation (schedules, the GitHub webhook) runs from start-up,
	// whether or not a client ever connects; it stops before the host.
	auto, err := startAutomation(ctx, a, h, *ghAddr, stdio)
	if err != nil {
		return fail(stdio, errors.Join(err, closeHost()))
	}
	defer auto.stop()
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		auto.stop()
		return fail(stdio, errors.Join(err, closeHost()))
	}
	addr := ln.Addr().(*net.TCPAddr)
	// The address as asked for, with the port the kernel chose: a wildcard
	// host stays what the user wrote rather than the socket's "[::]".
	if listenHost == "" {
		listenHost = "0.0.0.0"
	}
	hostPort := net.JoinHostPort(listenHost, fmt.Sprint(addr.Port))
	srv := server.New(h, reg, server.Options{
		Token: token, Listen: hostPort, TrustedHosts: trusted,
		Version: app.Version, App: a,
	})
	hs, capped := server.NewHTTPServer(ln, srv, serveLimits(a, stdio))
	hs.RegisterOnShutdown(srv.Close)

	base := "http://" + hostPort
	browse := base
	if addr.IP.IsUnspecified() {
		browse = "http://" + net.JoinHostPort("127.0.0.1", fmt.Sprint(addr.Port))
	}
	fmt.Fprintf(stdio.Stdout, "dsh serve listening on %s\n", base)
	fmt.Fprintf(stdio.Stdout, "open %s/?token=%s\n", browse, token)
	if !addr.IP.IsLoopback() {
		fmt.Fprintf(stdio.Stderr, "dsh serve: warning: %s is not a loopback address; traffic (the token included) is not encrypted: use it only on a network you trust, or put TLS in front\n", listenHost)
	}
	if *open {
		// The opener's command line is readable by every local user
		// (/proc/PID/cmdline): it gets a one-time code that expires in a
		// minute, never the token.
		code, err := srv.NewLoginCode()
		if err != nil {
			fmt.Fprintf(stdio.Stderr, "dsh serve: --open: %v; open the URL above yourself\n", err)
		} else {
			openBrowser(stdio, browse+server.LoginPath+"?code="+code)
		}
	}

	served := make(chan error, 1)
	go func() { served <- hs.Serve(capped) }()
	var serveErr error
	select {
	case <-sigCtx.Done():
	case serveErr = <-served:
	}
	// A second signal now ends the process the default way.
	stopSignals()
	// Stop accepting and end every stream, then cancel running turns,
	// flush logs and release leases, all within one deadline.
	deadline = time.Now().Add(serveShutdown)
	sctx, cancel := context.WithDeadline(context.WithoutCancel(ctx), deadline)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil {
		_ = hs.Close()
	}
	if serveErr == nil {
		serveErr = <-served
	}
	if errors.Is(serveErr, http.ErrServerClosed) {
		serveErr = nil
	}
	auto.stop()
	if err := errors.Join(serveErr, closeHost()); err != nil {
		return fail(stdio, err)
	}
	return ExitOK
}

// serveLimits are the listeners' timeouts and API cap from config.yaml's
// serve section (zero keeps each default); refusals are logged to stderr.
func serveLimits(a *app.App, stdio IO) server.Limits {
	c := a.Config.Serve
	return server.Limits{
		ReadHeaderTimeout: c.ReadHeaderTimeout, ReadTimeout: c.ReadTimeout,
		WriteTimeout: c.WriteTimeout, IdleTimeout: c.IdleTimeout, MaxConns: c.MaxConns,
		Logf: func(format string, args ...any) {
			fmt.Fprintf(stdio.Stderr, "dsh serve: "+format+"\n", args...)
		},
	}
}

// openBrowser starts the platform's URL opener when there is one; a
// missing or failing opener only earns a note.
func openBrowser(stdio IO, url string) {
	name := "xdg-open"
	if runtime.GOOS == "darwin" {
		name = "open"
	}
	path, err := exec.LookPath(name)
	if err != nil {
		fmt.Fprintf(stdio.Stderr, "dsh serve: no %s to open a browser; open the URL above yourself\n", name)
		return
	}
	c := exec.Command(path, url)
	c.Env = openerEnv(os.Environ())
	if err := c.Start(); err != nil {
		fmt.Fprintf(stdio.Stderr, "dsh serve: %s: %v\n", name, err)
		return
	}
	// Reaped when the opener exits (it returns at once).
	go func() { _ = c.Wait() }()
}

// openerEnv is the environment without what looks like a credential: the
// opener and the browser it starts need none of dsh's API keys.
func openerEnv(env []string) []string {
	var out []string
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		up := strings.ToUpper(name)
		if strings.HasSuffix(up, "_KEY") || strings.Contains(up, "TOKEN") || strings.Contains(up, "SECRET") || strings.Contains(up, "PASSWORD") {
			continue
		}
		out = append(out, kv)
	}
	return out
}
