package mcp

import (
	"fmt"
	"net/url"
	"os"
	"path"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"
)

// Defaults of a server configuration.
const (
	DefaultToolTimeout    = 60 * time.Second
	DefaultStartupTimeout = 30 * time.Second
)

// Approval policies of a server.
const (
	// ApprovalAsk makes every call of the server's tools ask (the
	// default): a server is code dsh does not confine.
	ApprovalAsk = "ask"
	// ApprovalAuto trusts the server: its calls run without asking
	// (except under the read-only preset), and are logged like any call.
	ApprovalAuto = "auto"
)

// Transports.
const (
	TransportStdio = "stdio"
	TransportHTTP  = "http"
)

// ServerConfig is one MCP server as the profile or config.yaml names it.
type ServerConfig struct {
	// Name is [A-Za-z0-9_-]{1,32} without "__" and not ending in "_",
	// unique; it is part of the tool names.
	Name string `yaml:"name" json:"name"`
	// Command, Args, Env and Cwd start a stdio server. The child gets a
	// scrubbed environment (proc.BaseEnv) plus Env and the variables
	// named in EnvPassthrough; values in Env may reference dsh's
	// environment as ${NAME}, which is how a secret is handed over on
	// purpose rather than by accident.
	Command        string            `yaml:"command,omitempty" json:"command,omitempty"`
	Args           []string          `yaml:"args,omitempty" json:"args,omitempty"`
	Env            map[string]string `yaml:"env,omitempty" json:"env,omitempty"`
	EnvPassthrough []string          `yaml:"env_passthrough,omitempty" json:"envPassthrough,omitempty"`
	Cwd            string            `yaml:"cwd,omitempty" json:"cwd,omitempty"`
	// URL and Headers reach a streamable HTTP server; header values may
	// reference dsh's environment as ${NAME}.
	URL     string            `yaml:"url,omitempty" json:"url,omitempty"`
	Headers map[string]string `yaml:"headers,omitempty" json:"headers,omitempty"`
	// Approval is ask (default) or auto.
	Approval string `yaml:"approval,omitempty" json:"approval,omitempty"`
	// Tools filters the server's tools by raw name (glob patterns).
	Tools ToolFilter `yaml:"tools,omitempty" json:"tools,omitzero"`
	// ToolTimeout bounds one call (default 60 s); StartupTimeout bounds
	// start-up, handshake and the first tool listing (default 30 s).
	ToolTimeout    time.Duration `yaml:"tool_timeout,omitempty" json:"toolTimeout,omitempty"`
	StartupTimeout time.Duration `yaml:"startup_timeout,omitempty" json:"startupTimeout,omitempty"`
	// Required makes a server that fails to start fail the run instead
	// of being skipped with a warning.
	Required bool `yaml:"required,omitempty" json:"required,omitempty"`
	// Disabled keeps the row without starting the server.
	Disabled bool `yaml:"disabled,omitempty" json:"disabled,omitempty"`

	// Source says where the configuration came from (a file, a profile
	// row, "session"), for dsh mcp list.
	Source string `yaml:"-" json:"source,omitempty"`
}

// ToolFilter selects tools by raw name: a tool is offered when it
// matches an Allow pattern (or Allow is empty) and no Deny pattern.
type ToolFilter struct {
	Allow []string `yaml:"allow,omitempty" json:"allow,omitempty"`
	Deny  []string `yaml:"deny,omitempty" json:"deny,omitempty"`
}

// Match reports whether the raw tool name passes the filter.
func (f ToolFilter) Match(name string) bool {
	for _, p := range f.Deny {
		if ok, _ := path.Match(p, name); ok {
			return false
		}
	}
	if len(f.Allow) == 0 {
		return true
	}
	for _, p := range f.Allow {
		if ok, _ := path.Match(p, name); ok {
			return true
		}
	}
	return false
}

var serverName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9_-]{1,32}$`) })

// Transport is the server's transport, derived from which keys are set.
func (c ServerConfig) Transport() string {
	if c.URL != "" {
		return TransportHTTP
	}
	return TransportStdio
}

// WithDefaults fills the zero fields with their defaults.
func (c ServerConfig) WithDefaults() ServerConfig {
	if c.Approval == "" {
		c.Approval = ApprovalAsk
	}
	if c.ToolTimeout <= 0 {
		c.ToolTimeout = DefaultToolTimeout
	}
	if c.StartupTimeout <= 0 {
		c.StartupTimeout = DefaultStartupTimeout
	}
	return c
}

// Validate checks one server's configuration.
func (c ServerConfig) Validate() error {
	if !serverName().MatchString(c.Name) {
		return fmt.Errorf("mcp server name %q must be 1 to 32 letters, digits, _ or -", c.Name)
	}
	// Tools are named mcp__<server>__<tool>: a server name with "__" in it
	// or a trailing "_" blurs where it ends, so two servers' tools could
	// take one name (server a's tool b__c and server a__b's tool c).
	if strings.Contains(c.Name, "__") || strings.HasSuffix(c.Name, "_") {
		return fmt.Errorf(`mcp server name %q must not contain "__" or end with "_": its tools are named mcp__%s__TOOL, and another server's tools could then take the same names`, c.Name, c.Name)
	}
	switch {
	case c.Command != "" && c.URL != "":
		return fmt.Errorf("mcp server %s: set either command (stdio) or url (streamable HTTP), not both", c.Name)
	case c.Command == "" && c.URL == "":
		return fmt.Errorf("mcp server %s: needs command (stdio) or url (streamable HTTP)", c.Name)
	case c.URL != "":
		u, err := url.Parse(c.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("mcp server %s: url %q must be an http or https URL", c.Name, c.URL)
		}
		if len(c.Args) > 0 || len(c.Env) > 0 || len(c.EnvPassthrough) > 0 || c.Cwd != "" {
			return fmt.Errorf("mcp server %s: args, env, env_passthrough and cwd apply to stdio servers (command), not url", c.Name)
		}
	default:
		if len(c.Headers) > 0 {
			return fmt.Errorf("mcp server %s: headers apply to streamable HTTP servers (url), not command", c.Name)
		}
	}
	switch c.Approval {
	case "", ApprovalAsk, ApprovalAuto:
	default:
		return fmt.Errorf("mcp server %s: approval must be ask or auto, not %q", c.Name, c.Approval)
	}
	for _, p := range slices.Concat(c.Tools.Allow, c.Tools.Deny) {
		if _, err := path.Match(p, ""); err != nil {
			return fmt.Errorf("mcp server %s: tool pattern %q: %w", c.Name, p, err)
		}
	}
	if c.ToolTimeout < 0 || c.StartupTimeout < 0 {
		return fmt.Errorf("mcp server %s: timeouts must be positive", c.Name)
	}
	for k := range c.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return fmt.Errorf("mcp server %s: invalid environment variable name %q", c.Name, k)
		}
	}
	return nil
}

// ValidateSet checks every server and that names are unique.
func ValidateSet(cfgs []ServerConfig) error {
	seen := map[string]bool{}
	for _, c := range cfgs {
		if err := c.Validate(); err != nil {
			return err
		}
		if seen[c.Name] {
			return fmt.Errorf("mcp server name %q is used twice", c.Name)
		}
		seen[c.Name] = true
	}
	return nil
}

var envRef = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}`) })

// expand replaces ${NAME} references with dsh's environment (only the
// braced form, so a literal "$" in a value stays as written). A variable
// that is not set is an error: a header or variable silently sent empty
// is a confusing authentication failure later.
func expand(s string) (string, error) {
	var missing []string
	out := envRef().ReplaceAllStringFunc(s, func(ref string) string {
		name := ref[2 : len(ref)-1]
		v, ok := os.LookupEnv(name)
		if !ok {
			missing = append(missing, name)
		}
		return v
	})
	if len(missing) > 0 {
		return "", fmt.Errorf("environment variable %s is not set", strings.Join(missing, ", "))
	}
	return out, nil
}
