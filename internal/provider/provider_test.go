package provider

import (
	"errors"
	"strings"
	"testing"

	"github.com/dsh-dev/dsh/internal/config"
	"github.com/dsh-dev/dsh/internal/llm"
	"github.com/dsh-dev/dsh/internal/llm/anthropic"
	"github.com/dsh-dev/dsh/internal/llm/openai"
)

func env(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func TestResolve(t *testing.T) {
	cfg := config.Config{Providers: []config.Provider{
		{ID: "local", BaseURL: "http://127.0.0.1:1/v1", DefaultModel: "m1", Models: []llm.ModelInfo{{ID: "m1", ContextWindow: 8192}}},
		{ID: "openai", Protocol: "openai", BaseURL: "http://proxy/v1", APIKeyEnv: "PROXY_KEY"},
	}}
	keys := env(map[string]string{"DEEPSEEK_API_KEY": "d", "ANTHROPIC_API_KEY": "a", "PROXY_KEY": "p", "DEEPSEEK_BASE_URL": "http://fake"})
	c := NewCatalog(cfg, keys)
	for _, tc := range []struct {
		spec, provider, model, base string
		window                      int
		anthropic                   bool
	}{
		{"", "deepseek", "deepseek-v4-flash", "http://fake", 1_000_000, false},
		{"deepseek/deepseek-v4-pro", "deepseek", "deepseek-v4-pro", "http://fake", 1_000_000, false},
		{"deepseek/some-new-model", "deepseek", "some-new-model", "http://fake", 0, false},
		{"deepseek", "deepseek", "deepseek-v4-flash", "http://fake", 1_000_000, false},
		{"anthropic/claude-sonnet-4-5", "anthropic", "claude-sonnet-4-5", "https://api.anthropic.com", 200_000, true},
		{"local", "local", "m1", "http://127.0.0.1:1/v1", 8192, false},
		{"openai/gpt-x", "openai", "gpt-x", "http://proxy/v1", 0, false},
	} {
		r, err := c.Resolve(tc.spec, "dsh/test")
		if err != nil {
			t.Errorf("Resolve(%q): %v", tc.spec, err)
			continue
		}
		if r.Provider != tc.provider || r.Model.ID != tc.model || r.BaseURL != tc.base || r.Model.ContextWindow != tc.window {
			t.Errorf("Resolve(%q) = %+v", tc.spec, r)
		}
		_, isAnthropic := r.Adapter.(*anthropic.Client)
		_, isOpenAI := r.Adapter.(*openai.Client)
		if isAnthropic != tc.anthropic || isOpenAI == tc.anthropic {
			t.Errorf("Resolve(%q) adapter %T", tc.spec, r.Adapter)
		}
	}
}

func TestResolveErrors(t *testing.T) {
	c := NewCatalog(config.Config{}, env(nil))
	_, err := c.Resolve("deepseek/deepseek-v4-flash", "")
	var mc *MissingCredentialError
	if !errors.As(err, &mc) || !strings.Contains(err.Error(), "DEEPSEEK_API_KEY") {
		t.Errorf("missing key error = %v", err)
	}
	if _, err := c.Resolve("nope/x", ""); err == nil || !strings.Contains(err.Error(), "unknown provider") {
		t.Errorf("unknown provider error = %v", err)
	}
}
