package workspace

import (
	"os"
	"path/filepath"
	"testing"
)

func TestProjectRoot(t *testing.T) {
	root := t.TempDir()
	deep := filepath.Join(root, "a", "b")
	if err := os.MkdirAll(deep, 0o755); err != nil {
		t.Fatal(err)
	}
	if got := ProjectRoot(deep); got != deep {
		t.Errorf("no repository: %s, want cwd %s", got, deep)
	}
	if err := os.WriteFile(filepath.Join(root, ".git"), []byte("gitdir: x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := ProjectRoot(deep + "/"); got != root {
		t.Errorf("worktree .git file: %s, want %s", got, root)
	}
	if err := os.Mkdir(filepath.Join(root, "a", ".git"), 0o755); err != nil {
		t.Fatal(err)
	}
	if got := ProjectRoot(deep); got != filepath.Join(root, "a") {
		t.Errorf("nearest wins: %s", got)
	}
}
