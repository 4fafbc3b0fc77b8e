package fs

import (
	"os"
	"strings"
	"testing"
)

const goFile = `package main

import "fmt"

func main() {
	fmt.Println("hello")
	fmt.Println("hello")
}
`

func TestEdit(t *testing.T) {
	tests := []struct {
		name    string
		initial string // "" with noFile: the file does not exist
		noFile  bool
		args    map[string]any
		want    string // exact result text (PATH for the path)
		content string
		diff    string // exact Meta diff, without the ---/+++ header
	}{
		{"unique replacement", goFile, false,
			map[string]any{"old_string": "import \"fmt\"", "new_string": "import (\n\t\"fmt\"\n\t\"os\"\n)"},
			"Edited PATH: replaced 1 occurrence.\nThe edited region now reads:\n" +
				strings.TrimSuffix(numbered(1, "package main", "", "import (", "\t\"fmt\"", "\t\"os\"", ")", "", "func main() {", "\tfmt.Println(\"hello\")"), "\n"),
			strings.Replace(goFile, `import "fmt"`, "import (\n\t\"fmt\"\n\t\"os\"\n)", 1),
			"@@ -1,6 +1,9 @@\n package main\n \n-import \"fmt\"\n+import (\n+\t\"fmt\"\n+\t\"os\"\n+)\n \n func main() {\n \tfmt.Println(\"hello\")\n"},
		{"replace all", goFile, false,
			map[string]any{"old_string": "hello", "new_string": "bye", "replace_all": true},
			"Edited PATH: replaced 2 occurrences.\nThe edited region now reads:\n" +
				strings.TrimSuffix(numbered(3, "import \"fmt\"", "", "func main() {", "\tfmt.Println(\"bye\")", "\tfmt.Println(\"bye\")", "}"), "\n"),
			strings.ReplaceAll(goFile, "hello", "bye"),
			"@@ -3,6 +3,6 @@\n import \"fmt\"\n \n func main() {\n-\tfmt.Println(\"hello\")\n-\tfmt.Println(\"hello\")\n+\tfmt.Println(\"bye\")\n+\tfmt.Println(\"bye\")\n }\n"},
		{"delete lines", "a\nb\nc\n", false,
			map[string]any{"old_string": "b\n", "new_string": ""},
			"Edited PATH: replaced 1 occurrence.\nThe edited region now reads:\n" + strings.TrimSuffix(numbered(1, "a", "c"), "\n"),
			"a\nc\n", "@@ -1,3 +1,2 @@\n a\n-b\n c\n"},
		{"two matches on one line", "x = a + a\n", false,
			map[string]any{"old_string": "a", "new_string": "b", "replace_all": true},
			"Edited PATH: replaced 2 occurrences.\nThe edited region now reads:\n     1\tx = b + b",
			"x = b + b\n", "@@ -1,1 +1,1 @@\n-x = a + a\n+x = b + b\n"},
		{"crlf file keeps crlf", "one\r\ntwo\r\nthree\r\n", false,
			map[string]any{"old_string": "one\ntwo\n", "new_string": "1\n2\n2.5\n"},
			"Edited PATH: replaced 1 occurrence.\nThe edited region now reads:\n" + strings.TrimSuffix(numbered(1, "1", "2", "2.5", "three"), "\n"),
			"1\r\n2\r\n2.5\r\nthree\r\n", "@@ -1,3 +1,4 @@\n-one\n-two\n+1\n+2\n+2.5\n three\n"},
		{"empty old_string on an empty file", "", false,
			map[string]any{"old_string": "", "new_string": "first\n"},
			"Edited PATH: replaced 1 occurrence.\nThe edited region now reads:\n     1\tfirst",
			"first\n", "@@ -0,0 +1,1 @@\n+first\n"},
		{"empty old_string creates a file", "", true,
			map[string]any{"old_string": "", "new_string": "new\nfile"},
			"Created PATH (2 lines).\nThe edited region now reads:\n" + strings.TrimSuffix(numbered(1, "new", "file"), "\n"),
			"new\nfile", "@@ -0,0 +1,2 @@\n+new\n+file\n"},
		{"no final newline", "a\nb", false,
			map[string]any{"old_string": "b", "new_string": "B"},
			"Edited PATH: replaced 1 occurrence.\nThe edited region now reads:\n" + strings.TrimSuffix(numbered(1, "a", "B"), "\n"),
			"a\nB", "@@ -1,2 +1,2 @@\n a\n-b\n+B\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, Options{})
			path := h.path("f.go")
			if !tt.noFile {
				h.write(t, "f.go", tt.initial)
				h.mustRun(t, NameRead, map[string]any{"file_path": "f.go"})
			}
			tt.args["file_path"] = "f.go"
			r := h.run(t, NameEdit, tt.args)
			if want := strings.ReplaceAll(tt.want, "PATH", path); r.IsError || text(r) != want {
				t.Fatalf("got isError=%v\n%s\nwant\n%s", r.IsError, text(r), want)
			}
			if got := h.content(t, "f.go"); got != tt.content {
				t.Fatalf("content %q; want %q", got, tt.content)
			}
			m := metaOf[editMeta](t, r)
			header := "--- " + path + "\n+++ " + path + "\n"
			if m.Path != path || m.Diff != header+tt.diff {
				t.Fatalf("meta path %s diff\n%s\nwant\n%s", m.Path, m.Diff, header+tt.diff)
			}
		})
	}
}

func TestEditRefused(t *testing.T) {
	tests := []struct {
		name  string
		read  bool // read the file before the edit
		after string
		args  map[string]any
		code  string
		subs  []string
	}{
		{"not read", false, "", map[string]any{"old_string": "hello", "new_string": "x"}, CodeNotRead, []string{"has not been read"}},
		{"stale read", true, goFile + "// appended\n", map[string]any{"old_string": "main", "new_string": "x"}, CodeStaleRead, []string{"changed since it was last read"}},
		{"not unique", true, "", map[string]any{"old_string": "fmt.Println(\"hello\")", "new_string": "x"}, CodeNotUnique,
			[]string{"occurs 2 times", "at lines 6, 7", "replace_all"}},
		{"no match", true, "", map[string]any{"old_string": "goodbye", "new_string": "x"}, CodeNoMatch, []string{"not found", "copy the text"}},
		{"no match: whitespace differs", true, "", map[string]any{"old_string": "func main() {\n    fmt.Println", "new_string": "x"}, CodeNoMatch,
			[]string{"Line 5 has the text of the first line"}},
		{"no match: line-number prefixes", true, "", map[string]any{"old_string": "     5\tfunc main() {\n     6\t\tfmt", "new_string": "x"}, CodeNoMatch,
			[]string{"line-number prefixes"}},
		{"identical strings", true, "", map[string]any{"old_string": "main", "new_string": "main"}, "INVALID_ARGS", []string{"identical"}},
		{"empty old_string on a non-empty file", true, "", map[string]any{"old_string": "", "new_string": "x"}, "INVALID_ARGS", []string{"old_string is empty"}},
		{"missing new_string", true, "", map[string]any{"old_string": "main"}, "INVALID_ARGS", []string{"new_string is required"}},
		{"replace_all not a bool", true, "", map[string]any{"old_string": "main", "new_string": "x", "replace_all": "yes"}, "INVALID_ARGS", []string{"replace_all must be true or false"}},
		{"too large", true, "", map[string]any{"old_string": "main", "new_string": "x"}, CodeFileTooLarge, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := Options{}
			if tt.code == CodeFileTooLarge {
				opts.MaxEditBytes = 10
			}
			h := newHarness(t, opts)
			h.write(t, "f.go", goFile)
			if tt.read {
				h.mustRun(t, NameRead, map[string]any{"file_path": "f.go"})
			}
			want := goFile
			if tt.after != "" {
				h.write(t, "f.go", tt.after)
				want = tt.after
			}
			tt.args["file_path"] = "f.go"
			wantError(t, h.run(t, NameEdit, tt.args), tt.code, tt.subs...)
			if got := h.content(t, "f.go"); got != want {
				t.Fatalf("refused edit changed the file: %q", got)
			}
		})
	}
	t.Run("missing file", func(t *testing.T) {
		h := newHarness(t, Options{})
		wantError(t, h.run(t, NameEdit, map[string]any{"file_path": "nope.go", "old_string": "a", "new_string": "b"}), CodeFileNotFound)
	})
	t.Run("directory", func(t *testing.T) {
		h := newHarness(t, Options{})
		wantError(t, h.run(t, NameEdit, map[string]any{"file_path": ".", "old_string": "a", "new_string": "b"}), CodeIsDirectory)
	})
}

// TestConsecutiveEdits checks that an edit records the new state, so the
// next edit needs no read, while an outside change in between is caught.
func TestConsecutiveEdits(t *testing.T) {
	h := newHarness(t, Options{})
	h.write(t, "f.go", goFile)
	h.mustRun(t, NameRead, map[string]any{"file_path": "f.go"})
	h.mustRun(t, NameEdit, map[string]any{"file_path": "f.go", "old_string": "package main", "new_string": "package app"})
	h.mustRun(t, NameEdit, map[string]any{"file_path": "f.go", "old_string": "hello", "new_string": "hi", "replace_all": true})
	if got, want := h.content(t, "f.go"), strings.ReplaceAll(strings.Replace(goFile, "main", "app", 1), "hello", "hi"); got != want {
		t.Fatalf("content %q", got)
	}
	if err := os.WriteFile(h.path("f.go"), []byte("outside\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	wantError(t, h.run(t, NameEdit, map[string]any{"file_path": "f.go", "old_string": "outside", "new_string": "x"}), CodeStaleRead)
	// Another session's reads do not count for this one.
	h.session = "sess-2"
	wantError(t, h.run(t, NameEdit, map[string]any{"file_path": "f.go", "old_string": "outside", "new_string": "x"}), CodeNotRead)
	h.tracker.Forget("sess-1")
	h.session = "sess-1"
	wantError(t, h.run(t, NameEdit, map[string]any{"file_path": "f.go", "old_string": "outside", "new_string": "x"}), CodeNotRead)
}
