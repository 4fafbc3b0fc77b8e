// Package app is dsh's composition root: it opens the state directory and
// store, resolves the model route, registers the tools and wires an agent
// for a new or resumed session. cmd/dsh and the CLI only call into it.
package app

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/dsh-dev/dsh/internal/agent"
	"github.com/dsh-dev/dsh/internal/config"
	"github.com/dsh-dev/dsh/internal/llm"
	"github.com/dsh-dev/dsh/internal/provider"
	"github.com/dsh-dev/dsh/internal/session"
	"github.com/dsh-dev/dsh/internal/store/sqlite"
	"github.com/dsh-dev/dsh/internal/tool"
	"github.com/dsh-dev/dsh/internal/tools/bash"
)

//go:embed system.md
var systemPrompt string

// Version is the dsh version string, set by the linker for releases.
var Version = "0.1.0-dev"

// UserAgent is sent to model providers.
func UserAgent() string { return "dsh/" + Version }

// App is the opened state directory with its configuration and store.
type App struct {
	Home    string
	Config  config.Config
	Store   *sqlite.Store
	Catalog *provider.Catalog
}

// ConfigError marks errors in configuration or usage (exit code 2).
type ConfigError struct{ Err error }

func (e *ConfigError) Error() string { return e.Err.Error() }
func (e *ConfigError) Unwrap() error { return e.Err }

// Open loads $DSH_HOME/config.yaml and opens the embedded store
// $DSH_HOME/dsh.db, creating both directories as needed.
func Open(ctx context.Context) (*App, error) {
	home, err := config.Home()
	if err != nil {
		return nil, &ConfigError{err}
	}
	if err := os.MkdirAll(home, 0o700); err != nil {
		return nil, fmt.Errorf("create %s: %w", home, err)
	}
	cfg, err := config.Load(home)
	if err != nil {
		return nil, &ConfigError{err}
	}
	st, err := sqlite.Open(ctx, filepath.Join(home, "dsh.db"))
	if err != nil {
		return nil, err
	}
	return &App{Home: home, Config: cfg, Store: st, Catalog: provider.NewCatalog(cfg, nil)}, nil
}

// Close releases the store.
func (a *App) Close() error { return a.Store.Close() }

// SessionOptions selects the session an agent runs.
type SessionOptions struct {
	// Model is "provider/model"; empty uses config, then the default.
	Model  string
	Effort string
	// Cwd is the session working directory for a new session.
	Cwd string
	// ResumeID resumes that session; Continue resumes the newest session
	// whose cwd is Cwd.
	ResumeID string
	Continue bool
}

// Session is a wired agent over a live session log.
type Session struct {
	Agent *agent.Agent
	Log   *session.Log
	Route provider.Resolved
}

// OpenSession creates or resumes a session and wires its agent.
func (a *App) OpenSession(ctx context.Context, o SessionOptions) (*Session, error) {
	spec := o.Model
	if spec == "" {
		spec = a.Config.Model
	}
	route, err := a.Catalog.Resolve(spec, UserAgent())
	if err != nil {
		return nil, &ConfigError{err}
	}
	effortName := o.Effort
	if effortName == "" {
		effortName = a.Config.Effort
	}
	effort, err := llm.ParseEffort(effortName)
	if err != nil {
		return nil, &ConfigError{err}
	}
	cwd := o.Cwd
	if cwd == "" {
		if cwd, err = os.Getwd(); err != nil {
			return nil, err
		}
	}
	if cwd, err = filepath.Abs(cwd); err != nil {
		return nil, &ConfigError{err}
	}
	if st, err := os.Stat(cwd); err != nil || !st.IsDir() {
		return nil, &ConfigError{fmt.Errorf("working directory %s is not a directory", cwd)}
	}

	id := o.ResumeID
	if o.Continue && id == "" {
		if id, err = a.latestSession(ctx, cwd); err != nil {
			return nil, err
		}
	}
	var log *session.Log
	if id != "" {
		h, events, err := a.Store.Load(ctx, id)
		if err != nil {
			return nil, fmt.Errorf("resume %s: %w", id, err)
		}
		if log, err = session.NewLog(h, events, a.Store); err != nil {
			return nil, err
		}
	} else {
		sid, err := uuid.NewV7()
		if err != nil {
			return nil, err
		}
		h := session.Header{Version: session.FormatVersion, ID: sid.String(), CreatedAt: time.Now().UnixMilli(), Cwd: cwd}
		if err := a.Store.Create(ctx, h); err != nil {
			return nil, err
		}
		if log, err = session.NewLog(h, nil, a.Store); err != nil {
			return nil, err
		}
	}

	reg := tool.NewRegistry()
	if err := reg.Register("", bash.New(bash.Options{})); err != nil {
		return nil, err
	}
	pipe := tool.NewPipeline(reg)
	system := strings.NewReplacer("{{cwd}}", log.Header().Cwd, "{{model}}", route.Provider+"/"+route.Model.ID).Replace(systemPrompt)
	ag, err := agent.New(agent.Config{
		Log:      log,
		Route:    agent.Route{Provider: route.Provider, Model: route.Model, Adapter: route.Adapter, Retry: llm.DefaultRetryPolicy(), Effort: effort, MaxTokens: a.Config.MaxTokens},
		Tools:    reg,
		Pipeline: pipe,
		System:   system,
	})
	if err != nil {
		return nil, err
	}
	return &Session{Agent: ag, Log: log, Route: route}, nil
}

// ErrNoSession is returned by --continue when no session matches.
var ErrNoSession = errors.New("no session to continue in this directory")

func (a *App) latestSession(ctx context.Context, cwd string) (string, error) {
	entries, err := a.Store.List(ctx)
	if err != nil {
		return "", err
	}
	for _, e := range entries { // newest first
		if e.Err == nil && e.Header.Cwd == cwd && e.Header.ParentSession == "" {
			return e.Header.ID, nil
		}
	}
	return "", &ConfigError{ErrNoSession}
}
