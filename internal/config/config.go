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
	"strings"

	"go.yaml.in/yaml/v4"

	"github.com/dsh-dev/dsh/internal/compose"
	"github.com/dsh-dev/dsh/internal/llm"
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

// Parse decodes a configuration document.
func Parse(name string, data []byte) (Config, error) {
	var c Config
	if len(bytes.TrimSpace(data)) == 0 {
		return c, nil
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil && !errors.Is(err, io.EOF) {
		return Config{}, fmt.Errorf("%s: %w", name, err)
	}
	for i, p := range c.Providers {
		if strings.TrimSpace(p.ID) == "" || strings.Contains(p.ID, "/") {
			return Config{}, fmt.Errorf("%s: providers[%d]: id must be non-empty and contain no '/'", name, i)
		}
		switch p.Protocol {
		case "", "openai", "anthropic":
		default:
			return Config{}, fmt.Errorf("%s: provider %s: unknown protocol %q (want openai or anthropic)", name, p.ID, p.Protocol)
		}
	}
	if _, err := llm.ParseEffort(c.Effort); err != nil {
		return Config{}, fmt.Errorf("%s: effort: %w", name, err)
	}
	return c, nil
}
