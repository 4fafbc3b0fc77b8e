package proc

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// ValidateOverride validates a configured working-directory override once,
// at load time. Call it only when the configuration sets the key: the empty
// string is rejected (resolving "" would silently mean dsh's own launch
// directory), a relative path is taken against dsh's launch directory, and
// the result must be an existing directory the child can enter. It returns
// the absolute path with symlinks resolved.
func ValidateOverride(dir string) (string, error) {
	if dir == "" {
		return "", errors.New("proc: configured cwd must not be empty; omit it to use the delegating session's cwd")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("proc: configured cwd %q: %w", dir, err)
	}
	return usableDir("configured cwd", abs)
}

// ResolveDir picks a child's working directory at start: the override when
// one is configured (non-empty; validated again here, cheaply), else the
// delegating session's cwd, which must be absolute and an enterable
// directory. With neither it fails: a child is never bound to the server
// process's own cwd, which belongs to no session.
func ResolveDir(override, sessionCwd string) (string, error) {
	if override != "" {
		return ValidateOverride(override)
	}
	if sessionCwd == "" {
		return "", errors.New("proc: no working directory for the child: configure cwd or delegate from a session that has one")
	}
	if !filepath.IsAbs(sessionCwd) {
		return "", fmt.Errorf("proc: session cwd must be an absolute path: %q", sessionCwd)
	}
	return usableDir("session cwd", sessionCwd)
}

// usableDir resolves symlinks in the absolute path abs and checks that it
// names a directory with search permission.
func usableDir(label, abs string) (string, error) {
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return "", fmt.Errorf("proc: %s %q: %w", label, abs, err)
	}
	fi, err := os.Stat(real)
	if err != nil {
		return "", fmt.Errorf("proc: %s %q: %w", label, abs, err)
	}
	if !fi.IsDir() {
		return "", fmt.Errorf("proc: %s %q is not a directory", label, abs)
	}
	if err := unix.Access(real, unix.X_OK); err != nil {
		return "", fmt.Errorf("proc: %s %q is not enterable: %w", label, abs, err)
	}
	return real, nil
}
