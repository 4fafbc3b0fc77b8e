package cli

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/dsh-dev/dsh/internal/config"
	"github.com/dsh-dev/dsh/internal/host"
	"github.com/dsh-dev/dsh/internal/tui"
)

// interactive reports whether dsh runs on a terminal (standard input and
// output both), where a bare "dsh" opens the UI.
func interactive(stdio IO) bool {
	_, in := termWidth(asWriter(stdio.Stdin))
	_, out := termWidth(stdio.Stdout)
	return in && out
}

// asWriter lets termWidth check standard input, an *os.File too.
func asWriter(r io.Reader) io.Writer {
	if f, ok := r.(*os.File); ok {
		return f
	}
	return nil
}

func tuiCmd(ctx context.Context, args []string, stdio IO) int {
	fs := newFlags("tui", stdio)
	resume := fs.String("resume", "", "open the session with this id")
	cont := fs.Bool("continue", false, "open the newest session of this directory")
	model := fs.String("model", "", "model as provider/model of a new session")
	effort := fs.String("effort", "", "reasoning effort: off, low, high or max")
	perm := fs.String("permission", "", "permission preset: read-only, workspace-write (default), auto or full-access")
	attach := fs.String("attach", "", "drive the sessions of the dsh serve at this URL")
	alt := fs.Bool("alt-screen", false, "draw full-screen instead of inline")
	var patches patchFlags
	fs.Var(&patches, "patch", "apply this profile patch file after config.yaml (repeatable)")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return ExitUsage
	}
	if len(pos) > 0 {
		fmt.Fprintf(stdio.Stderr, "dsh tui: unexpected argument %q\n", pos[0])
		return ExitUsage
	}
	if *resume != "" && *cont {
		fmt.Fprintln(stdio.Stderr, "dsh tui: --resume and --continue are exclusive")
		return ExitUsage
	}
	if !interactive(stdio) {
		fmt.Fprintln(stdio.Stderr, "dsh tui: standard input and output must be a terminal (use dsh run for scripts)")
		return ExitUsage
	}
	cwd, err := os.Getwd()
	if err != nil {
		return fail(stdio, err)
	}
	o := tui.Options{Open: tui.OpenRequest{Cwd: cwd, ResumeID: *resume, Continue: *cont, Model: *model, Effort: *effort, Permission: *perm},
		AltScreen: *alt, Color: os.Getenv("NO_COLOR") == "" && os.Getenv("TERM") != "dumb", Cwd: cwd}
	if *attach != "" {
		return runAttached(ctx, o, *attach, stdio)
	}
	a, code := openApp(ctx, stdio, patches)
	if a == nil {
		return code
	}
	defer a.Close()
	// The UI is a driver over the session host like dsh run; approvals go
	// through the host's queue, which the UI shows and answers.
	h, err := host.New(host.Config{App: a, Holder: "dsh tui", IdleAfter: -1})
	if err != nil {
		return fail(stdio, err)
	}
	defer h.Close(context.WithoutCancel(ctx))
	o.Backend, o.Home = tui.NewHostBackend(h), a.Home
	return finishTUI(ctx, o, stdio, *resume)
}

func runAttached(ctx context.Context, o tui.Options, url string, stdio IO) int {
	home, err := configHome()
	if err != nil {
		return fail(stdio, err)
	}
	token, err := tui.ReadToken(home)
	if err != nil {
		return fail(stdio, err)
	}
	b, err := tui.NewAttachBackend(url, token, nil)
	if err != nil {
		fmt.Fprintln(stdio.Stderr, "dsh tui:", err)
		return ExitUsage
	}
	o.Backend, o.Home = b, home
	return finishTUI(ctx, o, stdio, o.Open.ResumeID)
}

func finishTUI(ctx context.Context, o tui.Options, stdio IO, resume string) int {
	code, id, err := tui.Run(ctx, o, nil, nil)
	if err != nil {
		return fail(stdio, resumeError(resume, err))
	}
	fmt.Fprintf(stdio.Stderr, "session %s (dsh tui --resume %s continues it)\n", id, id)
	return code
}

func configHome() (string, error) { return config.Home() }
