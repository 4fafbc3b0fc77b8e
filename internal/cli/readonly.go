package cli

import (
	"context"
	"errors"
	"fmt"

	"github.com/dsh-dev/dsh/internal/app"
)

// openReadOnly opens the store for a command that only reads sessions. A
// broken configuration does not stop it: the error becomes a warning on
// stderr and the store is opened without the configuration.
func openReadOnly(ctx context.Context, stdio IO) (*app.App, int) {
	a, err := app.Open(ctx, app.Options{})
	if err == nil {
		return a, ExitOK
	}
	var ce *app.ConfigError
	if !errors.As(err, &ce) {
		return nil, fail(stdio, err)
	}
	warnConfig(stdio, err)
	if a, err = app.OpenStore(ctx); err != nil {
		return nil, fail(stdio, err)
	}
	return a, ExitOK
}

// warnConfig reports a configuration error that a command can do without.
func warnConfig(stdio IO, err error) {
	fmt.Fprintf(stdio.Stderr, "dsh: warning: %v\ndsh: warning: going on without the configuration (this command does not need it); \"dsh doctor\" checks it\n", err)
}
