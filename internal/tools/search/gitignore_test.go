package search

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestRuleMatch checks single rules against the examples and statements
// of gitignore(5).
func TestRuleMatch(t *testing.T) {
	tests := []struct {
		pattern string
		path    string
		dir     bool
		want    bool
	}{
		// "hello.*" matches any file or directory whose name begins with hello.
		{"hello.*", "hello.c", false, true},
		{"hello.*", "a/b/hello.txt", false, true},
		{"hello.*", "hello.d", true, true},
		{"hello.*", "hello", false, false},
		// A trailing slash matches directories only.
		{"foo/", "foo", true, true},
		{"foo/", "foo", false, false},
		{"frotz/", "a/frotz", true, true},
		// A slash at the start or middle anchors the pattern.
		{"doc/frotz/", "doc/frotz", true, true},
		{"doc/frotz/", "a/doc/frotz", true, false},
		{"/*.c", "cat-file.c", false, true},
		{"/*.c", "mozilla-sha1/sha1.c", false, false},
		{"*.c", "mozilla-sha1/sha1.c", false, true},
		// "foo/*" matches foo/test.json and foo/bar, not foo/bar/hello.c.
		{"foo/*", "foo/test.json", false, true},
		{"foo/*", "foo/bar", true, true},
		{"foo/*", "foo/bar/hello.c", false, false},
		// Leading, trailing and middle "**".
		{"**/foo", "foo", false, true},
		{"**/foo", "a/b/foo", true, true},
		{"**/foo/bar", "foo/bar", false, true},
		{"**/foo/bar", "x/foo/bar", false, true},
		{"**/foo/bar", "x/foo/y/bar", false, false},
		{"abc/**", "abc", true, false},
		{"abc/**", "abc/x", false, true},
		{"abc/**", "abc/x/y", false, true},
		{"a/**/b", "a/b", false, true},
		{"a/**/b", "a/x/b", false, true},
		{"a/**/b", "a/x/y/b", true, true},
		{"a/**/b", "a/x/y/c", false, false},
		{"**", "any/thing", false, true},
		// Other consecutive asterisks are plain stars.
		{"ab**cd", "abXYcd", false, true},
		{"x/ab**cd", "x/ab/cd", false, false},
		// * and ? never match a slash.
		{"a?c", "abc", false, true},
		{"x/a?c", "x/a/c", false, false},
		{"x/a*", "x/a/b", false, false},
		{"caf?", "café", false, false}, // bytes, as git and rg match
		{"caf??", "café", false, true},
		// Bracket expressions.
		{"file[0-9].txt", "file5.txt", false, true},
		{"file[0-9].txt", "filex.txt", false, false},
		{"[!a]*.txt", "b.txt", false, true},
		{"[!a]*.txt", "a.txt", false, false},
		{"[^a]*.txt", "a.txt", false, false},
		{"[[:digit:]]x", "7x", false, true},
		{"[[:digit:]]x", "ax", false, false},
		{"[[:upper:][:digit:]]", "Q", false, true},
		{"[]]", "]", false, true},
		{"[a-]", "-", false, true},
		{"[unclosed", "u", false, false},
		{"[[:nope:]]", "n", false, false},
		// Escapes.
		{`\#file`, "#file", false, true},
		{`\!important`, "!important", false, true},
		{`\*`, "*", false, true},
		{`\*`, "a", false, false},
		{`a\[b]`, "a[b]", false, true},
		{`foo\ `, "foo ", false, true},
		{"foo  ", "foo", false, true},
		{"foo\r", "foo", false, true},
		{`trailing\`, "trailing", false, false},
	}
	for _, tc := range tests {
		r, ok := parseRule(tc.pattern)
		if !ok {
			t.Errorf("parseRule(%q) rejected", tc.pattern)
			continue
		}
		if got := r.match(strings.Split(tc.path, "/"), tc.dir); got != tc.want {
			t.Errorf("%q matching %q (dir=%v) = %v, want %v", tc.pattern, tc.path, tc.dir, got, tc.want)
		}
	}
}

func TestParseRule(t *testing.T) {
	tests := []struct {
		line                      string
		ok                        bool
		negate, dirOnly, anchored bool
		segs                      []string
	}{
		{"", false, false, false, false, nil},
		{"   ", false, false, false, false, nil},
		{"# comment", false, false, false, false, nil},
		{"!", false, false, false, false, nil},
		{"/", false, false, false, false, nil},
		{"*.log", true, false, false, false, []string{"*.log"}},
		{"!keep.log", true, true, false, false, []string{"keep.log"}},
		{"build/", true, false, true, false, []string{"build"}},
		{"/build", true, false, false, true, []string{"build"}},
		{"a/b", true, false, false, true, []string{"a", "b"}},
		{"**/b", true, false, false, false, []string{"b"}},
		{"!/a/**/", true, true, true, true, []string{"a", "**"}},
		{`\!x`, true, false, false, false, []string{`\!x`}},
	}
	for _, tc := range tests {
		r, ok := parseRule(tc.line)
		if ok != tc.ok {
			t.Errorf("parseRule(%q) ok = %v, want %v", tc.line, ok, tc.ok)
			continue
		}
		if !ok {
			continue
		}
		if r.negate != tc.negate || r.dirOnly != tc.dirOnly || r.anchored != tc.anchored || !slices.Equal(r.segs, tc.segs) {
			t.Errorf("parseRule(%q) = %+v, want negate=%v dirOnly=%v anchored=%v segs=%q",
				tc.line, r, tc.negate, tc.dirOnly, tc.anchored, tc.segs)
		}
	}
	if rules := parseIgnore([]byte("\xef\xbb\xbf*.a\r\n\n# c\nb/\n")); len(rules) != 2 || rules[0].segs[0] != "*.a" {
		t.Errorf("BOM, CRLF and comments: %+v", rules)
	}
}

// listed walks root with every hidden entry allowed and returns the files
// it visits, relative to root.
func listed(t *testing.T, root string) []string {
	t.Helper()
	var got []string
	err := walk(t.Context(), &walkSpec{root: root, visit: func(f fileRef) error {
		got = append(got, f.rel)
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// TestWalkIgnores checks whole trees: several ignore files, precedence
// and the repository boundary.
func TestWalkIgnores(t *testing.T) {
	tests := []struct {
		name  string
		tree  map[string]string
		under string // walk root within the tree
		want  []string
	}{
		{"negation re-includes", map[string]string{
			".gitignore": "*.log\n!keep.log\n", "a.log": "", "keep.log": "", "x.txt": "",
		}, "", []string{".gitignore", "keep.log", "x.txt"}},
		{"no re-include inside an excluded directory", map[string]string{
			".gitignore": "build/\n!build/keep.txt\n", "build/keep.txt": "", "src/a.go": "",
		}, "", []string{".gitignore", "src/a.go"}},
		{"directory negation after a catch-all", map[string]string{
			".gitignore": "/*\n!/src/\n!.gitignore\n", "b.txt": "", "src/a.go": "", "src/deep/c.go": "",
		}, "", []string{".gitignore", "src/a.go", "src/deep/c.go"}},
		{"deeper file wins", map[string]string{
			".gitignore": "*.gen\n", "sub/.gitignore": "!keep.gen\n", "sub/keep.gen": "", "sub/other.gen": "", "top.gen": "",
		}, "", []string{".gitignore", "sub/.gitignore", "sub/keep.gen"}},
		{"anchored to the file's directory", map[string]string{
			"sub/.gitignore": "/only.txt\n", "sub/only.txt": "", "sub/deep/only.txt": "", "only.txt": "",
		}, "", []string{"only.txt", "sub/.gitignore", "sub/deep/only.txt"}},
		{"directory-only pattern", map[string]string{
			".gitignore": "logs/\n", "logs": "a file", "a/logs/x": "",
		}, "", []string{".gitignore", "logs"}},
		{"middle doublestar", map[string]string{
			".gitignore": "a/**/b\n", "a/b/f": "", "a/x/y/b/f": "", "a/x/c": "",
		}, "", []string{".gitignore", "a/x/c"}},
		{"git dir and file skipped, exclude honoured", map[string]string{
			".git/info/exclude": "*.tmp\n", ".git/HEAD": "", "a.tmp": "", "a.txt": "", "mod/.git": "gitdir: ../.git/modules/mod\n", "mod/m.go": "",
		}, "", []string{"a.txt", "mod/m.go"}},
		{"parents up to the repository root apply", map[string]string{
			".gitignore": "*.txt\n", "repo/.git/": "", "repo/.gitignore": "*.md\n", "repo/sub/.gitignore": "*.c\n",
			"repo/sub/x.md": "", "repo/sub/x.txt": "", "repo/sub/x.c": "", "repo/sub/x.go": "",
		}, "repo/sub", []string{".gitignore", "x.go", "x.txt"}},
		{"outside a repository parents do not apply", map[string]string{
			".gitignore": "*.md\n", "sub/x.md": "", "sub/y.go": "",
		}, "sub", []string{"x.md", "y.go"}},
		{"nested repository starts afresh", map[string]string{
			".git/": "", ".gitignore": "*.md\n", "a.md": "", "nested/.git/": "", "nested/x.md": "",
			"nested/.gitignore": "*.go\n", "nested/y.go": "", "nested/z.txt": "",
		}, "", []string{".gitignore", "nested/.gitignore", "nested/x.md", "nested/z.txt"}},
		{"worktree .git file points at the exclude file", map[string]string{
			"main/info/exclude": "*.tmp\n", "wt/.git": "gitdir: ../main/worktrees/wt\n", "main/worktrees/wt/commondir": "../..\n",
			"wt/a.tmp": "", "wt/a.go": "",
		}, "wt", []string{"a.go"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			writeTree(t, dir, tc.tree)
			got := listed(t, filepath.Join(dir, tc.under))
			if !slices.Equal(got, tc.want) {
				t.Errorf("visible files\n got %q\nwant %q", got, tc.want)
			}
		})
	}
}

// TestWalkMatchesGit compares the walk with git's own view of a tree full
// of ignore rules: the untracked files git does not ignore.
func TestWalkMatchesGit(t *testing.T) {
	git, err := exec.LookPath("git")
	if err != nil {
		t.Skip("git is not installed")
	}
	dir := t.TempDir()
	run := func(args ...string) string {
		cmd := exec.Command(git, args...)
		cmd.Dir = dir
		// No user or system configuration: a global excludes file would
		// change the answer.
		cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "HOME="+dir)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("git %v: %v", args, err)
		}
		return string(out)
	}
	run("init", "-q")
	writeTree(t, dir, map[string]string{
		".git/info/exclude": "*.excluded\n",
		".gitignore": "# build output\n/build/\n*.o\n!important.o\nlogs/\n**/tmp/**\ndocs/**/*.draft\n" +
			"\\#hash\nspace\\ \n*.[ch]~\nfile[0-9].dat\n[!x]y.z\ncache*/\n/root-only.txt\n",
		"a.c": "", "a.c~": "", "b.h~": "", "x.o": "", "important.o": "", "z.excluded": "",
		"build/out.bin": "", "sub/build/kept.txt": "", "logs/l.txt": "", "sub/logs/l.txt": "",
		"tmp/t.txt": "", "deep/tmp/inner/t.txt": "", "deep/tmpx/t.txt": "",
		"docs/a.draft": "", "docs/x/y/b.draft": "", "docs/x/c.md": "", "a.draft": "",
		"#hash": "", "space ": "", "space": "", "file5.dat": "", "fileX.dat": "", "ay.z": "", "by.z": "", "xy.z": "",
		"cache1/c": "", "cachefile": "", "root-only.txt": "", "sub/root-only.txt": "",
		"sub/.gitignore": "!x.o\n*.md\n/anchored\n", "sub/x.o": "", "sub/y.md": "", "sub/anchored": "", "sub/deeper/anchored": "",
		"sub/deeper/.gitignore": "!y.md\n", "sub/deeper/y.md": "", ".hidden/h.txt": "", ".env": "",
		"unicode/café.txt": "", "unicode/.gitignore": "caf?.txt\n",
	})
	out := run("ls-files", "--others", "--exclude-standard", "-z")
	want := strings.Split(strings.TrimRight(out, "\x00"), "\x00")
	slices.SortFunc(want, comparePaths)
	got := listed(t, dir)
	if !slices.Equal(got, want) {
		t.Errorf("walk differs from git ls-files --others --exclude-standard\n got %q\nwant %q", got, want)
	}
}
