package cli

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/dsh-dev/dsh/internal/app"
)

// resolveDelegation turns a prefix of a delegation id (a journal
// directory under dir) into the one id it names. An unknown or ambiguous
// prefix is a usage error (*app.ConfigError) that says what to give.
func resolveDelegation(dir, prefix string) (string, error) {
	if prefix != "" && !strings.ContainsAny(prefix, `/\`) {
		if st, err := os.Stat(filepath.Join(dir, prefix)); err == nil && st.IsDir() {
			return prefix, nil
		}
	}
	ents, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return "", err
	}
	var found []string
	for _, e := range ents {
		if e.IsDir() && prefix != "" && strings.HasPrefix(e.Name(), prefix) {
			found = append(found, e.Name())
		}
	}
	slices.Sort(found)
	switch len(found) {
	case 1:
		return found[0], nil
	case 0:
		return "", &app.ConfigError{Err: fmt.Errorf("no delegation id starts with %q; the delegations are the directories of %s", prefix, dir)}
	}
	if len(found) > 10 {
		found = append(found[:10], "…")
	}
	return "", &app.ConfigError{Err: fmt.Errorf("delegation id prefix %q is ambiguous: it matches\n  %s\ngive more characters of the id", prefix, strings.Join(found, "\n  "))}
}
