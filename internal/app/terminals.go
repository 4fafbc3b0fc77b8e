package app

import (
	"time"

	"go.yaml.in/yaml/v4"

	"github.com/dsh-dev/dsh/internal/compose"
	"github.com/dsh-dev/dsh/internal/jobs"
	"github.com/dsh-dev/dsh/internal/prompt"
	termtools "github.com/dsh-dev/dsh/internal/tools/terminal"
)

// terminalsDef is the value of the "tool/terminal" module: the six
// terminal_* tools (persistent PTYs), offered in a session when its
// agent preset names them (none of the built-in presets does: they are
// opt-in).
type terminalsDef struct {
	Guidance string `yaml:"guidance,omitempty"`
	// MaxPerSession is how many running terminals a session may hold.
	MaxPerSession int `yaml:"max_per_session,omitempty"`
	// Scrollback is each terminal's output buffer in bytes.
	Scrollback int `yaml:"scrollback,omitempty"`
	// Wait is how long a send waits for its output to settle by default;
	// MaxWait the most a call may ask for.
	Wait    time.Duration `yaml:"wait,omitempty"`
	MaxWait time.Duration `yaml:"max_wait,omitempty"`
	// Quiet is how long output must pause before a send without its
	// prompt back counts as settled (doubled when the type has a prompt).
	Quiet time.Duration `yaml:"quiet,omitempty"`
	// ReadLimit is how many bytes a read or send returns by default.
	ReadLimit int `yaml:"read_limit,omitempty"`
	// NoBackground removes run_in_background from terminal_send.
	NoBackground bool `yaml:"no_background,omitempty"`
	// EnvPassthrough names secret-looking variables terminals may see.
	EnvPassthrough []string `yaml:"env_passthrough,omitempty"`
}

// DumpConfig implements compose.Dumper.
func (d terminalsDef) DumpConfig() any { return d }

func (d terminalsDef) apply(e *env) error {
	var reg *jobs.Registry
	if !d.NoBackground {
		reg = e.app.jobs.reg
	}
	defs := termtools.New(termtools.Options{
		Manager: e.app.terms, Confine: e.bashConfine(), Jobs: reg, EnvPassthrough: d.EnvPassthrough,
		Wait: d.Wait, MaxWait: d.MaxWait, Quiet: d.Quiet, ReadLimit: d.ReadLimit, MaxPerSession: d.MaxPerSession, Scrollback: d.Scrollback,
	})
	offered := false
	for _, def := range defs {
		if !e.tools[def.Name] {
			continue
		}
		if err := e.reg.Register("", def); err != nil {
			return err
		}
		offered = true
	}
	if offered && d.Guidance != "" {
		return e.prompt.Add(prompt.Section{Name: "tool:terminal", Order: 100, Text: d.Guidance, Literal: true})
	}
	return nil
}

func registerTerminalModules(must func(compose.Module)) {
	must(compose.Module{Name: "tool/terminal", Doc: "the terminal_* tools: persistent PTYs (opt-in: name them in an agent preset)", Decode: func(n *yaml.Node) (any, error) {
		return compose.Decode(n, terminalsDef{})
	}})
}
