package cli

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/dsh-dev/dsh/internal/acp"
	"github.com/dsh-dev/dsh/internal/app"
	"github.com/dsh-dev/dsh/internal/host"
	"github.com/dsh-dev/dsh/internal/permission"
	"github.com/dsh-dev/dsh/internal/rpc"
)

// stdioShutdown bounds closing the host after a stdio protocol ends; the
// whole exit must fit in 5 s.
const stdioShutdown = 4 * time.Second

// stdioFlags are the session choices of dsh acp and dsh rpc.
type stdioFlags struct {
	model, permission, preset *string
}

func addStdioFlags(fs interface {
	String(name, value, usage string) *string
}) stdioFlags {
	return stdioFlags{
		model:      fs.String("model", "", "model of new sessions as provider/model"),
		permission: fs.String("permission", "", "permission preset of new sessions"),
		preset:     fs.String("agent-preset", "", "agent preset of new sessions"),
	}
}

// check refuses a choice that would fail every session/new.
func (f stdioFlags) check(a *app.App) error {
	if *f.model != "" {
		if _, err := a.Catalog.Resolve(*f.model, ""); err != nil {
			return fmt.Errorf("--model %s: %w", *f.model, err)
		}
	}
	if *f.permission != "" {
		if _, ok := permission.LookupPreset(*f.permission); !ok {
			return fmt.Errorf("--permission %q: unknown preset (want read-only, workspace-write, auto or full-access)", *f.permission)
		}
	}
	return nil
}

// serveStdio opens the app and a host, runs serve until standard input
// ends or a signal arrives, then closes the host (cancelling turns,
// flushing logs, releasing leases) within stdioShutdown.
func serveStdio(ctx context.Context, name string, args []string, stdio IO,
	serve func(ctx context.Context, h *host.Host, f stdioFlags) error) int {
	fs := newFlags(name, stdio)
	f := addStdioFlags(fs)
	rest, err := parseInterspersed(fs, args)
	if err != nil {
		return ExitUsage
	}
	if len(rest) > 0 {
		fmt.Fprintf(stdio.Stderr, "dsh %s: unexpected argument %q\n", name, rest[0])
		return ExitUsage
	}
	sigCtx, stopSignals := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stopSignals()
	// A client that stops reading must not kill dsh with SIGPIPE before
	// it has flushed its sessions: with the signal notified (never read),
	// a write to the closed stdout fails with EPIPE instead. Notify, not
	// Ignore: children still start with the default disposition.
	sigpipe := make(chan os.Signal, 1)
	signal.Notify(sigpipe, syscall.SIGPIPE)
	defer signal.Stop(sigpipe)
	a, code := openApp(ctx, stdio, nil)
	if a == nil {
		return code
	}
	defer a.Close()
	if err := f.check(a); err != nil {
		fmt.Fprintf(stdio.Stderr, "dsh %s: %v\n", name, err)
		return ExitUsage
	}
	h, err := host.New(host.Config{App: a, Holder: "dsh " + name})
	if err != nil {
		return fail(stdio, err)
	}
	serveErr := serve(sigCtx, h, f)
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), stdioShutdown)
	defer cancel()
	if err := h.Close(cctx); err != nil {
		fmt.Fprintf(stdio.Stderr, "dsh %s: close: %v\n", name, err)
	}
	if serveErr != nil {
		return fail(stdio, serveErr)
	}
	return ExitOK
}

// acpCmd is "dsh acp": an ACP v1 agent on standard input and output.
func acpCmd(ctx context.Context, args []string, stdio IO) int {
	return serveStdio(ctx, "acp", args, stdio, func(ctx context.Context, h *host.Host, f stdioFlags) error {
		return acp.Serve(ctx, h, stdio.Stdin, stdio.Stdout, acp.Options{
			Model: *f.model, Permission: *f.permission, AgentPreset: *f.preset,
			Log: stdio.Stderr, Version: app.Version,
		})
	})
}

// rpcCmd is "dsh rpc": the dsh JSON-RPC runtime on standard input and
// output (docs/rpc.md).
func rpcCmd(ctx context.Context, args []string, stdio IO) int {
	return serveStdio(ctx, "rpc", args, stdio, func(ctx context.Context, h *host.Host, f stdioFlags) error {
		return rpc.Serve(ctx, h, stdio.Stdin, stdio.Stdout, rpc.Options{
			Log: stdio.Stderr, Version: app.Version,
			Defaults: host.CreateRequest{Model: *f.model, Permission: *f.permission, AgentPreset: *f.preset},
		})
	})
}
