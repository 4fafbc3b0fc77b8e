// Package workspace answers questions about the directory a session works
// in that several subsystems share (instructions, skills, and later the
// sandbox), and holds the workspace registry ([Registry]): the
// directories dsh serve's clients group sessions by.
package workspace

import (
	"os"
	"path/filepath"
)

// ProjectRoot returns the nearest ancestor of cwd (cwd included) that
// contains a .git entry (a directory, or a file in a worktree or
// submodule), or cwd itself when there is none.
func ProjectRoot(cwd string) string {
	cwd = filepath.Clean(cwd)
	for dir := cwd; ; {
		if _, err := os.Lstat(filepath.Join(dir, ".git")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return cwd
		}
		dir = parent
	}
}
