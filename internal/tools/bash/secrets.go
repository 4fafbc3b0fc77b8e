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
