// Package codex delegates tasks to OpenAI's Codex through `codex
// app-server` (JSON-RPC over stdio, Codex dialect): the provider behind the
// `subagent_codex` tool, the generic subagent provider "codex" and `dsh
// delegate codex`.
//
// A run spawns the app-server as a guarded process group (package proc),
// performs the initialize handshake, starts or resumes a thread (naming
// durable ones "DSH · <description>"), sends one turn with the prompt,
// images, reasoning effort and output schema, follows the turn's
// notifications to turn/completed and tears the group down. One deadline
// covers start-up, resume and the turn; a deadline, a caller's cancel, a
// protocol failure and an unexpected exit are distinct failure categories.
// The effective configuration the app-server reports on thread/start and
// thread/resume is compared with the request before the turn is sent.
// Usage is the delta from an observed baseline (see usageTracker).
package codex

import (
	"errors"
	"fmt"
	"os/exec"
	"sync"
	"time"

	"github.com/dsh-dev/dsh/internal/proc"
)

// Config configures a Provider.
type Config struct {
	// Command is the codex executable and leading arguments;
	// "app-server" is appended. Default ["codex"].
	Command []string
	// Env adds to DefaultEnv: Codex keeps its own configuration, so the
	// variables it needs pass through.
	Env proc.EnvPolicy
	// Dir overrides the working directory (validated by New); otherwise
	// the delegating session's cwd.
	Dir string
	// PermissionMode is the widest (and default) mode; default
	// workspace-write. danger-full-access must be configured explicitly.
	PermissionMode string
	// ThreadMode is the default thread mode; default ephemeral.
	ThreadMode string
	// Timeout bounds a whole run; 0 is DefaultTimeout unless NoTimeout.
	Timeout time.Duration
	// NoTimeout disables the default deadline.
	NoTimeout bool
	// ModelSelection offers model and reasoning_effort per call.
	ModelSelection bool
	// KillGrace is proc's TERM→KILL grace; 0 is proc's default.
	KillGrace time.Duration
	// ClientName is clientInfo.name (the originator); default "dsh".
	ClientName string
	// Version is clientInfo.version.
	Version string
}

// DefaultEnv is what passes through to the app-server besides proc.BaseEnv:
// Codex's own configuration and credentials, locale, proxies and
// certificates.
var DefaultEnv = []string{
	"HOME", "USER", "LOGNAME", "SHELL", "TERM", "LANG", "LC_*", "TMPDIR", "XDG_*", "TZ",
	"CODEX_*", "OPENAI_*", "AZURE_OPENAI_*", "RUST_LOG",
	"SSL_CERT_FILE", "SSL_CERT_DIR", "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "ALL_PROXY",
	"http_proxy", "https_proxy", "no_proxy", "all_proxy",
}

// Provider runs Codex delegations. It remembers one durable thread per dsh
// session for thread_mode session and which threads are in use.
type Provider struct {
	cfg Config
	env proc.EnvPolicy

	mu      sync.Mutex
	session map[string]string // session key → remembered thread id
	busy    map[string]bool   // thread ids used by a running delegation
	seq     int
}

// New validates cfg and returns a provider.
func New(cfg Config) (*Provider, error) {
	if len(cfg.Command) == 0 {
		cfg.Command = []string{"codex"}
	}
	if cfg.Command[0] == "" {
		return nil, errors.New("codex: command is empty")
	}
	if cfg.PermissionMode == "" {
		cfg.PermissionMode = ModeWorkspaceWrite
	}
	if _, ok := modeRank[cfg.PermissionMode]; !ok {
		return nil, fmt.Errorf("codex: unknown permission mode %q", cfg.PermissionMode)
	}
	if cfg.ThreadMode == "" {
		cfg.ThreadMode = ThreadEphemeral
	}
	switch cfg.ThreadMode {
	case ThreadEphemeral, ThreadPersistent, ThreadSession:
	default:
		return nil, fmt.Errorf("codex: unknown thread mode %q", cfg.ThreadMode)
	}
	if cfg.Timeout < 0 {
		return nil, fmt.Errorf("codex: negative timeout %v", cfg.Timeout)
	}
	if cfg.Timeout == 0 && !cfg.NoTimeout {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.ClientName == "" {
		cfg.ClientName = "dsh"
	}
	if cfg.Version == "" {
		cfg.Version = "0"
	}
	if cfg.Dir != "" {
		d, err := proc.ValidateOverride(cfg.Dir)
		if err != nil {
			return nil, fmt.Errorf("codex: dir: %w", err)
		}
		cfg.Dir = d
	}
	env := proc.EnvPolicy{Passthrough: append(append([]string(nil), DefaultEnv...), cfg.Env.Passthrough...), Set: cfg.Env.Set}
	if _, err := env.Build(nil); err != nil {
		return nil, fmt.Errorf("codex: env: %w", err)
	}
	cfg.Command = append([]string(nil), cfg.Command...)
	return &Provider{cfg: cfg, env: env, session: map[string]string{}, busy: map[string]bool{}}, nil
}

// Config returns the validated configuration.
func (p *Provider) Config() Config { return p.cfg }

// Available reports whether the configured command resolves.
func (p *Provider) Available() error {
	_, err := exec.LookPath(p.cfg.Command[0])
	return err
}

// Caller describes who delegates: the session's cwd (the default working
// directory) and the widest permission mode the session allows ("" = no
// cap beyond the configuration).
type Caller struct {
	Cwd     string
	MaxMode string
}

// maxMode is the configured mode capped by the caller's.
func (p *Provider) maxMode(c Caller) string {
	m := p.cfg.PermissionMode
	if r, ok := modeRank[c.MaxMode]; ok && r < modeRank[m] {
		m = c.MaxMode
	}
	return m
}

// claim marks a thread in use; false when another run holds it.
func (p *Provider) claim(id string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.busy[id] {
		return false
	}
	p.busy[id] = true
	return true
}

func (p *Provider) release(id string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.busy, id)
}

// remembered returns the session's thread, if any.
func (p *Provider) remembered(key string) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.session[key]
}

func (p *Provider) remember(key, id string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.session[key] = id
}

func (p *Provider) newRunID() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.seq++
	return fmt.Sprintf("codex-%d-%d", time.Now().UnixMilli(), p.seq)
}
