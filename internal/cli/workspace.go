package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/dsh-dev/dsh/internal/workspace"
)

// workspaceCmd runs "dsh workspace": the registry of directories that
// dsh serve's clients group sessions by. Every subcommand first runs the
// registry's one-time bootstrap, so the command line and the server see
// the same registry from the first use of either.
func workspaceCmd(ctx context.Context, args []string, stdio IO) int {
	if len(args) == 0 {
		fmt.Fprint(stdio.Stderr, usage())
		return ExitUsage
	}
	switch args[0] {
	case "list", "ls":
		return workspaceList(ctx, args[1:], stdio)
	case "add":
		return workspaceAdd(ctx, args[1:], stdio)
	case "rename":
		return workspaceRename(ctx, args[1:], stdio)
	case "rm", "remove":
		return workspaceRemove(ctx, args[1:], stdio)
	}
	fmt.Fprintf(stdio.Stderr, "dsh workspace: unknown subcommand %q\n", args[0])
	return ExitUsage
}

// openRegistry opens the store (without needing the configuration) and
// its bootstrapped registry; close releases the store.
func openRegistry(ctx context.Context, stdio IO) (reg *workspace.Registry, close func(), code int) {
	a, code := openReadOnly(ctx, stdio)
	if a == nil {
		return nil, nil, code
	}
	reg = workspace.NewRegistry(a.Store)
	if err := reg.Bootstrap(ctx); err != nil {
		a.Close()
		return nil, nil, failWorkspace(stdio, err)
	}
	return reg, func() { a.Close() }, ExitOK
}

// failWorkspace prints a registry error: an unknown or ambiguous id, a bad
// path or title is a usage error (2), anything else a failure (1).
func failWorkspace(stdio IO, err error) int {
	var we *workspace.Error
	if !errors.As(err, &we) {
		return fail(stdio, err)
	}
	fmt.Fprintf(stdio.Stderr, "dsh: %v (%s)\n", err, we.Code)
	switch we.Code {
	case workspace.CodeNotFound, workspace.CodeAmbiguous:
		fmt.Fprintln(stdio.Stderr, `dsh: "dsh workspace list" shows the workspaces and their ids`)
		return ExitUsage
	case workspace.CodeInvalidPath, workspace.CodeInvalidTitle, workspace.CodeMoveInvalid:
		return ExitUsage
	}
	return ExitFailed
}

func workspaceList(ctx context.Context, args []string, stdio IO) int {
	fs := newFlags("workspace list", stdio)
	asJSON := fs.Bool("json", false, "print the workspaces as a JSON array")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return ExitUsage
	}
	if len(pos) != 0 {
		fmt.Fprintf(stdio.Stderr, "dsh workspace list: unexpected argument %q\n", pos[0])
		return ExitUsage
	}
	reg, closeReg, code := openRegistry(ctx, stdio)
	if reg == nil {
		return code
	}
	defer closeReg()
	all, err := reg.List(ctx)
	if err != nil {
		return failWorkspace(stdio, err)
	}
	if *asJSON {
		return writeJSON(stdio, all)
	}
	if len(all) == 0 {
		fmt.Fprintln(stdio.Stderr, `no workspaces; "dsh workspace add PATH" registers one`)
		return ExitOK
	}
	ids := make([]string, len(all))
	for i, w := range all {
		ids[i] = w.ID
	}
	short := shortIDs(ids, minShortID)
	home, _ := os.UserHomeDir()
	tw := tabwriter.NewWriter(stdio.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tTITLE\tSESSIONS\tSTATUS\tUPDATED\tPATH")
	for _, w := range all {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\n", short[w.ID], oneLine(w.Title), len(w.SessionIDs), w.Status,
			time.UnixMilli(w.UpdatedAt).Format("2006-01-02 15:04"), tildePath(w.Path, home))
	}
	_ = tw.Flush()
	return ExitOK
}

// oneLine keeps a cell of a table on one line.
func oneLine(s string) string {
	return strings.NewReplacer("\t", " ", "\n", " ", "\r", " ").Replace(s)
}

func workspaceAdd(ctx context.Context, args []string, stdio IO) int {
	fs := newFlags("workspace add", stdio)
	title := fs.String("title", "", "title of the workspace (default: the directory's name)")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return ExitUsage
	}
	if len(pos) != 1 {
		fmt.Fprintln(stdio.Stderr, "dsh workspace add: exactly one directory is required")
		return ExitUsage
	}
	// On the command line a relative path means one under the current
	// directory; the registry itself only takes absolute paths.
	path, err := filepath.Abs(pos[0])
	if err != nil {
		return fail(stdio, err)
	}
	reg, closeReg, code := openRegistry(ctx, stdio)
	if reg == nil {
		return code
	}
	defer closeReg()
	w, created, err := reg.Create(ctx, path, *title)
	if err != nil {
		return failWorkspace(stdio, err)
	}
	if created {
		fmt.Fprintf(stdio.Stdout, "added workspace %s %q at %s\n", w.ID, w.Title, w.Path)
	} else {
		fmt.Fprintf(stdio.Stdout, "workspace %s %q already registers %s\n", w.ID, w.Title, w.Path)
	}
	return ExitOK
}

func workspaceRename(ctx context.Context, args []string, stdio IO) int {
	fs := newFlags("workspace rename", stdio)
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return ExitUsage
	}
	if len(pos) != 2 {
		fmt.Fprintln(stdio.Stderr, "dsh workspace rename: a workspace ID and a new title are required")
		return ExitUsage
	}
	reg, closeReg, code := openRegistry(ctx, stdio)
	if reg == nil {
		return code
	}
	defer closeReg()
	id, err := reg.Resolve(ctx, pos[0])
	if err != nil {
		return failWorkspace(stdio, err)
	}
	w, err := reg.Rename(ctx, id, pos[1])
	if err != nil {
		return failWorkspace(stdio, err)
	}
	fmt.Fprintf(stdio.Stdout, "renamed workspace %s to %q\n", w.ID, w.Title)
	return ExitOK
}

func workspaceRemove(ctx context.Context, args []string, stdio IO) int {
	fs := newFlags("workspace rm", stdio)
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return ExitUsage
	}
	if len(pos) != 1 {
		fmt.Fprintln(stdio.Stderr, "dsh workspace rm: exactly one workspace ID is required")
		return ExitUsage
	}
	reg, closeReg, code := openRegistry(ctx, stdio)
	if reg == nil {
		return code
	}
	defer closeReg()
	id, err := reg.Resolve(ctx, pos[0])
	if err != nil {
		return failWorkspace(stdio, err)
	}
	w, err := reg.Get(ctx, id)
	if err != nil {
		return failWorkspace(stdio, err)
	}
	if err := reg.Delete(ctx, id); err != nil {
		return failWorkspace(stdio, err)
	}
	fmt.Fprintf(stdio.Stdout, "removed workspace %s (%s); the directory and its sessions are kept\n", w.ID, w.Path)
	return ExitOK
}
