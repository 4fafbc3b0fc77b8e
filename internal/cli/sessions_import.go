package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"

	"github.com/dsh-dev/dsh/internal/app"
	"github.com/dsh-dev/dsh/internal/store"
)

// sessionsImport imports every session named by its arguments: JSONL
// files, directories (every *.jsonl directly in them) and "-" for
// standard input. Each file is its own transaction, so one bad file is
// reported and skipped without losing the others; the exit code is 1 when
// any failed.
func sessionsImport(ctx context.Context, args []string, stdio IO) int {
	if len(args) == 0 {
		fmt.Fprintln(stdio.Stderr, "dsh sessions import: at least one FILE or DIRECTORY is required (- for stdin)")
		return ExitUsage
	}
	if n := countArg(args, "-"); n > 1 {
		fmt.Fprintln(stdio.Stderr, "dsh sessions import: - (stdin) can be given only once")
		return ExitUsage
	}
	// Expand directories first: an argument that names nothing is a
	// failure of its own, reported with the rest.
	var files []string
	failed := 0
	for _, arg := range args {
		found, err := importFiles(arg)
		if err != nil {
			fmt.Fprintf(stdio.Stderr, "dsh: import %s: %v\n", arg, err)
			failed++
			continue
		}
		files = append(files, found...)
	}
	a, code := openReadOnly(ctx, stdio)
	if a == nil {
		return code
	}
	defer a.Close()
	imported := 0
	for _, f := range files {
		if err := importOne(ctx, a, f, stdio); err != nil {
			fmt.Fprintf(stdio.Stderr, "dsh: import %s: %v\n", f, importReason(err))
			failed++
			continue
		}
		imported++
	}
	if len(files) > 1 || failed > 0 {
		fmt.Fprintf(stdio.Stderr, "imported %d of %d sessions\n", imported, imported+failed)
	}
	if failed > 0 {
		return ExitFailed
	}
	return ExitOK
}

func countArg(args []string, s string) int {
	n := 0
	for _, a := range args {
		if a == s {
			n++
		}
	}
	return n
}

// importFiles returns the files arg names: itself, or a directory's
// *.jsonl files in name order.
func importFiles(arg string) ([]string, error) {
	if arg == "-" {
		return []string{arg}, nil
	}
	st, err := os.Stat(arg)
	if err != nil {
		return nil, err
	}
	if !st.IsDir() {
		return []string{arg}, nil
	}
	ents, err := os.ReadDir(arg)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range ents {
		if filepath.Ext(e.Name()) == ".jsonl" && e.Type().IsRegular() {
			out = append(out, filepath.Join(arg, e.Name()))
		}
	}
	if len(out) == 0 {
		return nil, errors.New("the directory holds no *.jsonl files")
	}
	slices.Sort(out)
	return out, nil
}

// importOne imports one file ("-" for stdin) and reports it on stdout.
func importOne(ctx context.Context, a *app.App, file string, stdio IO) error {
	var r io.Reader = stdio.Stdin
	if file != "-" {
		f, err := os.Open(file)
		if err != nil {
			return err
		}
		defer f.Close()
		r = f
	}
	h, err := a.Store.Import(ctx, r)
	if err != nil {
		return err
	}
	title := ""
	if e, err := a.Store.Get(ctx, h.ID); err == nil && e.Title != "" {
		title = fmt.Sprintf(" %q", e.Title)
	}
	fmt.Fprintf(stdio.Stdout, "imported session %s%s from %s\n", h.ID, title, file)
	return nil
}

// importReason words an import error for people.
func importReason(err error) error {
	if errors.Is(err, store.ErrExists) {
		return fmt.Errorf("%w (it was imported or created here before; nothing was changed)", err)
	}
	return err
}
