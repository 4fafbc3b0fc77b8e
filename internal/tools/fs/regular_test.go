//go:build unix

package fs

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/dsh-dev/dsh/internal/tool"
)

func errCode(err error) string {
	var te *tool.Error
	if errors.As(err, &te) {
		return te.Code
	}
	return ""
}

// mkfifo makes a FIFO no one writes to: opening it for reading without
// O_NONBLOCK, or reading it, would block forever.
func mkfifo(t *testing.T, path string) {
	t.Helper()
	if err := syscall.Mkfifo(path, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestFileToolsRefuseFIFO calls every file tool on a FIFO with no writer:
// each returns NOT_REGULAR_FILE at once instead of blocking the turn.
func TestFileToolsRefuseFIFO(t *testing.T) {
	h := newHarness(t, Options{Images: func(*tool.Call) bool { return true }})
	fifo := h.path("pipe")
	mkfifo(t, fifo)
	calls := []struct {
		name string
		args map[string]any
	}{
		{NameRead, map[string]any{"file_path": "pipe"}},
		{NameReadImage, map[string]any{"file_path": "pipe"}},
		{NameWrite, map[string]any{"file_path": "pipe", "content": "x"}},
		{NameEdit, map[string]any{"file_path": "pipe", "old_string": "a", "new_string": "b"}},
		{NameEdit, map[string]any{"file_path": "pipe", "old_string": "", "new_string": "b"}},
	}
	for _, c := range calls {
		wantError(t, h.run(t, c.name, c.args), CodeNotRegular, "named pipe (FIFO)", "not a regular file")
	}
	if fi, err := os.Lstat(fifo); err != nil || fi.Mode()&os.ModeNamedPipe == 0 {
		t.Fatalf("the FIFO was replaced: %v %v", fi, err)
	}
	if _, err := HashFile(fifo); err == nil {
		t.Fatal("HashFile of a FIFO succeeded")
	}
}

// TestOpenCheckedFIFO is the path swapped for a FIFO after the stat: the
// open itself must not block and the fstat must refuse it.
func TestOpenCheckedFIFO(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "pipe")
	mkfifo(t, fifo)
	f, _, err := openChecked(fifo)
	if err == nil {
		f.Close()
		t.Fatal("openChecked opened a FIFO")
	}
	if got := errCode(err); got != CodeNotRegular {
		t.Fatalf("code %q (%v), want %s", got, err, CodeNotRegular)
	}
}

func TestOpenRegularKinds(t *testing.T) {
	dir := t.TempDir()
	reg := filepath.Join(dir, "f")
	if err := os.WriteFile(reg, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	f, fi, err := OpenRegular(reg)
	if err != nil || !fi.Mode().IsRegular() {
		t.Fatalf("regular file: %v %v", fi, err)
	}
	f.Close()
	for path, want := range map[string]string{
		dir:                          CodeIsDirectory,
		"/dev/null":                  CodeNotRegular,
		filepath.Join(dir, "absent"): CodeFileNotFound,
	} {
		if _, _, err := OpenRegular(path); errCode(err) != want {
			t.Errorf("OpenRegular(%s): %v, want %s", path, err, want)
		}
	}
}

// TestWriteThroughHardLinkBreaksIt: without any fence, the atomic
// rename gives the written name a new inode, so the file's other name
// keeps its content (the fence refuses such writes outright; see the
// permission package's tests).
func TestWriteThroughHardLinkBreaksIt(t *testing.T) {
	h := newHarness(t, Options{})
	outside := filepath.Join(t.TempDir(), "outside.txt")
	if err := os.WriteFile(outside, []byte("secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(outside, h.path("planted.txt")); err != nil {
		t.Fatal(err)
	}
	h.mustRun(t, NameRead, map[string]any{"file_path": "planted.txt"})
	h.mustRun(t, NameEdit, map[string]any{"file_path": "planted.txt", "old_string": "secret", "new_string": "changed"})
	if b, err := os.ReadFile(outside); err != nil || string(b) != "secret\n" {
		t.Fatalf("outside file now %q %v", b, err)
	}
	fi, err := os.Stat(h.path("planted.txt"))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("edited file mode %v %v, want 0600 kept", fi, err)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Nlink != 1 {
		t.Fatalf("edited name still has %d links", st.Nlink)
	}
}

// TestEditKeepsMode: edit writes through a temporary file and a rename
// and carries the mode bits over.
func TestEditKeepsMode(t *testing.T) {
	h := newHarness(t, Options{})
	p := h.write(t, "run.sh", "#!/bin/sh\necho a\n")
	if err := os.Chmod(p, 0o751); err != nil {
		t.Fatal(err)
	}
	before, _ := os.Stat(p)
	h.mustRun(t, NameRead, map[string]any{"file_path": "run.sh"})
	h.mustRun(t, NameEdit, map[string]any{"file_path": "run.sh", "old_string": "echo a", "new_string": "echo b"})
	after, err := os.Stat(p)
	if err != nil || after.Mode().Perm() != 0o751 {
		t.Fatalf("mode after edit %v %v", after, err)
	}
	if os.SameFile(before, after) {
		t.Fatal("edit wrote in place; it must write a new file and rename it")
	}
	if got := h.content(t, "run.sh"); got != "#!/bin/sh\necho b\n" {
		t.Fatalf("content %q", got)
	}
}
