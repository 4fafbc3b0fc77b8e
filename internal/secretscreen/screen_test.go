package secretscreen

import (
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Every credential format is found, inside ordinary prose and code, and
// nothing in ordinary review text is taken for one.
func TestFormats(t *testing.T) {
	s := New()
	for _, c := range []struct{ name, text string }{
		{"openssh key", "here:\n-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n-----END OPENSSH PRIVATE KEY-----"},
		{"rsa key", "-----BEGIN RSA PRIVATE KEY-----"},
		{"pkcs8 key", "`-----BEGIN PRIVATE KEY-----`"},
		{"encrypted key", "-----BEGIN ENCRYPTED PRIVATE KEY-----"},
		{"ec key", "-----BEGIN EC PRIVATE KEY-----"},
		{"pgp key", "-----BEGIN PGP PRIVATE KEY BLOCK-----"},
		{"ghp", "token ghp_" + strings.Repeat("A1b2", 9)},
		{"gho", "(gho_" + strings.Repeat("x9", 18) + ")"},
		{"ghs", "ghs_" + strings.Repeat("Q7", 18)},
		{"ghu", "ghu_" + strings.Repeat("Q7", 18)},
		{"github_pat", "github_pat_11ABCDEFG0" + strings.Repeat("a_b1", 15)},
		{"openai", "OPENAI_API_KEY=sk-proj-" + strings.Repeat("aB3", 12)},
		{"anthropic", "sk-ant-api03-" + strings.Repeat("Zx9_", 10)},
		{"deepseek", "key: sk-0123456789abcdef0123456789abcdef"},
		{"stripe", "sk_live_" + strings.Repeat("a1", 12)},
		{"aws access key", "AKIAIOSFODNN7EXAMPLE"},
		{"aws temporary key", "ASIAY34FZKBOKMUTVV7A"},
		{"aws secret key", "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"},
		{"google", "AIzaSyA" + strings.Repeat("b", 32)},
		{"slack", "xoxb-123456789012-abcdefABCDEF"},
		{"gitlab", "glpat-" + strings.Repeat("aZ", 10)},
		{"npm", "npm_" + strings.Repeat("a1B", 12)},
		{"hugging face", "hf_" + strings.Repeat("aB", 17)},
		{"jwt", "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"},
	} {
		if _, ok := s.Find(c.text); !ok {
			t.Errorf("%s: not found in %q", c.name, c.text)
		}
	}
	review := `## Review

Correctness: ` + "`parseConfig`" + ` ignores the error of os.ReadFile on line 42; a missing
file returns a zero Config. The test TestParseConfig only covers the happy path.

Risks: the new cache key (sha256 of the path) is computed twice; consider
memoising. The SKU lookup in sku-lookup-table.go uses sk-learn style names
(sk-learn-compatible-estimator) which is confusing. The AWS region default
us-east-1 is hard-coded. See https://github.com/o/r/pull/12 and commit
ec26c3e57ca3a959ca5aad62de7213c562f8c821. The key "PRIVATE KEY" handling
in pem.go (BEGIN/END markers) looks right; "-----BEGIN CERTIFICATE-----" is
public. ghp_short is a placeholder. The token_env option and GITHUB_TOKEN
variable are documented. eyJ is base64 for '{"'.`
	if f, ok := s.Find(review); ok {
		t.Errorf("ordinary review text taken for %s", f.Kind)
	}
}

// A known value is found as is, base64- or hex-encoded, reversed, and
// wrapped over lines; short values are ignored.
func TestValues(t *testing.T) {
	tok := "dsh-serve-token-5f0c2a9e7b"
	s := New(tok, "short", "")
	for _, text := range []string{
		"the token is " + tok + ".",
		base64.StdEncoding.EncodeToString([]byte("x" + tok + "y")),
		"hex: 6473682d73657276652d746f6b656e2d35663063326139653762",
		"reversed: b7e9a2c0f5-nekot-evres-hsd",
		"wrapped: dsh-serve-to\nken-5f0c2a9e7b",
	} {
		if f, ok := s.Find(text); !ok || f.Kind != "the value of a secret dsh knows" {
			t.Errorf("not found in %q", text)
		}
	}
	if _, ok := s.Find("a short review that says short things"); ok {
		t.Error("a value shorter than redact.MinLen was screened")
	}
}

// The values of secret-named variables (and of those named on purpose)
// are known; others are not. A private key's body lines and a token
// file's content are known too.
func TestKnownValues(t *testing.T) {
	got := EnvValues([]string{"DEEPSEEK_API_KEY=k1", "MY_TOKEN=k2", "PATH=/bin", "SSH_AUTH_SOCK=/tmp/a", "PROVIDER_CRED=k3"}, "PROVIDER_CRED")
	if strings.Join(got, ",") != "k1,k2,k3" {
		t.Errorf("env values %v", got)
	}
	dir := t.TempDir()
	key := filepath.Join(dir, ".ssh", "id_ed25519")
	if err := os.MkdirAll(filepath.Dir(key), 0o700); err != nil {
		t.Fatal(err)
	}
	body := "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW"
	if err := os.WriteFile(key, []byte("-----BEGIN OPENSSH PRIVATE KEY-----\n"+body+"\n-----END OPENSSH PRIVATE KEY-----\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(key+".pub", []byte("ssh-ed25519 AAAA x@y\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tokFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokFile, []byte("serve-token-abcdef123\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	keys := SSHKeys(dir)
	if len(keys) != 1 || keys[0] != key {
		t.Fatalf("ssh keys %v", keys)
	}
	s := New(FileValues(append(keys, tokFile, filepath.Join(dir, "missing"))...)...)
	for _, text := range []string{"the key body: " + body, "token serve-token-abcdef123"} {
		if _, ok := s.Find(text); !ok {
			t.Errorf("not found in %q", text)
		}
	}
}
