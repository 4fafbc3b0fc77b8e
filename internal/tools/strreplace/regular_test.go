//go:build unix

package strreplace

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	fstools "github.com/dsh-dev/dsh/internal/tools/fs"
)

// TestRefusesFIFO: view, str_replace and insert of a FIFO with no writer
// fail at once with NOT_REGULAR_FILE, and create does not replace it.
func TestRefusesFIFO(t *testing.T) {
	h := newHarness(t, Options{})
	if err := syscall.Mkfifo(h.path("pipe"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range []map[string]any{
		{"command": "view", "path": "pipe"},
		{"command": "str_replace", "path": "pipe", "old_str": "a", "new_str": "b"},
		{"command": "insert", "path": "pipe", "insert_line": 0, "new_str": "b"},
	} {
		r := h.run(t, Name, args)
		if !r.IsError || r.Error.Code != fstools.CodeNotRegular {
			t.Errorf("%v: %+v, want %s", args, r.Error, fstools.CodeNotRegular)
		}
	}
	if r := h.run(t, Name, map[string]any{"command": "create", "path": "pipe", "file_text": "x"}); !r.IsError || r.Error.Code != CodeFileExists {
		t.Errorf("create over a FIFO: %+v", r.Error)
	}
	if fi, err := os.Lstat(h.path("pipe")); err != nil || fi.Mode()&os.ModeNamedPipe == 0 {
		t.Fatalf("the FIFO was replaced: %v %v", fi, err)
	}
}

// TestEditsRenameAndKeepMode: str_replace and insert write a new file and
// rename it over the old name, keeping the mode; a hard-linked name is
// thereby unlinked from its other name, which keeps the old content.
func TestEditsRenameAndKeepMode(t *testing.T) {
	h := newHarness(t, Options{})
	outside := filepath.Join(t.TempDir(), "outside.txt")
	if err := os.WriteFile(outside, []byte("one\ntwo\n"), 0o640); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(outside, h.path("f.txt")); err != nil {
		t.Fatal(err)
	}
	before, _ := os.Stat(h.path("f.txt"))
	h.view(t, "f.txt")
	if r := h.run(t, Name, map[string]any{"command": "str_replace", "path": "f.txt", "old_str": "one", "new_str": "uno"}); r.IsError {
		t.Fatalf("str_replace: %+v", r.Error)
	}
	if r := h.run(t, Name, map[string]any{"command": "insert", "path": "f.txt", "insert_line": 2, "new_str": "three"}); r.IsError {
		t.Fatalf("insert: %+v", r.Error)
	}
	after, err := os.Stat(h.path("f.txt"))
	if err != nil || after.Mode().Perm() != 0o640 {
		t.Fatalf("mode after edits %v %v", after, err)
	}
	if os.SameFile(before, after) {
		t.Fatal("edited in place; it must write a new file and rename it")
	}
	if got := h.content(t, "f.txt"); got != "uno\ntwo\nthree\n" {
		t.Fatalf("content %q", got)
	}
	if b, _ := os.ReadFile(outside); string(b) != "one\ntwo\n" {
		t.Fatalf("the other name changed: %q", b)
	}
}
