package search

import (
	"io/fs"
	"path/filepath"
)

// IgnoreDir is the git ignore rules in force in one directory, for other
// tools that walk a tree the way grep and glob do (the editor's directory
// view): the rules of the enclosing repository (its .gitignore files and
// info/exclude), or outside a repository those of the walk root's own
// .gitignore. A directory holding its own .git starts a fresh rule set.
// The zero value ignores nothing. Values are immutable and cheap to copy.
type IgnoreDir struct {
	dir string
	st  walkState
}

// IgnoreRoot returns the rules in force in dir, the root of a walk.
func IgnoreRoot(dir string) IgnoreDir {
	return IgnoreDir{dir: dir, st: rootState(dir)}
}

// Ignored reports whether the entry name of the directory is ignored.
func (d IgnoreDir) Ignored(name string, isDir bool) bool {
	if d.st.g == nil {
		return false
	}
	return d.st.g.ignored(d.child(name), isDir)
}

// Enter returns the rules in force in the subdirectory name, whose
// entries (as os.ReadDir returns them) may hold a .gitignore or a .git.
func (d IgnoreDir) Enter(name string, entries []fs.DirEntry) IgnoreDir {
	if d.st.g == nil {
		return d
	}
	abs := filepath.Join(d.dir, name)
	st := walkState{g: d.st.g, gsegs: d.child(name)}
	return IgnoreDir{dir: abs, st: enterDir(abs, entries, st)}
}

// child returns the segments of the entry name, in a fresh slice.
func (d IgnoreDir) child(name string) []string {
	segs := make([]string, 0, len(d.st.gsegs)+1)
	return append(append(segs, d.st.gsegs...), name)
}
