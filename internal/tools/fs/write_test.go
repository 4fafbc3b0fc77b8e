package fs

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestWrite(t *testing.T) {
	tests := []struct {
		name    string
		setup   func(t *testing.T, h *harness) // may create and read files
		args    map[string]any
		want    string // text, with PATH for the absolute path
		created bool
		content string // of the file afterwards
	}{
		{"new file", nil, map[string]any{"file_path": "new.txt", "content": "a\nb\n"},
			"Created PATH (4 bytes, 2 lines).", true, "a\nb\n"},
		{"new file in new directories", nil, map[string]any{"file_path": "x/y/z.txt", "content": "z"},
			"Created PATH (1 bytes, 1 lines).", true, "z"},
		{"empty new file", nil, map[string]any{"file_path": "empty", "content": ""},
			"Created PATH (0 bytes, 0 lines).", true, ""},
		{"overwrite after read", func(t *testing.T, h *harness) {
			h.write(t, "f.txt", "old\n")
			h.mustRun(t, NameRead, map[string]any{"file_path": "f.txt"})
		}, map[string]any{"file_path": "f.txt", "content": "new\ncontent\n"}, "Updated PATH (12 bytes, 2 lines).", false, "new\ncontent\n"},
		{"overwrite after a partial read", func(t *testing.T, h *harness) {
			h.write(t, "f.txt", linesFile(10))
			h.mustRun(t, NameRead, map[string]any{"file_path": "f.txt", "offset": 5, "limit": 1})
		}, map[string]any{"file_path": "f.txt", "content": "x"}, "Updated PATH (1 bytes, 1 lines).", false, "x"},
		{"overwrite after a touch", func(t *testing.T, h *harness) {
			h.write(t, "f.txt", "same\n")
			h.mustRun(t, NameRead, map[string]any{"file_path": "f.txt"})
			h.write(t, "f.txt", "same\n") // new mtime, same bytes
		}, map[string]any{"file_path": "f.txt", "content": "x"}, "Updated PATH (1 bytes, 1 lines).", false, "x"},
		{"second write needs no read", func(t *testing.T, h *harness) {
			h.mustRun(t, NameWrite, map[string]any{"file_path": "f.txt", "content": "first"})
		}, map[string]any{"file_path": "f.txt", "content": "second"}, "Updated PATH (6 bytes, 1 lines).", false, "second"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, Options{})
			if tt.setup != nil {
				tt.setup(t, h)
			}
			r := h.run(t, NameWrite, tt.args)
			path := h.path(tt.args["file_path"].(string))
			if want := strings.ReplaceAll(tt.want, "PATH", path); r.IsError || text(r) != want {
				t.Fatalf("got isError=%v %q; want %q", r.IsError, text(r), want)
			}
			if m := metaOf[writeMeta](t, r); m.Path != path || m.Created != tt.created || m.Bytes != len(tt.content) {
				t.Fatalf("meta %+v", m)
			}
			if got := h.content(t, tt.args["file_path"].(string)); got != tt.content {
				t.Fatalf("content %q; want %q", got, tt.content)
			}
			// No temporary files are left behind.
			entries, _ := os.ReadDir(filepath.Dir(path))
			for _, e := range entries {
				if strings.HasSuffix(e.Name(), ".tmp") {
					t.Fatalf("left over %s", e.Name())
				}
			}
		})
	}
}

func TestWriteRefused(t *testing.T) {
	tests := []struct {
		name  string
		setup func(t *testing.T, h *harness)
		args  map[string]any
		code  string
		subs  []string
	}{
		{"existing file never read", func(t *testing.T, h *harness) { h.write(t, "f.txt", "keep\n") },
			map[string]any{"file_path": "f.txt", "content": "x"}, CodeNotRead, []string{"has not been read", "Read it first"}},
		{"changed since read", func(t *testing.T, h *harness) {
			h.write(t, "f.txt", "keep\n")
			h.mustRun(t, NameRead, map[string]any{"file_path": "f.txt"})
			h.write(t, "f.txt", "changed by someone else\n")
		}, map[string]any{"file_path": "f.txt", "content": "x"}, CodeStaleRead, []string{"has changed since it was last read", "Read it again"}},
		{"read by another session", func(t *testing.T, h *harness) {
			h.write(t, "f.txt", "keep\n")
			h.tracker.Record("other-session", h.path("f.txt"), mustHash(t, h.path("f.txt")))
		}, map[string]any{"file_path": "f.txt", "content": "x"}, CodeNotRead, nil},
		{"directory", func(t *testing.T, h *harness) { h.write(t, "d/f.txt", "") },
			map[string]any{"file_path": "d", "content": "x"}, CodeIsDirectory, []string{"is a directory"}},
		{"parent is a file", func(t *testing.T, h *harness) { h.write(t, "file", "") },
			map[string]any{"file_path": "file/x.txt", "content": "x"}, "TOOL_FAILED", []string{"not a directory"}},
		{"missing content", nil, map[string]any{"file_path": "f.txt"}, "INVALID_ARGS", []string{"content is required"}},
		{"content not a string", nil, map[string]any{"file_path": "f.txt", "content": 12}, "INVALID_ARGS", []string{"content must be a string"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, Options{})
			var before string
			if tt.setup != nil {
				tt.setup(t, h)
				if b, err := os.ReadFile(h.path("f.txt")); err == nil {
					before = string(b)
				}
			}
			wantError(t, h.run(t, NameWrite, tt.args), tt.code, tt.subs...)
			if b, err := os.ReadFile(h.path("f.txt")); err == nil && string(b) != before {
				t.Fatalf("refused write changed the file to %q", b)
			}
		})
	}
}

func mustHash(t *testing.T, path string) FileState {
	t.Helper()
	st, err := HashFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func TestWriteKeepsModeAndSymlink(t *testing.T) {
	h := newHarness(t, Options{})
	script := h.write(t, "run.sh", "#!/bin/sh\n")
	if err := os.Chmod(script, 0o750); err != nil {
		t.Fatal(err)
	}
	target := h.write(t, "real/target.txt", "t\n")
	if err := os.Symlink(target, h.path("link.txt")); err != nil {
		t.Fatal(err)
	}
	h.mustRun(t, NameRead, map[string]any{"file_path": "run.sh"})
	h.mustRun(t, NameWrite, map[string]any{"file_path": "run.sh", "content": "#!/bin/sh\necho hi\n"})
	if fi, err := os.Stat(script); err != nil || fi.Mode().Perm() != 0o750 {
		t.Fatalf("mode after write: %v %v", fi.Mode(), err)
	}
	// Read through the link, write through the link: the target changes
	// and the link stays a link.
	h.mustRun(t, NameRead, map[string]any{"file_path": "link.txt"})
	h.mustRun(t, NameWrite, map[string]any{"file_path": "link.txt", "content": "via link\n"})
	if li, err := os.Lstat(h.path("link.txt")); err != nil || li.Mode()&os.ModeSymlink == 0 {
		t.Fatal("the symlink was replaced")
	}
	if got := h.content(t, "real/target.txt"); got != "via link\n" {
		t.Fatalf("target %q", got)
	}
	// The target was recorded too, so editing it directly needs no read.
	h.mustRun(t, NameEdit, map[string]any{"file_path": target, "old_string": "via", "new_string": "through"})
	if fi, err := os.Stat(h.path("new.txt")); err == nil {
		t.Fatalf("unexpected %v", fi)
	}
	h.mustRun(t, NameWrite, map[string]any{"file_path": "new.txt", "content": "n"})
	if fi, err := os.Stat(h.path("new.txt")); err != nil || fi.Mode().Perm() != newFilePerm {
		t.Fatalf("new file mode %v %v", fi.Mode(), err)
	}
}
