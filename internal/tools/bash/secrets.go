package bash

import (
	"os"
	"slices"
	"strings"

	"github.com/dsh-dev/dsh/internal/redact"
)

// secretMarkers are the name fragments that make an environment variable
// a secret (API keys, tokens, passwords). Commands the model runs do not
// see such variables, so their values cannot end up in a tool result and
// from there in the session log.
var secretMarkers = []string{"KEY", "SECRET", "TOKEN", "PASSWORD", "PASSWD", "CREDENTIAL"}

// notSecret are well-known variables that match a marker but carry no
// secret and that tools need (ssh-agent's socket, the keyboard layout).
var notSecret = []string{"SSH_AUTH_SOCK", "GPG_AGENT_INFO", "XKB_DEFAULT_LAYOUT"}

// isSecretName reports whether an environment variable name looks like a
// secret.
func isSecretName(name string) bool {
	up := strings.ToUpper(name)
	if slices.Contains(notSecret, up) {
		return false
	}
	for _, m := range secretMarkers {
		if strings.Contains(up, m) {
			return true
		}
	}
	return false
}

// scrubbedEnv is the process environment without secret variables
// (except those passed through on purpose), plus the secret values that
// were removed. Values shorter than redact.MinLen are not returned: they
// are not worth redacting and would mangle unrelated output.
func scrubbedEnv(passthrough []string) (env []string, secrets []string) {
	for _, kv := range os.Environ() {
		name, value, _ := strings.Cut(kv, "=")
		if isSecretName(name) && !slices.Contains(passthrough, name) {
			if len(value) >= redact.MinLen {
				secrets = append(secrets, value)
			}
			continue
		}
		env = append(env, kv)
	}
	return env, secrets
}

// redactedMarker replaces a secret in command output.
const redactedMarker = "[redacted secret]"

// redactSecrets replaces every secret value in s, and its common
// encodings (see package redact): a command can still read a secret some
// other way (a file, /proc of another process), and whatever reaches the
// result is logged and sent to the model.
func redactSecrets(s string, secrets []string) string {
	return redact.String(s, redactedMarker, secrets...)
}

// Environ is the environment commands get: this process's, without
// secret-looking variables (except passthrough), with DSH_SESSION_ID set
// to sessionID; and the secret values removed, to redact from output.
// The terminal tools give their PTYs the same.
func Environ(sessionID string, passthrough []string) (env, secrets []string) {
	return environ(sessionID, passthrough)
}

// RedactSecrets replaces every secret value in s (and its common
// encodings) with the marker bash output uses.
func RedactSecrets(s string, secrets []string) string { return redactSecrets(s, secrets) }

// StrictEnv is the environment of commands in a session restricted to a
// strict environment (a review of a hostile pull request): what programs
// need to find binaries, the home directory, the locale, the terminal
// type, the time zone and a scratch directory; no variable that could
// carry a secret, whatever its name.
var StrictEnv = []string{"PATH", "HOME", "USER", "LOGNAME", "LANG", "LANGUAGE", "LC_*", "TERM", "TZ", "TMPDIR"}

// environ is the environment of the call's commands under o, and the
// secret values to redact from their output.
func (o Options) environ(sessionID string) ([]string, []string) {
	if o.EnvAllow == nil {
		return environ(sessionID, o.EnvPassthrough)
	}
	// Nothing is passed through: every secret-named value is redacted.
	env, secrets := environ(sessionID, nil)
	return allowEnv(env, o.EnvAllow), secrets
}

// allowEnv keeps the entries of env that allow names (NAME, or PREFIX*)
// and the session id.
func allowEnv(env, allow []string) []string {
	var out []string
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		if name == SessionEnv || envAllowed(name, allow) {
			out = append(out, kv)
		}
	}
	return out
}

func envAllowed(name string, allow []string) bool {
	for _, pat := range allow {
		if prefix, ok := strings.CutSuffix(pat, "*"); ok {
			if strings.HasPrefix(name, prefix) {
				return true
			}
		} else if pat == name {
			return true
		}
	}
	return false
}
