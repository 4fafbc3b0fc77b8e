package app

import (
	"context"
	"time"

	"go.yaml.in/yaml/v4"

	"github.com/dsh-dev/dsh/internal/agent"
	"github.com/dsh-dev/dsh/internal/compaction"
	"github.com/dsh-dev/dsh/internal/compose"
	"github.com/dsh-dev/dsh/internal/instructions"
	"github.com/dsh-dev/dsh/internal/llm"
	"github.com/dsh-dev/dsh/internal/skills"
	"github.com/dsh-dev/dsh/internal/tool"
	"github.com/dsh-dev/dsh/internal/tools/fs"
	jobtools "github.com/dsh-dev/dsh/internal/tools/jobs"
	"github.com/dsh-dev/dsh/internal/tools/search"
	"github.com/dsh-dev/dsh/internal/tools/strreplace"
	"github.com/dsh-dev/dsh/internal/tools/todo"
)

// compactionDef is the value of the "compaction" module.
type compactionDef struct {
	Options compaction.Options `yaml:",inline"`
}

func (c compactionDef) compactor(e *env) *compaction.Compactor {
	o := c.Options
	o.Log, o.Adapter, o.Provider, o.Model = e.log, e.route.Adapter, e.route.Provider, e.route.Model.ID
	if o.ContextWindow == 0 {
		o.ContextWindow = e.route.Model.ContextWindow
	}
	o.Hooks = e.compactHooks
	return compaction.New(o)
}

func (c compactionDef) apply(e *env) error {
	cp := c.compactor(e)
	e.compactor = cp
	// Compaction runs first so that later pre-step hooks (instructions,
	// runtime context) see the compacted history.
	e.hooks.PreStep = append([]func(context.Context, agent.PreStep) ([]llm.Message, bool, error){cp.PreStep}, e.hooks.PreStep...)
	e.hooks.RequestError = append(e.hooks.RequestError, cp.RequestError)
	return nil
}

// instructionsDef is the value of the "instructions" module.
type instructionsDef struct {
	Options instructions.Options `yaml:",inline"`
}

func (d instructionsDef) apply(e *env) error {
	o := d.Options
	o.Home, o.Log, o.Cwd, o.Inject = e.home, e.log, e.cwd, e.inject
	o.OnError = func(err error) { e.warn("instructions: %v", err) }
	inj := instructions.New(o)
	e.hooks.PreStep = append(e.hooks.PreStep, inj.PreStep)
	e.pipe.Observe(inj.Observe)
	return nil
}

// skillsDef is the value of the "skills" module: the catalog reminder.
// The skill tool itself is the "tool/skill" module.
type skillsDef struct {
	Options skills.Options `yaml:",inline"`
}

func (d skillsDef) apply(e *env) error {
	o := d.Options
	o.Home = e.home
	r := skills.NewReminder(skills.ReminderOptions{Options: o, Log: e.log, Cwd: e.cwd})
	e.hooks.PreStep = append(e.hooks.PreStep, r.PreStep)
	e.skills = o
	return nil
}

// fsConfig is the user-facing configuration of the file tools.
type fsConfig struct {
	MaxLines      int `yaml:"max_lines,omitempty"`
	MaxLineChars  int `yaml:"max_line_chars,omitempty"`
	MaxReadBytes  int `yaml:"max_read_bytes,omitempty"`
	MaxEditBytes  int `yaml:"max_edit_bytes,omitempty"`
	MaxImageSide  int `yaml:"max_image_side,omitempty"`
	MaxImageBytes int `yaml:"max_image_bytes,omitempty"`
}

func (c fsConfig) options(e *env) fs.Options {
	images := e.route.Model.Images
	return fs.Options{
		Tracker: e.tracker, MaxLines: c.MaxLines, MaxLineChars: c.MaxLineChars, MaxReadBytes: c.MaxReadBytes,
		MaxEditBytes: c.MaxEditBytes, MaxImageSide: c.MaxImageSide, MaxImageBytes: c.MaxImageBytes,
		Images: func(*tool.Call) bool { return images },
		Policy: e.filePolicy(),
	}
}

// searchConfig is the user-facing configuration of glob and grep.
type searchConfig struct {
	Ripgrep       string        `yaml:"ripgrep,omitempty"`
	NoRipgrep     bool          `yaml:"no_ripgrep,omitempty"`
	GlobLimit     int           `yaml:"glob_limit,omitempty"`
	LineLimit     int           `yaml:"line_limit,omitempty"`
	FileLimit     int           `yaml:"file_limit,omitempty"`
	MaxLineLength int           `yaml:"max_line_length,omitempty"`
	MaxFileSize   int64         `yaml:"max_file_size,omitempty"`
	Timeout       time.Duration `yaml:"timeout,omitempty"`
}

// registerToolModules registers the modules of the file, search, todo and
// skill tools and of the session policies built on the log.
func registerToolModules(must func(compose.Module)) {
	fsTool := func(module, name string, build func(fs.Options) tool.Definition) {
		must(toolModule(module, name, fsConfig{}, func(e *env, c fsConfig) (tool.Definition, error) {
			return build(c.options(e)), nil
		}))
	}
	fsTool("tool/read", fs.NameRead, fs.NewRead)
	fsTool("tool/write", fs.NameWrite, fs.NewWrite)
	fsTool("tool/edit", fs.NameEdit, fs.NewEdit)
	fsTool("tool/read_image", fs.NameReadImage, fs.NewReadImage)
	must(toolModule("tool/str_replace_based_edit_tool", strreplace.Name, strreplace.Options{}, func(e *env, o strreplace.Options) (tool.Definition, error) {
		o.Tracker = e.tracker
		o.Policy = e.filePolicy()
		return strreplace.New(o), nil
	}))
	searchTool := func(module, name string, build func(search.Options) tool.Definition) {
		must(toolModule(module, name, searchConfig{}, func(e *env, c searchConfig) (tool.Definition, error) {
			return build(search.Options{
				Ripgrep: c.Ripgrep, NoRipgrep: c.NoRipgrep, GlobLimit: c.GlobLimit, LineLimit: c.LineLimit,
				FileLimit: c.FileLimit, MaxLineLength: c.MaxLineLength, MaxFileSize: c.MaxFileSize, Timeout: c.Timeout,
				Policy: e.filePolicy(),
			}), nil
		}))
	}
	searchTool("tool/glob", search.GlobName, search.NewGlob)
	searchTool("tool/grep", search.GrepName, search.NewGrep)
	must(toolModule("tool/job_output", jobtools.OutputName, struct{}{}, func(e *env, _ struct{}) (tool.Definition, error) {
		return jobtools.OutputTool(jobtools.Options{Jobs: e.app.jobs.reg}), nil
	}))
	must(toolModule("tool/job_list", jobtools.ListName, struct{}{}, func(e *env, _ struct{}) (tool.Definition, error) {
		return jobtools.ListTool(jobtools.Options{Jobs: e.app.jobs.reg}), nil
	}))
	must(toolModule("tool/job_kill", jobtools.KillName, struct{}{}, func(e *env, _ struct{}) (tool.Definition, error) {
		return jobtools.KillTool(jobtools.Options{Jobs: e.app.jobs.reg}), nil
	}))
	must(compose.Module{Name: "instructions", Doc: "AGENTS.md / CLAUDE.md injection", Decode: func(n *yaml.Node) (any, error) {
		return compose.Decode(n, instructionsDef{})
	}})
	must(compose.Module{Name: "skills", Doc: "skill discovery and catalog reminder", Decode: func(n *yaml.Node) (any, error) {
		return compose.Decode(n, skillsDef{})
	}})
	must(toolModule("tool/skill", "skill", struct{}{}, func(e *env, _ struct{}) (tool.Definition, error) {
		o := e.skills
		o.Home = e.home
		return skills.New(o), nil
	}))
	must(toolModule("tool/todo_write", "todo_write", todo.Options{}, func(_ *env, o todo.Options) (tool.Definition, error) {
		return todo.New(o), nil
	}))
	must(compose.Module{Name: "compaction", Doc: "automatic and manual compaction of long sessions", Decode: func(n *yaml.Node) (any, error) {
		return compose.Decode(n, compactionDef{})
	}})
}
