package config

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/dsh-dev/dsh/internal/compose"
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
		{"comments only", "# nothing yet\n", ""},
		{"mcp servers", "mcp_servers:\n  - name: gh\n    command: github-mcp\n    args: [stdio]\n    env: {GITHUB_TOKEN: '${GITHUB_TOKEN}'}\n    approval: auto\n    tools: {allow: ['get_*'], deny: [get_secret]}\n    tool_timeout: 90s\n    startup_timeout: 5s\n    required: true\n  - name: remote\n    url: https://mcp.example.com/mcp\n    headers: {Authorization: 'Bearer ${TOKEN}'}\n", ""},
		{"mcp key typo", "mcp_servers:\n  - name: gh\n    command: x\n    aproval: auto\n", `config.yaml, line 4: unknown key "aproval" in mcp_servers[0]; did you mean "approval"?`},
		{"mcp bad duration", "mcp_servers:\n  - name: gh\n    command: x\n    tool_timeout: soon\n", `config.yaml, line 4: key "mcp_servers[0].tool_timeout" must be a duration such as 30s, 5m or 1h30m, not "soon"`},
		{"mcp duplicate", "mcp_servers:\n  - {name: a, command: x}\n  - {name: a, command: y}\n", `config.yaml, line 2: mcp server name "a" is used twice`},
		{"mcp bad approval", "mcp_servers:\n  - {name: a, command: x, approval: always}\n", `config.yaml, line 2: mcp server a: approval must be ask or auto, not "always"`},
		{"unknown key", "modle: x\n", `config.yaml, line 1: unknown key "modle"; did you mean "model"?`},
		{"unknown nested key", "providers:\n  - id: x\n    base-url: http://h\n", `config.yaml, line 3: unknown key "base-url" in providers[0]; did you mean "base_url"?`},
		{"no near key", "zzz: 1\n", `config.yaml, line 1: unknown key "zzz" (known keys: effort, github, hooks, max_tokens, mcp_servers, model, profile, providers, serve)`},
		{"not a number", "model: a/b\nmax_tokens: lots\n", `config.yaml, line 2: key "max_tokens" must be a whole number, not "lots"`},
		{"deep number", "providers:\n  - id: x\n    models:\n      - id: m\n        context_window: big\n", `config.yaml, line 5: key "providers[0].models[0].context_window" must be a whole number, not "big"`},
		{"list for mapping", "providers: {a: 1}\n", `config.yaml, line 1: key "providers" must be a list, not a mapping`},
		{"not a mapping", "- a\n", `config.yaml, line 1: the configuration must be a mapping of keys to values, not a list`},
		{"row key typo", "profile:\n  - id: a\n    modul: x\n", `config.yaml, line 3: unknown key "modul" in profile[0]; did you mean "module"?`},
		{"bad protocol", "providers:\n  - id: x\n    protocol: grpc\n", `config.yaml, line 3: provider x: unknown protocol "grpc" (want openai or anthropic)`},
		{"slash in id", "providers:\n  - id: a/b\n", `config.yaml, line 2: provider 1: key "id" must be non-empty and contain no '/'`},
		{"empty id", "providers:\n  - base_url: x\n", `config.yaml, line 2: provider 1: key "id" must be non-empty and contain no '/'`},
		{"protocol typo", "providers:\n  - id: x\n    protocol: openi\n", `config.yaml, line 3: provider x: unknown protocol "openi" (want openai or anthropic); did you mean "openai"?`},
		{"effort typo", "effort: hihg\n", `config.yaml, line 1: key "effort" must be off, low, high or max, not "hihg"; did you mean "high"?`},
		{"bad effort", "effort: extreme\n", `config.yaml, line 1: key "effort" must be off, low, high or max, not "extreme"`},
		{"serve limits", "serve:\n  read_header_timeout: 5s\n  read_timeout: 1m\n  write_timeout: 90s\n  idle_timeout: 3m\n  max_conns: 64\n  webhook_max_conns: 8\n", ""},
		{"serve negative", "serve:\n  idle_timeout: -1s\n", `config.yaml, line 2: key "serve.idle_timeout" must not be negative (0 or absent keeps the default)`},
		{"serve bad duration", "serve:\n  read_timeout: 30\n", `config.yaml, line 2: key "serve.read_timeout" must be a duration such as 30s, 5m or 1h30m, not "30"`},
		{"not yaml", "model: [unclosed\n", "config.yaml, line 2: this is not valid YAML: did not find expected ',' or ']'"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse("config.yaml", []byte(tc.doc))
			if tc.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				if want := (Serve{ReadHeaderTimeout: 5 * time.Second, ReadTimeout: time.Minute, WriteTimeout: 90 * time.Second, IdleTimeout: 3 * time.Minute, MaxConns: 64, WebhookMaxConns: 8}); tc.name == "serve limits" && c.Serve != want {
					t.Errorf("serve %+v, want %+v", c.Serve, want)
				}
				if tc.name == "full" && (c.Model != "ollama/qwen3" || c.MaxTokens != 4096 || c.Providers[0].Models[0].ContextWindow != 32768) {
					t.Errorf("parsed %+v", c)
				}
				return
			}
			if err == nil || err.Error() != tc.wantErr {
				t.Fatalf("err = %v\nwant  %s", err, tc.wantErr)
			}
			var fe *compose.FieldError
			if !errors.As(err, &fe) || fe.Code == "" {
				t.Errorf("%v is not a *compose.FieldError with a code", err)
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

// TestProfileRowsKeepTheirLines: rows from config.yaml carry their line,
// so composition errors can point at them.
func TestProfileRowsKeepTheirLines(t *testing.T) {
	c, err := Parse("config.yaml", []byte("model: x/y\nprofile:\n  - id: a\n    module: m\n\n  - id: b\n    module: m\n"))
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Profile) != 2 || c.Profile[0].Line != 3 || c.Profile[1].Line != 6 {
		t.Errorf("rows %+v", c.Profile)
	}
}
