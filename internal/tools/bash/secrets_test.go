package bash

import (
	"strings"
	"testing"
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
