package cli

import (
	"context"
	"fmt"

	"github.com/dsh-dev/dsh/internal/app"
)

func compactCmd(ctx context.Context, args []string, stdio IO) int {
	fs := newFlags("compact", stdio)
	model := fs.String("model", "", "model for the summary (default: the profile's model)")
	var patches patchFlags
	fs.Var(&patches, "patch", "apply this profile patch file after config.yaml (repeatable)")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return ExitUsage
	}
	if len(pos) != 1 {
		fmt.Fprintln(stdio.Stderr, "dsh compact: exactly one session ID is required")
		return ExitUsage
	}
	a, code := openApp(ctx, stdio, patches)
	if a == nil {
		return code
	}
	defer a.Close()
	sess, err := a.OpenSession(ctx, app.SessionOptions{Model: *model, ResumeID: pos[0], Holder: "dsh compact"})
	if err != nil {
		return fail(stdio, resumeError(pos[0], err))
	}
	defer sess.Close()
	if sess.Compactor == nil {
		return fail(stdio, &app.ConfigError{Err: fmt.Errorf("compaction is disabled in the profile")})
	}
	res, err := sess.Compactor.Compact(ctx, "")
	if ferr := sess.Log.Flush(context.WithoutCancel(ctx)); err == nil {
		err = ferr
	}
	if err != nil {
		return fail(stdio, err)
	}
	fmt.Fprintln(stdio.Stdout, res.String())
	return ExitOK
}
