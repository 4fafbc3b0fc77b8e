package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/dsh-dev/dsh/internal/app"
	"github.com/dsh-dev/dsh/internal/store"
)

// runFailure ends a dsh run that failed before its turn could run (a bad
// flag, a broken configuration, a missing key, an unknown resume id): the
// message goes to stderr and, with --json, a run/result line with status
// "error" goes to stdout, so a consumer of the stream always gets one.
type runFailure struct {
	stdio  IO
	asJSON bool
	// sessionID is set once a session is open.
	sessionID string
}

// fail reports err as fail does and returns its exit code.
func (r *runFailure) fail(err error) int {
	code := fail(r.stdio, err)
	r.result(err.Error())
	return code
}

// usage reports a usage error (exit 2).
func (r *runFailure) usage(format string, args ...any) int {
	msg := fmt.Sprintf(format, args...)
	fmt.Fprintln(r.stdio.Stderr, "dsh run:", msg)
	r.result(msg)
	return ExitUsage
}

func (r *runFailure) result(msg string) {
	if !r.asJSON {
		return
	}
	b, _ := json.Marshal(RunResult{Type: "run/result", SessionID: r.sessionID, Status: "error", Error: msg})
	fmt.Fprintf(r.stdio.Stdout, "%s\n", b)
}

// wantsJSON reports whether args ask for --json, for failures before (or
// while) the flags are parsed.
func wantsJSON(args []string) bool {
	for _, a := range args {
		switch {
		case a == "--":
			return false
		case a == "--json" || a == "-json":
			return true
		case strings.HasPrefix(a, "--json=") || strings.HasPrefix(a, "-json="):
			_, v, _ := strings.Cut(a, "=")
			return v == "true" || v == "1" || v == "t" || v == "T" || v == "TRUE" || v == "True"
		}
	}
	return false
}

// resumeError turns an unknown --resume id into a usage error that says
// where ids come from.
func resumeError(id string, err error) error {
	var ide *store.IDError
	if errors.As(err, &ide) {
		// fail prints an IDError with the candidates of an ambiguous
		// prefix, or with the hint; the wrapped text carries the hint
		// into a --json run/result too.
		if len(ide.Candidates) == 0 {
			return fmt.Errorf("%w; %s", err, idHint)
		}
		return err
	}
	if id == "" || !errors.Is(err, store.ErrNotFound) {
		return err
	}
	return &app.ConfigError{Err: fmt.Errorf("no session has the id %q; \"dsh sessions list --all\" lists every session with its id: %w", id, store.ErrNotFound)}
}
