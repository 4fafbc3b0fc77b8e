package bash

import (
	"slices"
	"strings"
	"testing"

	"github.com/dsh-dev/dsh/internal/tool"
)

func TestIsSecretName(t *testing.T) {
	for name, want := range map[string]bool{
		"DEEPSEEK_API_KEY": true, "OPENAI_API_KEY": true, "GITHUB_TOKEN": true, "aws_secret_access_key": true,
		"DB_PASSWORD": true, "NPM_CONFIG_PASSWD": true, "GOOGLE_APPLICATION_CREDENTIALS": true,
		"PATH": false, "HOME": false, "SSH_AUTH_SOCK": false, "TERM": false, "DSH_SESSION_ID": false,
	} {
		if got := isSecretName(name); got != want {
			t.Errorf("isSecretName(%q) = %v, want %v", name, got, want)
		}
	}
}

// TestSecretsStayOutOfResults: a secret in dsh's environment is not in
// the command's environment, and its value is redacted if the command
// prints it some other way.
func TestSecretsStayOutOfResults(t *testing.T) {
	const secret = "sk-test-0123456789abcdef"
	t.Setenv("DSH_TEST_API_KEY", secret)
	t.Setenv("DSH_TEST_SHORT_TOKEN", "1")
	h := newHarness(t, Options{})
	r := h.run(t.Context(), t, map[string]any{"command": `echo "env:[$DSH_TEST_API_KEY]"; echo "printed: ` + secret + `"; echo "short:[$DSH_TEST_SHORT_TOKEN]"`})
	out := r.Content[0].Text
	if strings.Contains(out, secret) {
		t.Fatalf("secret leaked into the result:\n%s", out)
	}
	for _, want := range []string{"env:[]", "printed: [redacted secret]", "short:[]"} {
		if !strings.Contains(out, want) {
			t.Errorf("result lacks %q:\n%s", want, out)
		}
	}
	pass := newHarness(t, Options{EnvPassthrough: []string{"DSH_TEST_API_KEY"}})
	r = pass.run(t.Context(), t, map[string]any{"command": `echo "env:[$DSH_TEST_API_KEY]"`})
	if !strings.Contains(r.Content[0].Text, "env:["+secret+"]") {
		t.Errorf("passthrough variable missing: %s", r.Content[0].Text)
	}
}

// TestTransformedSecretsRedacted: a command that prints a secret base64-
// or hex-encoded, reversed or URL-encoded gets it redacted too, and a
// secret too short to redact (a one-character test key) leaves unrelated
// output alone.
func TestTransformedSecretsRedacted(t *testing.T) {
	const secret = "sk-test-0123456789abcdef"
	t.Setenv("DSH_TEST_API_KEY", secret)
	t.Setenv("DSH_TEST_PASSWORD", "p@ss/word+1")
	t.Setenv("DSH_TEST_TINY_KEY", "x")
	h := newHarness(t, Options{})
	for _, cmd := range []string{
		`printf %s '` + secret + `' | base64`,
		`printf 'KEY=%s\n' '` + secret + `' | base64`,
		`printf 'DSH_TEST_API_KEY=%s' '` + secret + `' | base64 -w0 | tr '+/' '-_'`,
		`printf %s '` + secret + `' | od -An -tx1 | tr -d ' \n'`,
		`printf %s '` + secret + `' | rev`,
		`printf %s 'p%40ss%2Fword%2B1'`, // DSH_TEST_PASSWORD URL-encoded
	} {
		out := h.run(t.Context(), t, map[string]any{"command": cmd}).Content[0].Text
		if !strings.Contains(out, "[redacted secret]") {
			t.Errorf("%s: secret not redacted:\n%s", cmd, out)
		}
	}
	out := h.run(t.Context(), t, map[string]any{"command": `echo "the output exceeds x lines"`}).Content[0].Text
	if !strings.Contains(out, "the output exceeds x lines") {
		t.Errorf("a one-character secret mangled the output:\n%s", out)
	}
}

// BenchmarkEnviron is the per-call environment scrubbing.
func BenchmarkEnviron(b *testing.B) {
	for b.Loop() {
		environ("0193a6f0-0000-7000-8000-000000000000", nil)
	}
}

// TestStrictEnv: with EnvAllow (StrictEnv, a review of a hostile pull
// request) a command sees only the allowed variables and the session id:
// not a secret-named one, not one passed through, and not one whose name
// says nothing (a token in DATABASE_URL); their values are still redacted
// from output. The persistent shell gets the same.
func TestStrictEnv(t *testing.T) {
	const secret = "postgres://u:hunter2hunter2@db/x"
	t.Setenv("DATABASE_URL", secret)
	t.Setenv("DSH_TEST_API_KEY", "sk-test-0123456789abcdef")
	t.Setenv("LC_TIME", "C")
	cmd := `env | cut -d= -f1 | sort | tr '\n' ' '`
	for _, persistent := range []bool{false, true} {
		o := Options{EnvAllow: StrictEnv, EnvPassthrough: []string{"DSH_TEST_API_KEY"}}
		var h *harness
		if persistent {
			reg := tool.NewRegistry()
			def, closer := NewPersistent(o)
			t.Cleanup(func() { closer.Close() })
			if err := reg.Register("", def); err != nil {
				t.Fatal(err)
			}
			h = &harness{p: tool.NewPipeline(reg), cwd: t.TempDir()}
		} else {
			h = newHarness(t, o)
		}
		out := text(h.run(t.Context(), t, map[string]any{"command": cmd}))
		names := strings.Fields(strings.Split(out, "\n")[0])
		for _, n := range names {
			if n == SessionEnv || n == "PWD" || n == "SHLVL" || n == "_" || n == "OLDPWD" {
				continue // the session id, and what the shell sets itself
			}
			if !envAllowed(n, StrictEnv) {
				t.Errorf("persistent %v: %s is in the environment: %s", persistent, n, out)
			}
		}
		if !slices.Contains(names, "PATH") || !slices.Contains(names, "LC_TIME") || !slices.Contains(names, SessionEnv) {
			t.Errorf("persistent %v: allowed variables missing: %s", persistent, out)
		}
		out = text(h.run(t.Context(), t, map[string]any{"command": `echo "key:[$DSH_TEST_API_KEY]"; echo sk-test-0123456789abcdef`}))
		if strings.Contains(out, "0123456789abcdef") || !strings.Contains(out, "key:[]") {
			t.Errorf("persistent %v: %s", persistent, out)
		}
	}
}
