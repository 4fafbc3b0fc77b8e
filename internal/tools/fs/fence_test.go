//go:build linux

package fs

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/dsh-dev/dsh/internal/sandbox"
)

// TestFenceWriteFileAtomic: the fenced write keeps WriteFileAtomic's
// semantics (new parents, mode bits kept, a new inode so a hard link's
// other name keeps the old content, a symlink's target written and the
// link kept, directories and FIFOs refused) and refuses what the fence
// refuses; danger-full-access writes by name as before.
func TestFenceWriteFileAtomic(t *testing.T) {
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ws, outside := filepath.Join(root, "ws"), filepath.Join(root, "outside")
	for _, d := range []string{ws, outside} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	fc := Fence{Policy: sandbox.Policy{Mode: sandbox.WorkspaceWrite, Workspace: ws}, On: true}
	write := func(p, content string) error {
		_, _, err := fc.WriteFileAtomic(p, []byte(content), 0o644)
		return err
	}
	read := func(p string) string { b, _ := os.ReadFile(p); return string(b) }

	if err := write(filepath.Join(ws, "a/b/new.txt"), "new\n"); err != nil || read(filepath.Join(ws, "a/b/new.txt")) != "new\n" {
		t.Fatalf("new file in new dirs: %v", err)
	}
	script := filepath.Join(ws, "run.sh")
	os.WriteFile(script, []byte("one\n"), 0o750)
	os.Chmod(script, 0o750|os.ModeSetgid)
	old, _ := os.Stat(script)
	if err := write(script, "two\n"); err != nil {
		t.Fatal(err)
	}
	fi, _ := os.Stat(script)
	if fi.Mode() != 0o750|os.ModeSetgid || read(script) != "two\n" || os.SameFile(old, fi) {
		t.Fatalf("overwrite: mode %v, content %q, same inode %v", fi.Mode(), read(script), os.SameFile(old, fi))
	}
	os.WriteFile(filepath.Join(ws, "real.txt"), []byte("x"), 0o600)
	os.Symlink("real.txt", filepath.Join(ws, "link.txt"))
	if err := write(filepath.Join(ws, "link.txt"), "via link"); err != nil || read(filepath.Join(ws, "real.txt")) != "via link" {
		t.Fatalf("symlink target: %v", err)
	}
	if li, _ := os.Lstat(filepath.Join(ws, "link.txt")); li.Mode()&os.ModeSymlink == 0 {
		t.Fatal("the link was replaced")
	}
	if fi, _ := os.Stat(filepath.Join(ws, "real.txt")); fi.Mode().Perm() != 0o600 {
		t.Fatalf("the target's mode: %v", fi.Mode())
	}
	os.Symlink(filepath.Join(outside, "x"), filepath.Join(ws, "out.txt"))
	if err := write(filepath.Join(ws, "out.txt"), "owned"); errCode(err) != CodeAccessDenied {
		t.Fatalf("a link to outside: %v", err)
	}
	if err := write(filepath.Join(ws, "a"), "x"); errCode(err) != CodeIsDirectory {
		t.Fatalf("a directory: %v", err)
	}
	syscall.Mkfifo(filepath.Join(ws, "fifo"), 0o600)
	if err := write(filepath.Join(ws, "fifo"), "x"); errCode(err) != CodeNotRegular {
		t.Fatalf("a FIFO: %v", err)
	}
	if ents, _ := os.ReadDir(outside); len(ents) != 0 {
		t.Fatalf("written outside: %v", ents)
	}
	if _, err := os.Lstat(filepath.Join(ws, "out.txt")); err != nil {
		t.Fatalf("the refused link is gone: %v", err)
	}
	if ents, _ := filepath.Glob(filepath.Join(ws, ".*.tmp")); len(ents) != 0 {
		t.Fatalf("temporary files left: %v", ents)
	}
	denied := fc
	denied.Policy.DenyRead = []string{filepath.Join(ws, "secret")}
	if _, _, err := denied.WriteFileAtomic(filepath.Join(ws, "secret", "new.env"), []byte("x"), 0o644); errCode(err) != CodeAccessDenied {
		t.Fatalf("a write into a deny-read directory: %v", err)
	}
	if _, err := os.Stat(filepath.Join(ws, "secret")); !os.IsNotExist(err) {
		t.Fatalf("the refused write created the directory: %v", err)
	}
	os.WriteFile(filepath.Join(outside, "x"), []byte("outside"), 0o644)
	full := Fence{Policy: sandbox.Policy{Mode: sandbox.DangerFullAccess, Workspace: ws}, On: true}
	if _, _, err := full.WriteFileAtomic(filepath.Join(ws, "out.txt"), []byte("full"), 0o644); err != nil || read(filepath.Join(outside, "x")) != "full" {
		t.Fatalf("danger-full-access: %v", err)
	}
}
