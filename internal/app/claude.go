package app

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"go.yaml.in/yaml/v4"

	"github.com/dsh-dev/dsh/internal/compose"
	"github.com/dsh-dev/dsh/internal/proc"
	"github.com/dsh-dev/dsh/internal/subagent"
	"github.com/dsh-dev/dsh/internal/subagent/claudecode"
)

// claudeCodeDef is the value of a "claude-code" row: Claude Code's
// headless mode offered as the subagent provider "claude-code" and a
// delegation tool (one-shot, with run_in_background as a job). The row
// applies as a no-op when the command does not resolve (Claude Code is not
// installed) or when no subagents row set up the delegation service.
type claudeCodeDef struct {
	// Command is the Claude Code executable, looked up in PATH when it
	// has no slash.
	Command string `yaml:"command"`
	// Model is passed as --model unless a delegation names one ("" is
	// Claude Code's own default).
	Model string `yaml:"model,omitempty"`
	// Dir overrides Claude's working directory (default: the delegating
	// session's cwd).
	Dir     string        `yaml:"dir,omitempty"`
	Timeout time.Duration `yaml:"timeout,omitempty"`
	// EnvPassthrough names (or NAME_* prefixes of) further variables
	// Claude may see, beyond claudecode.DefaultPassthrough.
	EnvPassthrough []string          `yaml:"env_passthrough,omitempty"`
	Env            map[string]string `yaml:"env,omitempty"`
	// Tool is the delegation tool's name.
	Tool string `yaml:"tool"`
}

// claudeCodeTool is the default delegation tool name.
const claudeCodeTool = "subagent_claude"

func decodeClaudeCode(n *yaml.Node) (any, error) {
	d, err := compose.Decode(n, claudeCodeDef{Command: claudecode.DefaultCommand, Tool: claudeCodeTool})
	if err != nil {
		return nil, err
	}
	if strings.TrimSpace(d.Command) == "" {
		return nil, fmt.Errorf("command must not be empty")
	}
	if strings.TrimSpace(d.Tool) == "" {
		return nil, fmt.Errorf("tool must not be empty")
	}
	// Validate now (dir, env, timeout) so a bad row fails at start-up,
	// naming the row, whether or not Claude Code is installed.
	if _, err := d.provider(d.Command); err != nil {
		return nil, err
	}
	return d, nil
}

func (d claudeCodeDef) provider(command string) (*claudecode.Provider, error) {
	return claudecode.New(claudecode.Options{
		Command: command, Model: d.Model, Dir: d.Dir, Timeout: d.Timeout,
		Env: proc.EnvPolicy{Passthrough: d.EnvPassthrough, Set: d.Env},
	})
}

func (d claudeCodeDef) apply(e *env) error {
	if e.subagents == nil {
		return nil
	}
	path, err := exec.LookPath(d.Command)
	if err != nil {
		return nil // Claude Code is not installed here: nothing to offer
	}
	if abs, err := filepath.Abs(path); err == nil {
		path = abs
	}
	name := claudecode.DefaultName
	if _, ok := e.subagents.Provider(name); !ok {
		p, err := d.provider(path)
		if err != nil {
			return err
		}
		// The service is process-wide: a session wired concurrently may
		// have registered the same provider first, which is fine.
		if err := e.subagents.Register(p); err != nil {
			if _, ok := e.subagents.Provider(name); !ok {
				return fmt.Errorf("claude-code: %w", err)
			}
		}
	}
	def, err := subagent.NewTool(subagent.ToolOptions{
		Service: e.subagents, Provider: name, Name: d.Tool,
		ResolveLog: e.app.live.resolve, Jobs: e.app.jobs.reg,
	})
	if err != nil {
		return fmt.Errorf("claude-code: %w", err)
	}
	return e.reg.Register("", def)
}

func registerClaudeModules(must func(compose.Module)) {
	must(compose.Module{Name: "claude-code", Doc: "Claude Code (headless) as a subagent, when installed", Decode: decodeClaudeCode})
}

// ClaudeStatus says whether comp's claude-code row can run, for dsh
// doctor: the resolved executable, or why not and the fix.
func ClaudeStatus(comp *compose.Composition) (string, error) {
	for _, en := range comp.Entries {
		d, ok := en.Value.(claudeCodeDef)
		if !ok {
			continue
		}
		path, err := exec.LookPath(d.Command)
		if err != nil {
			return "", fmt.Errorf("%s not found on PATH; install it with: npm install -g @anthropic-ai/claude-code (or set command in the claude-code row)", d.Command)
		}
		return path, nil
	}
	return "", fmt.Errorf("the claude-code row is absent or disabled in the profile")
}
