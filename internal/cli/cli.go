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

	"github.com/dsh-dev/dsh/internal/app"
	"github.com/dsh-dev/dsh/internal/store/sqlite"
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

const usage = `dsh — an open agent harness

Usage:
  dsh run [--model P/M] [--effort E] [--agent-preset NAME] [--cwd DIR] [--json]
          [--permission PRESET] [--approval ask|never]
          [--patch FILE]... [--resume ID | --continue] PROMPT
  dsh sessions list [--json] [--all]
  dsh sessions show ID [--json]
  dsh sessions export ID
  dsh sessions import FILE|DIR...
  dsh sessions tree ID [--json]
  dsh compact ID
  dsh config dump [--patch FILE]...
  dsh delegate codex [--json] [flags] PROMPT
  dsh delegate recover [--json] ID
  dsh doctor
  dsh version

PROMPT "-" reads the prompt from standard input. A session ID may be
abbreviated to any prefix that only one session has. State lives in $DSH_HOME
(default ~/.dsh). Run "dsh COMMAND -h" for a command's flags.
`

// Main runs dsh with args (without the program name) and returns the exit
// code.
func Main(ctx context.Context, args []string, stdio IO) int {
	if len(args) == 0 {
		fmt.Fprint(stdio.Stderr, usage)
		return ExitUsage
	}
	switch args[0] {
	case "run":
		return runCmd(ctx, args[1:], stdio)
	case "sessions":
		return sessionsCmd(ctx, args[1:], stdio)
	case "config":
		return configCmd(args[1:], stdio)
	case "compact":
		return compactCmd(ctx, args[1:], stdio)
	case "doctor":
		return doctorCmd(ctx, args[1:], stdio)
	case "delegate":
		return delegateCmd(ctx, args[1:], stdio)
	case "version", "--version":
		fmt.Fprintln(stdio.Stdout, "dsh", app.Version)
		return ExitOK
	case "help", "-h", "--help":
		fmt.Fprint(stdio.Stdout, usage)
		return ExitOK
	}
	fmt.Fprintf(stdio.Stderr, "dsh: unknown command %q\n\n%s", args[0], usage)
	return ExitUsage
}

func newFlags(name string, stdio IO) *flag.FlagSet {
	fs := flag.NewFlagSet("dsh "+name, flag.ContinueOnError)
	fs.SetOutput(stdio.Stderr)
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
	var ide *sqlite.IDError
	if errors.As(err, &ide) {
		printIDError(stdio, ide)
		return ExitUsage
	}
	fmt.Fprintln(stdio.Stderr, "dsh:", err)
	var ce *app.ConfigError
	if errors.As(err, &ce) {
		return ExitUsage
	}
	if errors.Is(err, sqlite.ErrBusy) {
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
