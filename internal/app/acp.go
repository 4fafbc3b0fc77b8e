package app

import (
	"fmt"
	"os/exec"
	"regexp"
	"sync"
	"time"

	"go.yaml.in/yaml/v4"

	"github.com/dsh-dev/dsh/internal/compose"
	"github.com/dsh-dev/dsh/internal/proc"
	"github.com/dsh-dev/dsh/internal/subagent"
	"github.com/dsh-dev/dsh/internal/subagent/acpclient"
)

// acpAgentDef is the value of an "acp-agent" row: an Agent Client
// Protocol agent offered as a subagent provider and a delegation tool.
type acpAgentDef struct {
	Name    string   `yaml:"name"`
	Command []string `yaml:"command"`
	// EnvPassthrough names (or NAME_* prefixes of) variables the agent
	// may see; its environment starts empty otherwise.
	EnvPassthrough []string          `yaml:"env_passthrough,omitempty"`
	Env            map[string]string `yaml:"env,omitempty"`
	// Dir overrides the agent's working directory (default: the
	// delegating session's cwd).
	Dir     string        `yaml:"dir,omitempty"`
	Timeout time.Duration `yaml:"timeout,omitempty"`
	// Tool is the delegation tool's name (default subagent_<name>).
	Tool string `yaml:"tool,omitempty"`
}

var acpName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,40}$`) })

func decodeACPAgent(n *yaml.Node) (any, error) {
	d, err := compose.Decode(n, acpAgentDef{})
	if err != nil {
		return nil, err
	}
	if !acpName().MatchString(d.Name) {
		return nil, fmt.Errorf("name %q must be lower-case letters, digits, - or _", d.Name)
	}
	if len(d.Command) == 0 {
		return nil, fmt.Errorf("command is required")
	}
	if d.Tool == "" {
		d.Tool = "subagent_" + d.Name
	}
	// Validate now so a bad row fails at start-up, naming the row.
	if _, err := d.provider(); err != nil {
		return nil, err
	}
	return d, nil
}

func (d acpAgentDef) provider() (*acpclient.Provider, error) {
	return acpclient.New(acpclient.Options{
		Name: "acp:" + d.Name, Command: d.Command, Dir: d.Dir, Timeout: d.Timeout,
		Env: proc.EnvPolicy{Passthrough: d.EnvPassthrough, Set: d.Env},
	})
}

func (d acpAgentDef) early() {}

func (d acpAgentDef) apply(e *env) error {
	if e.subagents == nil {
		return fmt.Errorf("acp-agent %s needs the subagents row", d.Name)
	}
	name := "acp:" + d.Name
	if _, ok := e.subagents.Provider(name); !ok {
		p, err := d.provider()
		if err != nil {
			return err
		}
		if err := e.subagents.Register(p); err != nil {
			return err
		}
	}
	def, err := subagent.NewTool(subagent.ToolOptions{Service: e.subagents, Provider: name, Name: d.Tool, ResolveLog: e.app.live.resolve})
	if err != nil {
		return err
	}
	return e.reg.Register("", def)
}

func registerACPModules(must func(compose.Module)) {
	must(compose.Module{Name: "acp-agent", Doc: "an Agent Client Protocol agent as a subagent", Decode: decodeACPAgent})
}

// AgentStatus is one configured external agent as dsh doctor reports it.
type AgentStatus struct {
	// Name is the provider name (e.g. "acp:codex").
	Name string
	// Path is the resolved executable when found.
	Path string
	// Err says why the agent cannot run, with the fix where known.
	Err error
}

// ACPAgentStatus resolves the command of every acp-agent row of comp.
func ACPAgentStatus(comp *compose.Composition) []AgentStatus {
	var out []AgentStatus
	for _, en := range comp.Entries {
		d, ok := en.Value.(acpAgentDef)
		if !ok {
			continue
		}
		st := AgentStatus{Name: "acp:" + d.Name}
		if path, err := exec.LookPath(d.Command[0]); err != nil {
			st.Err = fmt.Errorf("%s not found on PATH (row %s)", d.Command[0], en.ID)
		} else {
			st.Path = path
		}
		out = append(out, st)
	}
	return out
}
