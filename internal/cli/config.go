package cli

import (
	"fmt"

	"github.com/dsh-dev/dsh/internal/app"
)

func configCmd(args []string, stdio IO) int {
	if len(args) == 0 || args[0] != "dump" {
		fmt.Fprintln(stdio.Stderr, "usage: dsh config dump [--patch FILE]...")
		return ExitUsage
	}
	fs := newFlags("config dump", stdio)
	var patches patchFlags
	fs.Var(&patches, "patch", "apply this profile patch file after config.yaml (repeatable)")
	if _, err := parseInterspersed(fs, args[1:]); err != nil {
		return ExitUsage
	}
	_, _, comp, err := app.Compose(app.Options{Patches: patches})
	if err != nil {
		return fail(stdio, err)
	}
	if err := comp.Dump(stdio.Stdout); err != nil {
		return fail(stdio, err)
	}
	return ExitOK
}
