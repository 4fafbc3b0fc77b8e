// Package provider holds the model-provider catalog (built-in DeepSeek,
// OpenAI and Anthropic plus user-configured OpenAI-compatible servers) and
// resolves a "provider/model" name into a ready adapter.
package provider

import (
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/dsh-dev/dsh/internal/config"
	"github.com/dsh-dev/dsh/internal/llm"
	"github.com/dsh-dev/dsh/internal/llm/anthropic"
	"github.com/dsh-dev/dsh/internal/llm/openai"
)

// DefaultModel is the model dsh uses when nothing else is configured.
const DefaultModel = "deepseek/deepseek-v4-flash"

// Builtins returns the built-in provider catalog.
func Builtins() []config.Provider {
	allEfforts := []llm.Effort{llm.EffortOff, llm.EffortLow, llm.EffortHigh, llm.EffortMax}
	return []config.Provider{
		{
			ID: "deepseek", Protocol: "openai", DeepSeek: true,
			BaseURL: "https://api.deepseek.com", APIKeyEnv: "DEEPSEEK_API_KEY",
			DefaultModel: "deepseek-v4-flash",
			Models: []llm.ModelInfo{
				{ID: "deepseek-v4-flash", ContextWindow: 1_000_000, Efforts: allEfforts, DefaultEffort: llm.EffortHigh},
				{ID: "deepseek-v4-pro", ContextWindow: 1_000_000, Efforts: allEfforts, DefaultEffort: llm.EffortHigh},
				{ID: "deepseek-v4-flash-vision-exp", ContextWindow: 1_000_000, Efforts: allEfforts, DefaultEffort: llm.EffortHigh, Images: true},
			},
		},
		{
			ID: "openai", Protocol: "openai",
			BaseURL: "https://api.openai.com/v1", APIKeyEnv: "OPENAI_API_KEY",
			DefaultModel: "gpt-5.1",
			Models: []llm.ModelInfo{
				{ID: "gpt-5.1", ContextWindow: 400_000, Images: true},
				{ID: "gpt-4.1", ContextWindow: 1_047_576, Images: true},
			},
		},
		{
			ID: "anthropic", Protocol: "anthropic",
			BaseURL: "https://api.anthropic.com", APIKeyEnv: "ANTHROPIC_API_KEY",
			DefaultModel: "claude-sonnet-4-5",
			Models: []llm.ModelInfo{
				{ID: "claude-sonnet-4-5", ContextWindow: 200_000, DefaultMaxTokens: 32000, Images: true},
				{ID: "claude-opus-4-1", ContextWindow: 200_000, DefaultMaxTokens: 32000, Images: true},
			},
		},
	}
}

// baseURLEnv lets the environment redirect a built-in provider.
var baseURLEnv = map[string]string{
	"deepseek":  "DEEPSEEK_BASE_URL",
	"openai":    "OPENAI_BASE_URL",
	"anthropic": "ANTHROPIC_BASE_URL",
}

// Catalog is the merged provider list: built-ins, then configured
// providers (a configured id replaces the built-in of the same id).
type Catalog struct {
	providers []config.Provider
	getenv    func(string) string
}

// NewCatalog merges the built-ins with cfg's providers. getenv reads the
// environment (os.Getenv when nil).
func NewCatalog(cfg config.Config, getenv func(string) string) *Catalog {
	if getenv == nil {
		getenv = os.Getenv
	}
	c := &Catalog{getenv: getenv}
	c.providers = Builtins()
	for _, p := range cfg.Providers {
		replaced := false
		for i := range c.providers {
			if c.providers[i].ID == p.ID {
				c.providers[i], replaced = p, true
			}
		}
		if !replaced {
			c.providers = append(c.providers, p)
		}
	}
	return c
}

// Providers lists the catalog.
func (c *Catalog) Providers() []config.Provider { return c.providers }

// Resolved is a model route ready to use.
type Resolved struct {
	Provider string
	Model    llm.ModelInfo
	Adapter  llm.Adapter
	BaseURL  string
}

// MissingCredentialError reports an unset API key variable.
type MissingCredentialError struct{ Provider, Env string }

func (e *MissingCredentialError) Error() string {
	return fmt.Sprintf("provider %s needs an API key: set the environment variable %s", e.Provider, e.Env)
}

// Resolve turns "provider/model" (or "provider" for its default model)
// into an adapter. A model id the catalog does not list is passed through
// with unknown capacity. A missing API key fails here, before any request.
func (c *Catalog) Resolve(spec, userAgent string) (Resolved, error) {
	if spec == "" {
		spec = DefaultModel
	}
	pid, mid, _ := strings.Cut(spec, "/")
	var p *config.Provider
	for i := range c.providers {
		if c.providers[i].ID == pid {
			p = &c.providers[i]
		}
	}
	if p == nil {
		ids := make([]string, len(c.providers))
		for i, q := range c.providers {
			ids[i] = q.ID
		}
		return Resolved{}, fmt.Errorf("unknown provider %q in model %q (known: %s; add others in config.yaml)", pid, spec, strings.Join(ids, ", "))
	}
	if mid == "" {
		mid = p.DefaultModel
		if mid == "" && len(p.Models) > 0 {
			mid = p.Models[0].ID
		}
		if mid == "" {
			return Resolved{}, fmt.Errorf("model %q names no model and provider %s has no default", spec, pid)
		}
	}
	info := llm.ModelInfo{ID: mid}
	for _, m := range p.Models {
		if m.ID == mid {
			info = m
		}
	}
	key := ""
	if p.APIKeyEnv != "" {
		key = c.getenv(p.APIKeyEnv)
		if key == "" {
			return Resolved{}, &MissingCredentialError{Provider: p.ID, Env: p.APIKeyEnv}
		}
	}
	base := p.BaseURL
	if env := baseURLEnv[p.ID]; env != "" {
		if v := c.getenv(env); v != "" {
			base = v
		}
	}
	if base == "" {
		return Resolved{}, fmt.Errorf("provider %s has no base_url", p.ID)
	}
	// No overall timeout: streams are bounded by the adapters' idle timer.
	client := &http.Client{Transport: http.DefaultTransport}
	r := Resolved{Provider: p.ID, Model: info, BaseURL: base}
	switch p.Protocol {
	case "anthropic":
		r.Adapter = anthropic.New(anthropic.Config{Provider: p.ID, BaseURL: base, APIKey: key, HTTPClient: client, UserAgent: userAgent, IdleTimeout: 5 * time.Minute})
	default:
		r.Adapter = openai.New(openai.Config{Provider: p.ID, BaseURL: base, APIKey: key, HTTPClient: client, DeepSeek: p.DeepSeek, UserAgent: userAgent, IdleTimeout: 5 * time.Minute})
	}
	return r, nil
}
