package app

import (
	"fmt"
	"time"

	"go.yaml.in/yaml/v4"

	"github.com/dsh-dev/dsh/internal/compose"
)

// timeoutsDef is the value of the "tool-timeouts" module: the tool
// pipeline's time limits. Every call runs under one; a tool that declares
// none gets Default (tool.DefaultTimeout when unset), and Tools overrides
// the limit of named tools, declared or not.
type timeoutsDef struct {
	Default time.Duration            `yaml:"default,omitempty"`
	Tools   map[string]time.Duration `yaml:"tools,omitempty"`
}

func (d timeoutsDef) apply(e *env) error {
	e.pipe.SetDefaultTimeout(d.Default)
	for name, limit := range d.Tools {
		e.pipe.SetToolTimeout(name, limit)
	}
	return nil
}

func decodeTimeouts(n *yaml.Node) (any, error) {
	v, err := compose.Decode(n, timeoutsDef{})
	if err != nil {
		return v, err
	}
	if v.Default < 0 {
		return v, fmt.Errorf("tool-timeouts: default %v is negative", v.Default)
	}
	for name, limit := range v.Tools {
		if limit <= 0 {
			return v, fmt.Errorf("tool-timeouts: the limit of %s must be positive, not %v", name, limit)
		}
	}
	return v, nil
}
