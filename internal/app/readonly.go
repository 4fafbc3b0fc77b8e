package app

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/dsh-dev/dsh/internal/compose"
	"github.com/dsh-dev/dsh/internal/config"
	"github.com/dsh-dev/dsh/internal/provider"
	"github.com/dsh-dev/dsh/internal/store/sqlite"
)

// OpenStore opens the state directory and its store without loading the
// configuration, for commands that only read sessions (list, show,
// export): they must keep working while config.yaml is broken. The App
// has no configuration or composition, so it cannot open sessions.
func OpenStore(ctx context.Context) (*App, error) {
	home, err := config.Home()
	if err != nil {
		return nil, &ConfigError{err}
	}
	if err := os.MkdirAll(home, 0o700); err != nil {
		return nil, fmt.Errorf("create %s: %w", home, err)
	}
	st, err := sqlite.Open(ctx, filepath.Join(home, "dsh.db"))
	if err != nil {
		return nil, err
	}
	return &App{Home: home, Store: st, Catalog: provider.NewCatalog(config.Config{}, nil), jobs: newJobHub()}, nil
}

// DefaultModel is the "provider/model" a session of comp uses when none
// is named (the "model" row, else the built-in default).
func DefaultModel(comp *compose.Composition) string {
	if comp == nil {
		return provider.DefaultModel
	}
	return (&App{Composition: comp}).modelDefaults().Default
}
