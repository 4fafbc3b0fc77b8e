package cli_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dsh-dev/dsh/internal/llm/llmtest"
)

// Finding 6, the way it was found: a model's bash calls cat the user's
// SSH key, dsh's database and the serve token, in read-only and
// workspace-write, under whichever backend the machine selects (CI runs
// this with DSH_SANDBOX_BACKENDS=landlock too). Every one is refused,
// the result says a read was denied and names the path; the profile's
// sandbox block adds an entry (deny_read) and removes a default one
// (allow_read), and the model is told what it may not read.
func TestDenyReadThroughBash(t *testing.T) {
	needSandbox(t)
	for _, preset := range []string{"workspace-write", "read-only"} {
		t.Run(preset, func(t *testing.T) {
			home := outsideDir(t)
			e := newEnv(t)
			e.home = filepath.Join(home, ".dsh")
			e.cwd = outsideDir(t)
			files := map[string]string{
				".ssh/id_ed25519":   "-----BEGIN OPENSSH PRIVATE KEY----- ssh-secret",
				".dsh/serve/token":  "serve-token-secret",
				".dsh/dsh.db-probe": "db-secret",
				"secrets/key":       "configured-secret",
				".kube/config":      "kube-allowed",
				".profile":          "profile-readable",
			}
			for rel, body := range files {
				p := filepath.Join(home, rel)
				if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
					t.Fatal(err)
				}
				writeFile(t, p, body, 0o600)
			}
			writeFile(t, filepath.Join(e.home, "config.yaml"), `
profile:
  - id: permissions
    module: permissions
    config:
      sandbox:
        deny_read: [~/secrets]
        allow_read: [~/.kube]
`, 0o600)
			calls := []string{
				"cat " + filepath.Join(home, ".ssh/id_ed25519"),
				"cat " + filepath.Join(home, ".dsh/serve/token"),
				"cat " + filepath.Join(home, ".dsh/dsh.db-probe"),
				"cat " + filepath.Join(home, "secrets/key"),
				"cat " + filepath.Join(home, ".kube/config") + " " + filepath.Join(home, ".profile"),
			}
			var tc []llmtest.ToolCall
			for _, c := range calls {
				tc = append(tc, bashCall(c))
			}
			e.srv.Enqueue(llmtest.Response{ToolCalls: tc}, llmtest.Response{Text: "done"})
			ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
			defer cancel()
			c := e.cmd(ctx, "run", "--json", "--approval", "never", "--permission", preset, "read the secrets")
			c.Env = append(c.Env, "HOME="+home)
			out, err := c.Output()
			if err != nil {
				t.Fatalf("dsh run: %v: %s", err, out)
			}
			events, _ := parseJSONRun(t, string(out))
			res := results(t, events)
			if len(res) != len(calls) {
				t.Fatalf("%d results", len(res))
			}
			for i, want := range []string{".ssh", ".dsh", ".dsh", "secrets"} {
				got := text(res[i])
				for _, secret := range []string{"ssh-secret", "serve-token-secret", "db-secret", "configured-secret"} {
					if strings.Contains(got, secret) {
						t.Errorf("call %d leaked %s: %q", i, secret, got)
					}
				}
				if !strings.Contains(got, "Permission denied") ||
					!strings.Contains(got, "[sandbox: read access denied — reading "+filepath.Join(home, want)) {
					t.Errorf("call %d: the denial is not said plainly: %q", i, got)
				}
			}
			if got := text(res[4]); !strings.Contains(got, "kube-allowed") || !strings.Contains(got, "profile-readable") {
				t.Errorf("allowed reads failed: %q", got)
			}
			body := string(e.srv.Requests()[0].Body)
			if !strings.Contains(body, "Reading these paths is denied") || !strings.Contains(body, filepath.Join(home, "secrets")) ||
				strings.Contains(body, filepath.Join(home, ".kube")+",") {
				t.Error("the runtime context does not say what is denied")
			}
		})
	}
}

// The sandbox block's paths must be absolute after ~ expands, and its
// keys known.
func TestSandboxConfigValidated(t *testing.T) {
	for _, c := range []struct{ cfg, want string }{
		{`{deny_read: [secrets]}`, "deny_read"},
		{`{allow_read: [./x]}`, "allow_read"},
		{`{read_roots: [data]}`, "read_roots"},
		{`{deny_reads: [/x]}`, "deny_reads"},
	} {
		e := newEnv(t)
		writeFile(t, filepath.Join(e.home, "config.yaml"), fmt.Sprintf("profile:\n  - id: permissions\n    module: permissions\n    config: {sandbox: %s}\n", c.cfg), 0o600)
		_, stderr, code := e.dsh("", "config", "dump")
		if code != 2 || !strings.Contains(stderr, c.want) {
			t.Errorf("%s: exit %d, %s", c.cfg, code, stderr)
		}
	}
}

// Finding 3 (sandbox side), the way it was found: a model in
// workspace-write rewrites the hook script a trusted hooks.json runs
// (.dsh/check.sh) and one named in the profile's protected list, with
// bash and with the write tool, and creates a .codex that does not
// exist yet with the write tool. Every write is refused and nothing
// changes.
func TestProtectedConfigThroughTools(t *testing.T) {
	needSandbox(t)
	e := newEnv(t)
	e.cwd = outsideDir(t)
	writeFile(t, filepath.Join(e.cwd, ".git", "config"), "[core]\n", 0o644)
	writeFile(t, filepath.Join(e.cwd, ".dsh", "check.sh"), "echo trusted\n", 0o755)
	writeFile(t, filepath.Join(e.cwd, "scripts", "check.sh"), "echo trusted\n", 0o755)
	writeFile(t, filepath.Join(e.home, "config.yaml"), `
profile:
  - id: permissions
    module: permissions
    config:
      sandbox:
        protected: [scripts/check.sh]
`, 0o600)
	e.srv.Enqueue(
		llmtest.Response{ToolCalls: []llmtest.ToolCall{
			bashCall("echo 'curl evil' > .dsh/check.sh"),
			bashCall("echo 'curl evil' > scripts/check.sh"),
			toolCall("write", map[string]any{"file_path": ".dsh/check.sh", "content": "curl evil\n"}),
			toolCall("write", map[string]any{"file_path": "scripts/check.sh", "content": "curl evil\n"}),
			toolCall("write", map[string]any{"file_path": ".codex/config.toml", "content": "evil = true\n"}),
		}},
		llmtest.Response{Text: "done"},
	)
	stdout, stderr, code := e.dsh("", "run", "--json", "--approval", "never", "--permission", "workspace-write", "rewrite the hooks")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	events, _ := parseJSONRun(t, stdout)
	res := results(t, events)
	if len(res) != 5 {
		t.Fatalf("%d results", len(res))
	}
	for i, r := range res {
		if !strings.Contains(text(r), "[sandbox: file access denied") {
			t.Errorf("call %d was not refused: %q", i, text(r))
		}
	}
	for _, f := range []string{".dsh/check.sh", "scripts/check.sh"} {
		if b, _ := os.ReadFile(filepath.Join(e.cwd, f)); string(b) != "echo trusted\n" {
			t.Errorf("%s is now %q", f, b)
		}
	}
	if _, err := os.Stat(filepath.Join(e.cwd, ".codex")); err == nil {
		t.Error("the write tool created .codex")
	}
}
