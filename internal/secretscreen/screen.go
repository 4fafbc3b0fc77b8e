// Package secretscreen decides whether a text about to leave the machine
// (a review posted to a pull request) holds a secret: one of the values
// dsh knows to be secret (in the encodings package redact knows), or a
// string in a well-known credential format (private keys, GitHub, cloud
// and model-provider tokens). It says what it found, never the secret.
//
// Like package redact it is a last line of defence: a secret printed in
// pieces or transformed otherwise passes. What keeps secrets out of a
// review is that the review cannot read them; this screen catches what
// got through anyway.
package secretscreen

import (
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"unicode"

	"github.com/dsh-dev/dsh/internal/redact"
)

// Finding is what the screen found: a kind, never the secret.
type Finding struct {
	// Kind names it: "a private key", "a GitHub token", "the value of a
	// secret", ….
	Kind string
}

// Screen checks texts against known secret values and credential formats.
// It is safe for concurrent use.
type Screen struct {
	forms []string
}

// New returns a screen for values (each of at least redact.MinLen bytes;
// shorter ones are ignored, as redact does) and the credential formats.
func New(values ...string) *Screen {
	s := &Screen{}
	for _, v := range values {
		v = strings.TrimSpace(v)
		if len(v) >= redact.MinLen {
			s.forms = append(s.forms, redact.Variants(v)...)
		}
	}
	return s
}

type format struct {
	kind string
	re   *regexp.Regexp
	// ok, when set, confirms a match (fewer false positives).
	ok func(string) bool
}

var formats = sync.OnceValue(func() []format {
	hasDigit := func(s string) bool { return strings.IndexFunc(s, unicode.IsDigit) >= 0 }
	return []format{
		{kind: "a private key", re: regexp.MustCompile(`-----BEGIN[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----`)},
		{kind: "a GitHub token", re: regexp.MustCompile(`\b(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{30,}`)},
		{kind: "a GitHub token", re: regexp.MustCompile(`\bgithub_pat_[A-Za-z0-9_]{30,}`)},
		{kind: "an API key", re: regexp.MustCompile(`\bsk-[A-Za-z0-9_-]{20,}`), ok: hasDigit},
		{kind: "an API key", re: regexp.MustCompile(`\b(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}`)},
		{kind: "an AWS access key", re: regexp.MustCompile(`\b(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA|ANVA|AIPA)[0-9A-Z]{16}\b`)},
		{kind: "an AWS secret key", re: regexp.MustCompile(`(?i)aws_?secret_?access_?key["']?\s*[:=]\s*["']?[A-Za-z0-9/+]{40}`)},
		{kind: "a Google API key", re: regexp.MustCompile(`\bAIza[0-9A-Za-z_-]{35}`)},
		{kind: "a Slack token", re: regexp.MustCompile(`\bxox[abposr]-[A-Za-z0-9-]{10,}`)},
		{kind: "a GitLab token", re: regexp.MustCompile(`\bglpat-[A-Za-z0-9_-]{20,}`)},
		{kind: "an npm token", re: regexp.MustCompile(`\bnpm_[A-Za-z0-9]{36}\b`)},
		{kind: "a Hugging Face token", re: regexp.MustCompile(`\bhf_[A-Za-z0-9]{30,}\b`)},
		{kind: "a JSON web token", re: regexp.MustCompile(`\beyJ[A-Za-z0-9_-]{10,}\.eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}`)},
	}
})

// Find reports the first secret in text: a known value (also with the
// text's whitespace removed, so a value wrapped over lines is found) or a
// credential format.
func (s *Screen) Find(text string) (Finding, bool) {
	squeezed := strings.Map(func(r rune) rune {
		if unicode.IsSpace(r) {
			return -1
		}
		return r
	}, text)
	for _, f := range s.forms {
		if strings.Contains(text, f) || strings.Contains(squeezed, f) {
			return Finding{Kind: "the value of a secret dsh knows"}, true
		}
	}
	for _, f := range formats() {
		for _, m := range f.re.FindAllString(text, -1) {
			if f.ok == nil || f.ok(m) {
				return Finding{Kind: f.kind}, true
			}
		}
	}
	return Finding{}, false
}

// SecretName reports whether an environment variable name looks like a
// secret's (it names a key, secret, token, password or credential), by
// the rule the bash tool scrubs commands' environments with.
func SecretName(name string) bool {
	up := strings.ToUpper(name)
	switch up {
	case "SSH_AUTH_SOCK", "GPG_AGENT_INFO", "XKB_DEFAULT_LAYOUT":
		return false
	}
	for _, m := range []string{"KEY", "SECRET", "TOKEN", "PASSWORD", "PASSWD", "CREDENTIAL"} {
		if strings.Contains(up, m) {
			return true
		}
	}
	return false
}

// EnvValues returns the values of the secret-named variables of environ
// ("NAME=value" entries, normally os.Environ()) and of the variables
// named in also (whatever their names: configured key variables).
func EnvValues(environ []string, also ...string) []string {
	var out []string
	for _, kv := range environ {
		name, v, _ := strings.Cut(kv, "=")
		if v != "" && (SecretName(name) || containsFold(also, name)) {
			out = append(out, v)
		}
	}
	return out
}

func containsFold(list []string, s string) bool {
	for _, x := range list {
		if x != "" && x == s {
			return true
		}
	}
	return false
}

// FileValues returns the secret content of the files at paths that exist
// and can be read (at most 1 MiB each): for a PEM-armoured file (a
// private key) each line of its body, so that the body printed without
// its armour is found; for any other file its trimmed content (a token
// file). Missing files are skipped.
func FileValues(paths ...string) []string {
	var out []string
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			continue
		}
		b, _ := io.ReadAll(io.LimitReader(f, 1<<20))
		f.Close()
		text := string(b)
		if !strings.Contains(text, "-----BEGIN") {
			if v := strings.TrimSpace(text); v != "" {
				out = append(out, v)
			}
			continue
		}
		for _, line := range strings.Split(text, "\n") {
			line = strings.TrimSpace(line)
			if len(line) >= 16 && !strings.HasPrefix(line, "-----") && !strings.Contains(line, ":") {
				out = append(out, line)
			}
		}
	}
	return out
}

// SSHKeys returns the private key files under home's .ssh directory
// (id_* without .pub).
func SSHKeys(home string) []string {
	if home == "" {
		return nil
	}
	matches, _ := filepath.Glob(filepath.Join(home, ".ssh", "id_*"))
	var out []string
	for _, m := range matches {
		if !strings.HasSuffix(m, ".pub") {
			out = append(out, m)
		}
	}
	return out
}
