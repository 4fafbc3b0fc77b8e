package app

import (
	"fmt"
	"os/exec"
	"sync"
	"time"

	"go.yaml.in/yaml/v4"

	"github.com/dsh-dev/dsh/internal/compose"
	"github.com/dsh-dev/dsh/internal/proc"
	"github.com/dsh-dev/dsh/internal/subagent/codex"
	"github.com/dsh-dev/dsh/internal/tool"
)

// codexDef is the value of the "codex" row: OpenAI Codex through `codex
// app-server`, offered as the subagent provider "codex" and the
// subagent_codex tool whenever the command resolves.
type codexDef struct {
	// Command is the codex executable and leading arguments (default
	// ["codex"], looked up on PATH).
	Command []string `yaml:"command,omitempty"`
	// EnvPassthrough and Env add to what Codex gets beyond
	// codex.DefaultEnv (its own configuration and credentials).
	EnvPassthrough []string          `yaml:"env_passthrough,omitempty"`
	Env            map[string]string `yaml:"env,omitempty"`
	Dir            string            `yaml:"dir,omitempty"`
	// PermissionMode is the widest and default mode (read-only,
	// workspace-write, danger-full-access).
	PermissionMode string `yaml:"permission_mode,omitempty"`
	ThreadMode     string `yaml:"thread_mode,omitempty"`
	// Timeout bounds a delegation; "0s" disables the default 10 minutes.
	Timeout *time.Duration `yaml:"timeout,omitempty"`
	// ModelSelection offers model and reasoning_effort per call.
	ModelSelection *bool  `yaml:"model_selection,omitempty"`
	Tool           string `yaml:"tool,omitempty"`
}

func decodeCodex(n *yaml.Node) (any, error) {
	d, err := compose.Decode(n, codexDef{})
	if err != nil {
		return nil, err
	}
	if _, err := d.config(); err != nil {
		return nil, err
	}
	return d, nil
}

func (d codexDef) config() (codex.Config, error) {
	cfg := codex.Config{
		Command: d.Command, Dir: d.Dir, PermissionMode: d.PermissionMode, ThreadMode: d.ThreadMode,
		Env: proc.EnvPolicy{Passthrough: d.EnvPassthrough, Set: d.Env}, ModelSelection: true, Version: Version,
	}
	if d.ModelSelection != nil {
		cfg.ModelSelection = *d.ModelSelection
	}
	if d.Timeout != nil {
		cfg.Timeout = *d.Timeout
		cfg.NoTimeout = *d.Timeout == 0
	}
	// Validate now so a bad row fails at start-up, naming the row.
	_, err := codex.New(cfg)
	return cfg, err
}

func (d codexDef) early() {}

// codexState is the app's one Codex provider: thread memory and busy
// threads are shared by every session of the process.
type codexState struct {
	once sync.Once
	p    *codex.Provider
	err  error
}

// CodexProvider returns the app's Codex provider built from the profile's
// codex row (errUnavailable when the row is absent or disabled).
func (a *App) CodexProvider() (*codex.Provider, error) {
	a.codex.once.Do(func() {
		a.codex.p, a.codex.err = NewCodexProvider(a.Composition)
	})
	return a.codex.p, a.codex.err
}

// NewCodexProvider builds a Codex provider from comp's codex row; the
// error wraps errUnavailable when the row is absent or disabled.
func NewCodexProvider(comp *compose.Composition) (*codex.Provider, error) {
	var def *codexDef
	for _, en := range comp.Entries {
		if d, ok := en.Value.(codexDef); ok {
			def = &d
		}
	}
	if def == nil {
		return nil, fmt.Errorf("the codex row is absent or disabled in the profile: %w", errUnavailable)
	}
	cfg, err := def.config()
	if err != nil {
		return nil, err
	}
	return codex.New(cfg)
}

func (d codexDef) apply(e *env) error {
	p, err := e.app.CodexProvider()
	if err != nil {
		return err
	}
	if p.Available() != nil {
		// Codex is optional: without the executable the row offers nothing
		// (dsh doctor says so).
		return nil
	}
	if e.subagents != nil {
		if _, ok := e.subagents.Provider(codex.ProviderName); !ok {
			// A session wired concurrently may have registered it first.
			if err := e.subagents.Register(codex.Subagent{P: p}); err != nil {
				if _, ok := e.subagents.Provider(codex.ProviderName); !ok {
					return err
				}
			}
		}
	}
	perm := e.perm
	def, err := codex.NewTool(codex.ToolOptions{
		Provider: p, Name: d.Tool, Jobs: e.app.jobs.reg, Images: e.route.Model.Images,
		MaxMode: func(*tool.Call) string {
			if perm == nil {
				return ""
			}
			return codex.MaxModeFor(perm.State().Mode)
		},
	})
	if err != nil {
		return err
	}
	return e.reg.Register("", def)
}

// CodexStatus says whether the codex integration of comp is usable, for
// dsh doctor: the resolved executable, or why not and the fix.
func CodexStatus(comp *compose.Composition) (string, error) {
	p, err := NewCodexProvider(comp)
	if err != nil {
		return "", err
	}
	path, err := exec.LookPath(p.Config().Command[0])
	if err != nil {
		return "", fmt.Errorf("%s not found on PATH; install it with: npm install -g @openai/codex (or set command in the codex row)", p.Config().Command[0])
	}
	return path, nil
}

func registerCodexModules(must func(compose.Module)) {
	must(compose.Module{Name: "codex", Doc: "OpenAI Codex (codex app-server) as a subagent and the subagent_codex tool", Decode: decodeCodex})
}
