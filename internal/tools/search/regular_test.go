//go:build unix

package search

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	fstools "github.com/dsh-dev/dsh/internal/tools/fs"
)

// fifoTree is a directory with a FIFO no one writes to next to a text
// file: opening the FIFO for reading would block for ever.
func fifoTree(t *testing.T, fifos ...string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "a.txt"), []byte("hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, name := range fifos {
		if err := syscall.Mkfifo(filepath.Join(dir, name), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestGrepFIFO: a FIFO named as the path is refused at once, and one met
// while walking is skipped; neither blocks the call.
func TestGrepFIFO(t *testing.T) {
	for name, opts := range backends(t, Options{}) {
		t.Run(name, func(t *testing.T) {
			dir := fifoTree(t, "pipe")
			h := newHarness(t, dir, NewGrep(opts))
			r := h.call(t.Context(), t, GrepName, map[string]any{"pattern": "hello", "path": "pipe"})
			if code(r) != fstools.CodeNotRegular || !strings.Contains(h.text(r), "named pipe") {
				t.Fatalf("grep of a FIFO: %s %s", code(r), h.text(r))
			}
			for _, mode := range []string{"files_with_matches", "content", "count"} {
				r = h.call(t.Context(), t, GrepName, map[string]any{"pattern": "hello", "output_mode": mode})
				if r.IsError || !strings.Contains(h.text(r), "a.txt") || strings.Contains(h.text(r), "pipe") {
					t.Errorf("%s: %s", mode, h.text(r))
				}
			}
		})
	}
}

// TestWalkIgnoresFIFOIgnoreFiles: a FIFO planted as .gitignore, as
// info/exclude or as a .git pointer file does not hang the Go walker
// (grep's Go backend and glob). rg reads such a .gitignore itself and
// blocks until the call's time limit; that case is left to the limit.
func TestWalkIgnoresFIFOIgnoreFiles(t *testing.T) {
	dir := fifoTree(t, ".gitignore", ".git")
	sub := filepath.Join(dir, "sub")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(sub, ".gitignore"), 0o644); err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, dir, NewGrep(Options{NoRipgrep: true}), NewGlob(Options{}))
	if r := h.call(t.Context(), t, GrepName, map[string]any{"pattern": "hello"}); r.IsError || !strings.Contains(h.text(r), "a.txt") {
		t.Errorf("grep: %s", h.text(r))
	}
	if r := h.call(t.Context(), t, GlobName, map[string]any{"pattern": "**/*.txt"}); r.IsError || !strings.Contains(h.text(r), "a.txt") {
		t.Errorf("glob: %s", h.text(r))
	}
	if g := gitDir(dir); g != "" {
		t.Errorf("gitDir through a FIFO .git: %q", g)
	}
}

func TestOpenRegularRefusesFIFO(t *testing.T) {
	dir := fifoTree(t, "pipe")
	if _, _, err := openRegular(filepath.Join(dir, "pipe")); !errors.Is(err, errNotRegular) {
		t.Fatalf("openRegular(FIFO) = %v", err)
	}
	if _, ok := readCandidate(fstools.Fence{}, filepath.Join(dir, "pipe"), 1<<20, nil); ok {
		t.Fatal("readCandidate accepted a FIFO")
	}
	if data, ok := readCandidate(fstools.Fence{}, filepath.Join(dir, "a.txt"), 1<<20, nil); !ok || string(data) != "hello\n" {
		t.Fatalf("readCandidate of a regular file: %q %v", data, ok)
	}
}
