package strreplace

import (
	"strings"
	"testing"
)

// viewDir returns the listing lines of a directory view, the header and
// the root line removed, with h.dir replaced by "~".
func viewDir(t *testing.T, h *harness, path string) []string {
	t.Helper()
	r := h.run(t, Name, map[string]any{"command": "view", "path": path})
	if r.IsError {
		t.Fatal(text(r))
	}
	lines := strings.Split(strings.ReplaceAll(text(r), h.dir, "~"), "\n")
	if !strings.HasSuffix(lines[0], "excluding hidden items and the contents of ignored directories:") {
		t.Fatalf("header %q", lines[0])
	}
	return lines[2:]
}

// TestViewDirectoryIgnored: ignored directories are listed on one line,
// marked, and not entered: those git ignores (the repository's
// .gitignore files, also above the viewed directory, and info/exclude),
// node_modules and __pycache__ always, and directories tagged as caches
// or holding a virtual environment. Ignored files are still listed, and
// a view inside an ignored tree lists it.
func TestViewDirectoryIgnored(t *testing.T) {
	h := newHarness(t, Options{})
	for _, f := range []string{
		".git/info/exclude", ".gitignore", "a.log", "main.go",
		"build/out.o", "dist/app.js", "vendor/mod/a.go", "vendor/mod/deep/b.go",
		"node_modules/pkg/index.js", "node_modules/.bin/x",
		"target/CACHEDIR.TAG", "target/debug/app",
		"env/pyvenv.cfg", "env/bin/python",
		"src/.gitignore", "src/main.py", "src/__pycache__/main.pyc", "src/gen/g.py", "src/tmp/t", "src/lib/l.py",
		"src/local/x",
	} {
		h.write(t, f, "")
	}
	h.write(t, ".gitignore", "build/\n*.log\ngen/\n")
	h.write(t, ".git/info/exclude", "local/\n")
	h.write(t, "src/.gitignore", "tmp/\n")
	const ig = "/ (ignored: contents not listed)"
	want := []string{
		"~/a.log", "~/build" + ig,
		"~/dist/", "~/dist/app.js", // not ignored here: dist may be sources
		"~/env" + ig, "~/main.go", "~/node_modules" + ig,
		"~/src/", "~/src/__pycache__" + ig, "~/src/gen" + ig, "~/src/lib/", "~/src/local" + ig, "~/src/main.py", "~/src/tmp" + ig,
		"~/target" + ig,
		"~/vendor/", "~/vendor/mod/", // a Go vendor tree is source
	}
	if got := viewDir(t, h, "."); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// Viewing a subdirectory still applies the rules above it.
	want = []string{"~/src/__pycache__" + ig, "~/src/gen" + ig, "~/src/lib/", "~/src/lib/l.py", "~/src/local" + ig, "~/src/main.py", "~/src/tmp" + ig}
	if got := viewDir(t, h, "src"); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("src: got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// Asked for explicitly, an ignored tree is listed.
	want = []string{"~/node_modules/pkg/", "~/node_modules/pkg/index.js"}
	if got := viewDir(t, h, "node_modules"); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("node_modules: got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	// Outside a repository, the viewed directory's own .gitignore counts.
	o := newHarness(t, Options{})
	for _, f := range []string{".gitignore", "out/x", "keep/y"} {
		o.write(t, f, "")
	}
	o.write(t, ".gitignore", "out\n")
	want = []string{"~/keep/", "~/keep/y", "~/out" + ig}
	if got := viewDir(t, o, "."); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("no repository: got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
