package proc

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// BaseEnv names the variables every child inherits from dsh when dsh has
// them set: the minimum a well-behaved program needs to find binaries, its
// home, its locale, the terminal type and a scratch directory.
var BaseEnv = []string{"PATH", "HOME", "USER", "LANG", "TERM", "TMPDIR"}

// EnvPolicy describes a child's environment. The child never inherits dsh's
// environment wholesale: it starts empty, gets the BaseEnv variables, then
// the Passthrough ones, then Set. A peer that needs its own configuration
// (CODEX_HOME, an API key) must name it here explicitly. A caller that has
// already built the whole environment itself (the bash tool scrubs
// secrets from it) gives it as Exact.
type EnvPolicy struct {
	// Exact, when not nil, is the child's whole environment, taken as
	// given ("NAME=value" entries): BaseEnv and Passthrough do not apply,
	// Set still overrides.
	Exact []string
	// Passthrough lists variable names copied from dsh's environment. An
	// entry ending in "*" is a prefix: "CODEX_*" keeps every variable whose
	// name starts with "CODEX_".
	Passthrough []string
	// Set adds or overrides variables with fixed values.
	Set map[string]string
}

// Build returns the child environment ("NAME=value" entries, sorted by
// name) derived from environ, which is normally os.Environ(). It fails on a
// Set name that is empty or contains '=' or NUL, or a value containing NUL.
func (p EnvPolicy) Build(environ []string) ([]string, error) {
	out := map[string]string{}
	if p.Exact != nil {
		environ = p.Exact
	}
	keep := func(name string) bool {
		if slices.Contains(BaseEnv, name) {
			return true
		}
		for _, pat := range p.Passthrough {
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
	for _, kv := range environ {
		name, val, ok := strings.Cut(kv, "=")
		if !ok || name == "" {
			continue
		}
		if p.Exact != nil || keep(name) {
			out[name] = val
		}
	}
	for name, val := range p.Set {
		if name == "" || strings.ContainsAny(name, "=\x00") || strings.ContainsRune(val, 0) {
			return nil, fmt.Errorf("proc: invalid environment variable %q", name)
		}
		out[name] = val
	}
	env := make([]string, 0, len(out))
	for _, name := range slices.Sorted(maps.Keys(out)) {
		env = append(env, name+"="+out[name])
	}
	return env, nil
}
