// Package cli implements dsh's command line: run, sessions and version.
// Commands parse flags, call the composition root (internal/app) and map
// outcomes to exit codes: 0 success, 1 a failed turn or command, 2 usage
// or configuration errors, 75 a session in use by another process
// (SESSION_BUSY; retry later), 130 after an interrupt.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/dsh-dev/dsh/internal/app"
	"github.com/dsh-dev/dsh/internal/store"
)

// Exit codes.
const (
	ExitOK     = 0
	ExitFailed = 1
	ExitUsage  = 2
	// ExitBusy is a session whose lease another live process holds
	// (SESSION_BUSY): a temporary failure, as sysexits' EX_TEMPFAIL.
	ExitBusy        = 75
	ExitInterrupted = 130
)

// IO is the process's standard streams.
type IO struct {
	Stdin          io.Reader
	Stdout, Stderr io.Writer
}

// usage is the overview a bare "dsh" prints; it is built from the help
// table, so every command appears in it, when first needed.
var usage = sync.OnceValue(usageText)

// Main runs dsh with args (without the program name) and returns the exit
// code.
func Main(ctx context.Context, args []string, stdio IO) int {
	if len(args) == 0 && interactive(stdio) {
		// On a terminal a bare dsh opens the conversation UI.
		return tuiCmd(ctx, nil, stdio)
	}
	if len(args) == 0 {
		// Without a command and a terminal there is nothing to run: the
		// overview goes to stderr and the exit status says it was not a
		// success.
		fmt.Fprint(stdio.Stderr, usage())
		return ExitUsage
	}
	if args[0] == "help" {
		var words []string
		for _, a := range args[1:] {
			if !isHelpFlag(a) {
				words = append(words, a)
			}
		}
		if len(words) == 0 && len(args) > 1 {
			words = []string{"help"} // "dsh help -h"
		}
		return helpCmd(words, stdio)
	}
	if path, ok := helpRequest(args); ok {
		return helpCmd(path, stdio)
	}
	switch args[0] {
	case "run":
		return runCmd(ctx, args[1:], stdio)
	case "sessions":
		return sessionsCmd(ctx, args[1:], stdio)
	case "workspace":
		return workspaceCmd(ctx, args[1:], stdio)
	case "config":
		return configCmd(args[1:], stdio)
	case "compact":
		return compactCmd(ctx, args[1:], stdio)
	case "doctor":
		return doctorCmd(ctx, args[1:], stdio)
	case "serve":
		return serveCmd(ctx, args[1:], stdio)
	case "tui":
		return tuiCmd(ctx, args[1:], stdio)
	case "delegate":
		return delegateCmd(ctx, args[1:], stdio)
	case "hooks":
		return hooksCmd(ctx, args[1:], stdio)
	case "schedule":
		return scheduleCmd(ctx, args[1:], stdio)
	case "mcp":
		return mcpCmd(ctx, args[1:], stdio)
	case "acp":
		return acpCmd(ctx, args[1:], stdio)
	case "rpc":
		return rpcCmd(ctx, args[1:], stdio)
	case "version", "--version":
		fmt.Fprintln(stdio.Stdout, "dsh", app.Version)
		return ExitOK
	case "-h", "-help", "--help":
		fmt.Fprint(stdio.Stdout, usage())
		return ExitOK
	}
	fmt.Fprintf(stdio.Stderr, "dsh: unknown command %q\n\n%s", args[0], usage())
	return ExitUsage
}

func newFlags(name string, stdio IO) *flag.FlagSet {
	fs := flag.NewFlagSet("dsh "+name, flag.ContinueOnError)
	fs.SetOutput(stdio.Stderr)
	// After a flag error: the usage lines, the flags, and where the
	// examples are.
	fs.Usage = func() {
		w := fs.Output()
		if c, ok := lookup(name); ok {
			fmt.Fprintln(w, "usage:")
			for _, s := range synopses(c) {
				fmt.Fprintf(w, "  dsh %s\n", s)
			}
		}
		fmt.Fprintln(w, "flags:")
		fs.PrintDefaults()
		fmt.Fprintf(w, "Run \"dsh help %s\" for details and examples.\n", name)
	}
	return fs
}

// parseInterspersed parses flags that may appear before or after
// positional arguments, so "dsh run PROMPT --json" works too.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		if args[0] == "--" {
			return append(pos, args[1:]...), nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

// fail prints err and returns the exit code its kind calls for.
func fail(stdio IO, err error) int {
	// An id that names no session, or several, is a usage error with
	// directions for finding the right one.
	var ide *store.IDError
	if errors.As(err, &ide) {
		printIDError(stdio, ide)
		return ExitUsage
	}
	fmt.Fprintln(stdio.Stderr, "dsh:", err)
	var ce *app.ConfigError
	if errors.As(err, &ce) {
		return ExitUsage
	}
	if errors.Is(err, store.ErrBusy) {
		return ExitBusy
	}
	return ExitFailed
}

// patchFlags collects repeated --patch values.
type patchFlags []string

func (p *patchFlags) String() string     { return strings.Join(*p, ",") }
func (p *patchFlags) Set(v string) error { *p = append(*p, v); return nil }

func openApp(ctx context.Context, stdio IO, patches []string) (*app.App, int) {
	a, err := app.Open(ctx, app.Options{Patches: patches})
	if err != nil {
		return nil, fail(stdio, err)
	}
	return a, ExitOK
}
