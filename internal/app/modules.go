package app

import (
	"errors"
	"fmt"
	"github.com/dsh-dev/dsh/internal/goal"
	"os"
	"path/filepath"
	"strings"
	"time"

	"go.yaml.in/yaml/v4"

	"github.com/dsh-dev/dsh/internal/agent"
	"github.com/dsh-dev/dsh/internal/compaction"
	"github.com/dsh-dev/dsh/internal/compose"
	"github.com/dsh-dev/dsh/internal/jobs"
	"github.com/dsh-dev/dsh/internal/llm"
	"github.com/dsh-dev/dsh/internal/permission"
	"github.com/dsh-dev/dsh/internal/prompt"
	"github.com/dsh-dev/dsh/internal/provider"
	"github.com/dsh-dev/dsh/internal/sandbox"
	"github.com/dsh-dev/dsh/internal/session"
	"github.com/dsh-dev/dsh/internal/skills"
	"github.com/dsh-dev/dsh/internal/subagent"
	"github.com/dsh-dev/dsh/internal/tool"
	"github.com/dsh-dev/dsh/internal/tools/bash"
	"github.com/dsh-dev/dsh/internal/tools/fs"
	"github.com/dsh-dev/dsh/internal/tools/question"
	"github.com/dsh-dev/dsh/internal/web"
)

// The built-in profile is base.yaml; builtinRows (base_rows.go) is its
// rows as Go values, so that no start parses it.
//go:generate go run ./genbase base.yaml base_rows.go

// env is what a module applies to when a session is wired.
type env struct {
	// restrict are the session's restrictions (permission/restrictions).
	restrict  permission.Restrictions
	home, cwd string
	preset    string
	log       *session.Log
	route     provider.Resolved
	reg       *tool.Registry
	pipe      *tool.Pipeline
	prompt    *prompt.Assembler
	runtime   *prompt.Runtime
	hooks     *agent.Hooks
	// inject forwards to the agent's Inject once the agent exists.
	inject func(llm.Message) error
	// tools is the preset's tool allow-list.
	tools map[string]bool
	// compactor is set by the compaction module.
	compactor *compaction.Compactor
	// skills is the skill discovery configuration (the skills module).
	skills skills.Options
	// tracker records which files this session read (read-before-write).
	tracker *fs.Tracker
	// app is the opened application (catalog, sandboxes).
	app *App
	// human answers approval asks (nil when no terminal is attached).
	human permission.Answerer
	// asker answers the question tools (nil: nobody can).
	asker question.Asker
	// plan is the session's plan mode (the plan-mode module).
	plan *question.Mode
	// permPreset and approval are the --permission / --approval choices.
	permPreset, approval string
	// perm is the permission layer (the permissions module).
	perm *permission.Session
	// sandbox is the session's sandbox (its server, started at the
	// first confined command); Session.Close ends it.
	sandbox *sandbox.Session
	// web is the web runtime (the web module).
	web *web.Runtime
	// declined lists preset tools whose rows declined (unavailable here).
	declined map[string]bool
	// permDefault is the permissions row's default preset.
	permDefault string
	// subagents is the delegation service (the subagents module).
	subagents      *subagent.Service
	modelSelection bool
	subagentMode   string
	// warn reports a non-fatal problem to the user.
	warn func(format string, args ...any)
	// steer and cancelTurn reach the agent once it exists (user hooks).
	steer      func(llm.Message) error
	cancelTurn func()
	// compactHooks are the user PreCompact/PostCompact hooks (nil: none).
	compactHooks *compaction.Hooks
	// effort is the session's reasoning effort ("" = the model's default).
	effort string
	// pendingContext is hook context (SessionStart) injected into the
	// first step once the agent exists.
	pendingContext []string
	// titler makes the session-title call (the session-title module).
	titler *titler
	// bashMode is the preset's bash implementation ("persistent" or
	// oneshot).
	bashMode string
	// closers stop what rows started for the session (persistent shells,
	// language servers); they run when it closes, or when its wiring
	// fails.
	closers []func()
	// goals is the session's goal keeper (every session has one).
	goals *goal.Keeper
}

// plugin is a decoded module row that wires something into a session.
type plugin interface {
	apply(e *env) error
}

// toolPlugin registers one tool when the preset allows it, plus its
// guidance section.
type toolPlugin struct {
	def      func(e *env) (tool.Definition, error)
	name     string
	guidance string
	config   any // the decoded configuration, for dsh config dump
}

// DumpConfig implements compose.Dumper.
func (p toolPlugin) DumpConfig() any { return p.config }

func (p toolPlugin) apply(e *env) error {
	if !e.tools[p.name] {
		return nil
	}
	def, err := p.def(e)
	if errors.Is(err, errUnavailable) {
		e.declined[p.name] = true
		return nil
	}
	if err != nil {
		return fmt.Errorf("tool %s: %w", p.name, err)
	}
	if err := e.reg.Register("", def); err != nil {
		return err
	}
	if strings.TrimSpace(p.guidance) != "" {
		return e.prompt.Add(prompt.Section{Name: "tool:" + p.name, Order: 100, Text: p.guidance, Literal: true})
	}
	return nil
}

// modelDefaults is the value of the "model" module.
type modelDefaults struct {
	Default   string `yaml:"default"`
	Effort    string `yaml:"effort,omitempty"`
	MaxTokens int    `yaml:"max_tokens,omitempty"`
}

// presetDef is the value of an "agent-preset" row.
type presetDef struct {
	Name  string   `yaml:"name"`
	Tools []string `yaml:"tools"`
	// Bash selects the bash tool's implementation: "oneshot" (the
	// default: a fresh shell per command) or "persistent" (one shell per
	// session, so cd and variables carry over).
	Bash string `yaml:"bash,omitempty"`
}

// sectionDef is the value of a "prompt/section" row.
type sectionDef struct {
	Name     string   `yaml:"name"`
	Order    int      `yaml:"order,omitempty"`
	Text     string   `yaml:"text,omitempty"`
	File     string   `yaml:"file,omitempty"`
	Literal  bool     `yaml:"literal,omitempty"`
	Complete bool     `yaml:"complete,omitempty"`
	Presets  []string `yaml:"presets,omitempty"`
}

func (s sectionDef) apply(e *env) error {
	if len(s.Presets) > 0 {
		found := false
		for _, p := range s.Presets {
			found = found || p == e.preset
		}
		if !found {
			return nil
		}
	}
	text := s.Text
	if s.File != "" {
		b, err := os.ReadFile(s.File)
		if err != nil {
			return fmt.Errorf("prompt section %s: %w", s.Name, err)
		}
		text = string(b)
	}
	scope := ""
	if len(s.Presets) > 0 {
		scope = e.preset
	}
	return e.prompt.Add(prompt.Section{Name: s.Name, Order: s.Order, Text: text, Literal: s.Literal, Complete: s.Complete, Scope: scope})
}

// spillDef is the value of the "spill" module.
type spillDef struct {
	Threshold int    `yaml:"threshold"`
	Dir       string `yaml:"dir,omitempty"`
}

func (s spillDef) apply(e *env) error {
	dir := s.Dir
	if dir == "" {
		dir = filepath.Join(e.home, "spill")
	}
	e.pipe.UsePostExecute(tool.Spill(dir, s.Threshold))
	return nil
}

// runtimeDef is the value of the "runtime-context" module: what changing
// context reaches the model as a logged snapshot.
type runtimeDef struct {
	// Time adds the current date (off by default: it changes daily).
	Time bool `yaml:"time,omitempty"`
	// Git adds the current branch of the workspace repository.
	Git bool `yaml:"git"`
}

func (r runtimeDef) apply(e *env) error {
	if r.Git {
		cwd := e.cwd
		e.runtime.Add(prompt.RuntimeSection{Name: "workspace:git", Order: 10, Render: func() string {
			if b := gitBranch(cwd); b != "" {
				return "Git branch of the workspace: " + b
			}
			return ""
		}})
	}
	if r.Time {
		e.runtime.Add(prompt.RuntimeSection{Name: "time", Order: 90, Render: func() string {
			return "Today's date: " + time.Now().Format("2006-01-02")
		}})
	}
	return nil
}

// gitBranch reads the branch from .git/HEAD of the nearest repository.
func gitBranch(dir string) string {
	for d := dir; ; d = filepath.Dir(d) {
		b, err := os.ReadFile(filepath.Join(d, ".git", "HEAD"))
		if err == nil {
			s := strings.TrimSpace(string(b))
			if ref, ok := strings.CutPrefix(s, "ref: refs/heads/"); ok {
				return ref
			}
			if len(s) >= 12 {
				return "detached at " + s[:12]
			}
			return ""
		}
		if filepath.Dir(d) == d {
			return ""
		}
	}
}

// toolModule builds a tool module whose config is T (decoded strictly
// over defaults) plus an optional guidance text.
func toolModule[T any](module, name string, defaults T, build func(e *env, cfg T) (tool.Definition, error)) compose.Module {
	return compose.Module{
		Name: module,
		Doc:  "the " + name + " tool",
		Decode: func(n *yaml.Node) (any, error) {
			var wrapper struct {
				Guidance string `yaml:"guidance,omitempty"`
				Options  T      `yaml:",inline"`
			}
			wrapper.Options = defaults
			w, err := compose.Decode(n, wrapper)
			if err != nil {
				return nil, err
			}
			return toolPlugin{name: name, guidance: w.Guidance, config: w, def: func(e *env) (tool.Definition, error) {
				return build(e, w.Options)
			}}, nil
		},
	}
}

// bashConfig is the user-facing configuration of the bash tool.
type bashConfig struct {
	OutputLimit    int           `yaml:"output_limit,omitempty"`
	DefaultTimeout time.Duration `yaml:"default_timeout,omitempty"`
	MaxTimeout     time.Duration `yaml:"max_timeout,omitempty"`
	Shell          string        `yaml:"shell,omitempty"`
	// NoBackground removes run_in_background (background jobs).
	NoBackground bool `yaml:"no_background,omitempty"`
	// EnvPassthrough names secret-looking variables commands may see.
	EnvPassthrough []string `yaml:"env_passthrough,omitempty"`
}

// modules returns every module this build knows.
func modules() *compose.Registry {
	r := compose.NewRegistry()
	must := func(m compose.Module) {
		if err := r.Register(m); err != nil {
			panic(err) // a programming error in this list, caught by tests
		}
	}
	must(compose.Module{Name: "model", Doc: "default model, effort and output cap", Decode: func(n *yaml.Node) (any, error) {
		v, err := compose.Decode(n, modelDefaults{Default: provider.DefaultModel})
		if err == nil {
			_, err = llm.ParseEffort(v.Effort)
		}
		return v, err
	}})
	must(compose.Module{Name: "agent-preset", Doc: "a named tool set", Decode: func(n *yaml.Node) (any, error) {
		v, err := compose.Decode(n, presetDef{})
		if err == nil && v.Name == "" {
			err = fmt.Errorf("an agent preset needs a name")
		}
		if err == nil && v.Bash != "" && v.Bash != "oneshot" && v.Bash != "persistent" {
			err = fmt.Errorf("agent preset %s: bash must be oneshot or persistent", v.Name)
		}
		return v, err
	}})
	must(compose.Module{Name: "prompt/section", Doc: "a system prompt section", Decode: func(n *yaml.Node) (any, error) {
		v, err := compose.Decode(n, sectionDef{})
		if err == nil && v.Name == "" {
			err = fmt.Errorf("a prompt section needs a name")
		}
		if err == nil && v.Text == "" && v.File == "" {
			err = fmt.Errorf("prompt section %s needs text or file", v.Name)
		}
		return v, err
	}})
	must(compose.Module{Name: "spill", Doc: "spill oversized tool results to files", Decode: func(n *yaml.Node) (any, error) {
		return compose.Decode(n, spillDef{Threshold: tool.DefaultSpillThreshold})
	}})
	must(compose.Module{Name: "tool-timeouts", Doc: "time limits on tool calls", Decode: decodeTimeouts})
	must(compose.Module{Name: "runtime-context", Doc: "changing context as a logged snapshot", Decode: func(n *yaml.Node) (any, error) {
		return compose.Decode(n, runtimeDef{Git: true})
	}})
	must(toolModule("tool/bash", "bash", bashConfig{}, func(e *env, c bashConfig) (tool.Definition, error) {
		var reg *jobs.Registry
		if !c.NoBackground {
			reg = e.app.jobs.reg
		}
		o := bash.Options{OutputLimit: c.OutputLimit, DefaultTimeout: c.DefaultTimeout, MaxTimeout: c.MaxTimeout, Shell: c.Shell, Confine: e.bashConfine(), Jobs: reg, EnvPassthrough: c.EnvPassthrough}
		if e.restrict.StrictEnv {
			o.EnvAllow = bash.StrictEnv
		}
		if e.bashMode == "persistent" {
			def, closer := bash.NewPersistent(o)
			e.closers = append(e.closers, func() { _ = closer.Close() })
			return def, nil
		}
		return bash.New(o), nil
	}))
	registerTitleModule(must)
	registerToolModules(must)
	registerQuestionModules(must)
	registerSessionQueryModules(must)
	registerPermissionModules(must)
	registerSubagentModules(must)
	registerGoalModules(must)
	registerACPModules(must)
	registerCodexModules(must)
	registerClaudeModules(must)
	registerMCPModules(must)
	registerTerminalModules(must)
	registerLSPModules(must)
	return r
}
