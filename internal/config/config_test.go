package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		name, doc, wantErr string
	}{
		{"empty", "", ""},
		{"full", `
model: ollama/qwen3
effort: low
max_tokens: 4096
providers:
  - id: ollama
    protocol: openai
    base_url: http://127.0.0.1:11434/v1
    default_model: qwen3
    models:
      - id: qwen3
        context_window: 32768
`, ""},
		{"unknown key", "modle: x\n", "modle"},
		{"bad protocol", "providers:\n  - id: x\n    protocol: grpc\n", "unknown protocol"},
		{"slash in id", "providers:\n  - id: a/b\n", "no '/'"},
		{"empty id", "providers:\n  - base_url: x\n", "non-empty"},
		{"bad effort", "effort: extreme\n", "effort"},
		{"not yaml", "model: [unclosed\n", "config.yaml"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse("config.yaml", []byte(tc.doc))
			if tc.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				if tc.name == "full" && (c.Model != "ollama/qwen3" || c.MaxTokens != 4096 || c.Providers[0].Models[0].ContextWindow != 32768) {
					t.Errorf("parsed %+v", c)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("err = %v, want %q", err, tc.wantErr)
			}
		})
	}
}

func TestLoadAndHome(t *testing.T) {
	dir := t.TempDir()
	if c, err := Load(dir); err != nil || c.Model != "" {
		t.Fatalf("missing file: %+v %v", c, err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.yaml"), []byte("model: openai/gpt-4.1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if c, err := Load(dir); err != nil || c.Model != "openai/gpt-4.1" {
		t.Fatalf("load: %+v %v", c, err)
	}
	t.Setenv("DSH_HOME", dir)
	if h, err := Home(); err != nil || h != dir {
		t.Errorf("Home() = %q %v", h, err)
	}
	t.Setenv("DSH_HOME", "")
	t.Setenv("HOME", "/nonexistent-home")
	if h, _ := Home(); h != "/nonexistent-home/.dsh" {
		t.Errorf("default home %q", h)
	}
}
