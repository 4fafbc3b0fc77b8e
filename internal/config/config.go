// Package config loads dsh's user configuration from $DSH_HOME/config.yaml
// and resolves where state lives.
package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"time"

	"go.yaml.in/yaml/v4"

	"github.com/dsh-dev/dsh/internal/compose"
	"github.com/dsh-dev/dsh/internal/llm"
	"github.com/dsh-dev/dsh/internal/mcp"
)

// Config is the user configuration. Every field is optional.
type Config struct {
	// Model is the default "provider/model" for dsh run.
	Model string `yaml:"model"`
	// Effort is the default reasoning effort (off, low, high, max).
	Effort string `yaml:"effort"`
	// MaxTokens caps output tokens per model call (0 = model default).
	MaxTokens int `yaml:"max_tokens"`
	// Providers adds OpenAI-compatible (or Anthropic-compatible)
	// providers, or overrides a built-in one with the same id.
	Providers []Provider `yaml:"providers"`
	// Profile rows are applied over the built-in profile (see
	// internal/compose): a row with an existing id replaces it.
	Profile []compose.Row `yaml:"profile"`
	// MCPServers are Model Context Protocol servers whose tools the agent
	// may call; each is shorthand for an "mcp-server" profile row with id
	// "mcp.<name>".
	MCPServers []mcp.ServerConfig `yaml:"mcp_servers"`
	// Hooks configures user hooks beyond $DSH_HOME/hooks.json and the
	// project's .dsh/hooks.json.
	Hooks Hooks `yaml:"hooks"`
	// GitHub configures the review webhook of dsh serve --github-webhook.
	GitHub GitHub `yaml:"github"`
	// Serve sets dsh serve's connection limits.
	Serve Serve `yaml:"serve"`
}

// Serve is the serve section of config.yaml: the timeouts and connection
// caps of dsh serve's listeners. Zero (or absent) keeps the default.
type Serve struct {
	// ReadHeaderTimeout bounds reading a request's headers (10s).
	ReadHeaderTimeout time.Duration `yaml:"read_header_timeout"`
	// ReadTimeout bounds reading a whole request, body included (30s).
	ReadTimeout time.Duration `yaml:"read_timeout"`
	// WriteTimeout bounds writing a response; event streams are exempt
	// (60s).
	WriteTimeout time.Duration `yaml:"write_timeout"`
	// IdleTimeout closes a keep-alive connection with no request (120s).
	IdleTimeout time.Duration `yaml:"idle_timeout"`
	// MaxConns caps the API listener's connections (1024).
	MaxConns int `yaml:"max_conns"`
	// WebhookMaxConns caps the GitHub webhook listener's (256).
	WebhookMaxConns int `yaml:"webhook_max_conns"`
}

// Hooks is the hooks section of config.yaml.
type Hooks struct {
	// Import reads foreign hook configurations too: "claude"
	// (.claude/settings.json of the project and the user) and "codex"
	// (~/.codex/hooks.json).
	Import []string `yaml:"import"`
}

// GitHub is the github section of config.yaml (the review webhook).
type GitHub struct {
	// WebhookSecretEnv names the variable holding the webhook secret.
	WebhookSecretEnv string `yaml:"webhook_secret_env"`
	// TokenEnv names the variable holding a token to post reviews with
	// (optional: without it nothing is posted).
	TokenEnv string `yaml:"token_env"`
	// APIURL is the REST API base (default https://api.github.com).
	APIURL string `yaml:"api_url"`
	// Trigger is the comment text that asks for a review.
	Trigger string `yaml:"trigger"`
	// Model is the "provider/model" of review sessions ("" = default).
	Model string `yaml:"model"`
	// Repositories map repositories to local clones.
	Repositories []GitHubRepository `yaml:"repositories"`
	// TrustedAssociations are the author associations (OWNER, MEMBER,
	// COLLABORATOR, CONTRIBUTOR, …) whose comment or pull request starts
	// a review; empty means OWNER, MEMBER and COLLABORATOR.
	TrustedAssociations []string `yaml:"trusted_associations"`
	// ReviewLabel is the label whose addition asks for a review (default
	// dsh-review).
	ReviewLabel string `yaml:"review_label"`
	// AllowWeb offers review sessions web_fetch and web_search (off by
	// default: a pull request is hostile input).
	AllowWeb bool `yaml:"allow_web"`
}

// GitHubRepository maps one repository to a local clone.
type GitHubRepository struct {
	Repo       string `yaml:"repo"`
	Path       string `yaml:"path"`
	Permission string `yaml:"permission"`
}

// Provider is one configured model provider.
type Provider struct {
	ID string `yaml:"id"`
	// Protocol is "openai" (chat completions, the default) or "anthropic".
	Protocol string `yaml:"protocol"`
	BaseURL  string `yaml:"base_url"`
	// APIKeyEnv names the environment variable holding the key. Empty
	// means the provider needs no key (local servers).
	APIKeyEnv string `yaml:"api_key_env"`
	// DeepSeek enables the DeepSeek wire extensions (reasoning passback,
	// thinking control) on an OpenAI-protocol provider.
	DeepSeek bool            `yaml:"deepseek"`
	Models   []llm.ModelInfo `yaml:"models"`
	// DefaultModel is used when only the provider id is given.
	DefaultModel string `yaml:"default_model"`
}

// Home returns $DSH_HOME, defaulting to ~/.dsh.
func Home() (string, error) {
	if h := os.Getenv("DSH_HOME"); h != "" {
		return filepath.Abs(h)
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("locate home directory (set DSH_HOME): %w", err)
	}
	return filepath.Join(home, ".dsh"), nil
}

// Load reads dir/config.yaml. A missing file is an empty configuration;
// unknown keys and malformed YAML are errors that name the file.
func Load(dir string) (Config, error) {
	path := filepath.Join(dir, "config.yaml")
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return Config{}, nil
	}
	if err != nil {
		return Config{}, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, 4<<20))
	if err != nil {
		return Config{}, fmt.Errorf("read %s: %w", path, err)
	}
	return Parse(path, data)
}

// Parse decodes a configuration document. Its errors name the file, the
// line and the key in plain words (see compose.FieldError), with the
// nearest valid key for a typo.
func Parse(name string, data []byte) (Config, error) {
	var c Config
	if len(bytes.TrimSpace(data)) == 0 {
		return c, nil
	}
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return Config{}, compose.InFile(name, compose.Plain(err))
	}
	doc := &root
	if doc.Kind == yaml.DocumentNode && len(doc.Content) > 0 {
		doc = doc.Content[0]
	}
	if doc.Kind == 0 || (doc.Kind == yaml.ScalarNode && doc.ShortTag() == "!!null") {
		return c, nil // only comments
	}
	if err := compose.Check(doc, reflect.TypeFor[Config]()); err != nil {
		return Config{}, compose.InFile(name, err)
	}
	if err := doc.Load(&c, yaml.WithKnownFields()); err != nil {
		return Config{}, compose.InFile(name, compose.Plain(err))
	}
	if rows := value(doc, "profile"); rows != nil && rows.Kind == yaml.SequenceNode && len(rows.Content) == len(c.Profile) {
		for i := range c.Profile {
			c.Profile[i].Line = rows.Content[i].Line
		}
	}
	for i, p := range c.Providers {
		line := 0
		if ps := value(doc, "providers"); ps != nil && i < len(ps.Content) {
			line = ps.Content[i].Line
		}
		bad := func(key, format string, args ...any) *compose.FieldError {
			fe := &compose.FieldError{Code: compose.CodeBadValue, Line: line, Key: fmt.Sprintf("providers[%d].%s", i, key), Problem: fmt.Sprintf(format, args...)}
			if ps := value(doc, "providers"); ps != nil && i < len(ps.Content) {
				if v := value(ps.Content[i], key); v != nil {
					fe.Line = v.Line
				}
			}
			return fe
		}
		if strings.TrimSpace(p.ID) == "" || strings.Contains(p.ID, "/") {
			return Config{}, compose.InFile(name, bad("id", "provider %d: key \"id\" must be non-empty and contain no '/'", i+1))
		}
		switch p.Protocol {
		case "", "openai", "anthropic":
		default:
			fe := bad("protocol", "provider %s: unknown protocol %q (want openai or anthropic)", p.ID, p.Protocol)
			fe.Suggestion = compose.Nearest(p.Protocol, []string{"openai", "anthropic"})
			return Config{}, compose.InFile(name, fe)
		}
	}
	if err := mcp.ValidateSet(c.MCPServers); err != nil {
		fe := &compose.FieldError{Code: compose.CodeBadValue, Key: "mcp_servers", Problem: err.Error()}
		if v := value(doc, "mcp_servers"); v != nil {
			fe.Line = v.Line
		}
		return Config{}, compose.InFile(name, fe)
	}
	if fe := c.Serve.check(doc); fe != nil {
		return Config{}, compose.InFile(name, fe)
	}
	if _, err := llm.ParseEffort(c.Effort); err != nil {
		fe := &compose.FieldError{Code: compose.CodeBadValue, Key: "effort", Problem: fmt.Sprintf("key \"effort\" must be off, low, high or max, not %q", c.Effort),
			Suggestion: compose.Nearest(c.Effort, []string{"off", "low", "high", "max"})}
		if v := value(doc, "effort"); v != nil {
			fe.Line = v.Line
		}
		return Config{}, compose.InFile(name, fe)
	}
	return c, nil
}

// check refuses a negative limit in the serve section.
func (s Serve) check(doc *yaml.Node) *compose.FieldError {
	for _, f := range []struct {
		key string
		bad bool
	}{
		{"read_header_timeout", s.ReadHeaderTimeout < 0}, {"read_timeout", s.ReadTimeout < 0},
		{"write_timeout", s.WriteTimeout < 0}, {"idle_timeout", s.IdleTimeout < 0},
		{"max_conns", s.MaxConns < 0}, {"webhook_max_conns", s.WebhookMaxConns < 0},
	} {
		if !f.bad {
			continue
		}
		fe := &compose.FieldError{Code: compose.CodeBadValue, Key: "serve." + f.key, Problem: fmt.Sprintf("key \"serve.%s\" must not be negative (0 or absent keeps the default)", f.key)}
		if sv := value(doc, "serve"); sv != nil {
			if v := value(sv, f.key); v != nil {
				fe.Line = v.Line
			}
		}
		return fe
	}
	return nil
}

// value is the value of key in mapping n, or nil.
func value(n *yaml.Node, key string) *yaml.Node {
	if n == nil || n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i+1]
		}
	}
	return nil
}
