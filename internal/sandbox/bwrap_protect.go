package sandbox

import (
	"os"
	"path/filepath"
	"slices"
)

// pinParents binds every directory between a writable root and a
// protected path beneath it (scripts/ for scripts/check.sh) onto itself,
// writable: a mount point cannot be renamed or removed (EBUSY), so a
// command cannot move the directory holding a read-only bind aside and
// put a directory of its own, with a rewritten file, at the protected
// name. The directories stay writable for everything else. The entries
// right under a root need nothing: they are mount points themselves.
func pinParents(l layout) []string {
	var dirs []string
	for _, g := range l.protected {
		if l.reads.denied(g) {
			continue
		}
		root := withinAny(g, slices.Concat(l.roots, l.temps))
		if root == "" {
			continue
		}
		for d := filepath.Dir(g); d != root && within(d, root); d = filepath.Dir(d) {
			if fi, err := os.Lstat(d); err == nil && fi.IsDir() {
				dirs = append(dirs, d)
			}
		}
	}
	// Parents first, each once.
	slices.Sort(dirs)
	var args []string
	for _, d := range slices.Compact(dirs) {
		args = append(args, "--bind", d, d)
	}
	return args
}
