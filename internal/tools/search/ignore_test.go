package search

import (
	"os"
	"path/filepath"
	"testing"
)

// TestIgnoreDir: the exported rule set answers as the walk does: rules
// above the root, nested .gitignore files on Enter, a nested repository
// restarting the rules, and the zero value ignoring nothing.
func TestIgnoreDir(t *testing.T) {
	repo := t.TempDir()
	files := map[string]string{
		".git/HEAD":            "",
		".gitignore":           "*.log\nout/\n",
		"a/.gitignore":         "tmp/\n",
		"a/sub/.git/HEAD":      "", // a nested repository
		"a/sub/.gitignore":     "only-here/\n",
		"a/sub/keep/.gitkeep":  "",
		"a/tmp/.gitkeep":       "",
		"a/out/.gitkeep":       "",
		"a/sub/only-here/.git": "",
	}
	writeTree(t, repo, files)
	read := func(p string) []os.DirEntry {
		e, err := os.ReadDir(filepath.Join(repo, p))
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	root := IgnoreRoot(repo)
	a := root.Enter("a", read("a"))
	sub := a.Enter("sub", read("a/sub"))
	fromA := IgnoreRoot(filepath.Join(repo, "a"))
	for _, tc := range []struct {
		name  string
		d     IgnoreDir
		entry string
		isDir bool
		want  bool
	}{
		{"root rule", root, "x.log", false, true},
		{"dir-only rule on a file", root, "out", false, false},
		{"root rule in a subdirectory", a, "out", true, true},
		{"nested .gitignore", a, "tmp", true, true},
		{"not ignored", a, "sub", true, false},
		{"a nested repository drops the outer rules", sub, "x.log", false, false},
		{"its own rules apply", sub, "only-here", true, true},
		{"rules above a walk root", fromA, "x.log", false, true},
		{"the walk root's own .gitignore", fromA, "tmp", true, true},
		{"zero value", IgnoreDir{}, "x.log", false, false},
	} {
		if got := tc.d.Ignored(tc.entry, tc.isDir); got != tc.want {
			t.Errorf("%s: Ignored(%q) = %v, want %v", tc.name, tc.entry, got, tc.want)
		}
	}
	if z := (IgnoreDir{}).Enter("a", read("a")); z.Ignored("x.log", false) {
		t.Error("Enter on the zero value added rules")
	}
}
