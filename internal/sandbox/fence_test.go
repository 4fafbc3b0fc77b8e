package sandbox

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestCheckWrite(t *testing.T) {
	root, err := resolvePath("/", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ws := filepath.Join(root, "ws")
	extra := filepath.Join(root, "extra")
	outside := filepath.Join(root, "outside")
	main := filepath.Join(root, "main")
	wt := filepath.Join(root, "wt")
	for _, d := range []string{
		filepath.Join(ws, ".git", "hooks"), filepath.Join(ws, "src", ".git"), filepath.Join(extra, ".git"),
		outside, filepath.Join(main, ".git", "worktrees", "wt"), wt,
	} {
		mustMkdir(t, d)
	}
	mustWrite(t, filepath.Join(ws, "README"), "")
	mustWrite(t, filepath.Join(wt, ".git"), "gitdir: ../main/.git/worktrees/wt\n")
	mustWrite(t, filepath.Join(main, ".git", "worktrees", "wt", "commondir"), "../..\n")
	for name, target := range map[string]string{
		"out":     outside,
		"in":      filepath.Join(ws, "src"),
		"gitlink": filepath.Join(ws, ".git"),
		"rel-out": "../outside",
		"loop":    "loop",
	} {
		if err := os.Symlink(target, filepath.Join(ws, name)); err != nil {
			t.Fatal(err)
		}
	}

	// Hard links: a name planted in the workspace for an outside file,
	// and a file with two names both inside (also refused: the fence
	// cannot know where the other names are).
	mustWrite(t, filepath.Join(outside, "secret"), "s")
	mustWrite(t, filepath.Join(ws, "own"), "o")
	for from, to := range map[string]string{filepath.Join(outside, "secret"): "planted", filepath.Join(ws, "own"): "own2"} {
		if err := os.Link(from, filepath.Join(ws, to)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("planted", filepath.Join(ws, "to-planted")); err != nil {
		t.Fatal(err)
	}

	wsw := Policy{Mode: WorkspaceWrite, Workspace: ws, WritableRoots: []string{extra}}
	tests := []struct {
		name   string
		p      Policy
		path   string
		ok     bool
		reason string // substring of the denial reason
	}{
		{"relative file", wsw, "a.txt", true, ""},
		{"absolute file", wsw, filepath.Join(ws, "src", "a.go"), true, ""},
		{"nonexistent nested", wsw, "new/deeper/still/file", true, ""},
		{"the workspace itself", wsw, "src/..", true, ""},
		{"dot-dot escape", wsw, "../outside/x", false, "outside the workspace"},
		{"dot-dot escape via subdir", wsw, "src/../../outside/x", false, "outside the workspace"},
		{"dot-dot in nonexistent tail", wsw, "new/../../outside/x", false, "outside the workspace"},
		{"dot-dot back inside", wsw, "new/../src/x", true, ""},
		{"absolute outside", wsw, "/etc/passwd", false, "outside the workspace"},
		{"symlink escape", wsw, "out/x", false, "resolves to " + filepath.Join(outside, "x")},
		{"relative symlink escape", wsw, "rel-out/new/x", false, "outside the workspace"},
		{"symlink back inside", wsw, "in/x", true, ""},
		{"symlink dot-dot follows target", wsw, "out/../ws/x", true, ""},
		{"symlink loop", wsw, "loop/x", false, "cannot resolve"},
		{"path through a file", wsw, "README/x", true, ""},
		{".git/config", wsw, ".git/config", false, "git metadata"},
		{".git itself", wsw, ".git", false, "git metadata"},
		{"new git hook", wsw, ".git/hooks/pre-commit", false, "git metadata"},
		{"symlink into .git", wsw, "gitlink/config", false, "git metadata"},
		{".gitignore is not .git", wsw, ".gitignore", true, ""},
		{"nested repo's .git is not protected", wsw, "src/.git/config", true, ""},
		{"writable root", wsw, filepath.Join(extra, "f"), true, ""},
		{"writable root's .git", wsw, filepath.Join(extra, ".git", "config"), false, "git metadata"},
		{"worktree .git file", Policy{Mode: WorkspaceWrite, Workspace: wt}, ".git", false, "git metadata"},
		{"worktree git dir", Policy{Mode: WorkspaceWrite, Workspace: wt, WritableRoots: []string{main}},
			filepath.Join(main, ".git", "worktrees", "wt", "HEAD"), false, "git metadata"},
		{"worktree files", Policy{Mode: WorkspaceWrite, Workspace: wt}, "main.go", true, ""},
		{"read-only inside", Policy{Mode: ReadOnly, Workspace: ws}, "a.txt", false, "read-only"},
		{"read-only temp", Policy{Mode: ReadOnly, Workspace: ws}, filepath.Join(os.TempDir(), "x"), false, "read-only"},
		{"danger anywhere", Policy{Mode: DangerFullAccess}, "/etc/passwd", true, ""},
		{"danger .git", Policy{Mode: DangerFullAccess, Workspace: ws}, ".git/config", true, ""},
		{"hard link to an outside file", wsw, "planted", false, "the file has 2 hard links"},
		{"hard link inside", wsw, "own2", false, "cannot tell where its other names are"},
		{"symlink to a hard link", wsw, "to-planted", false, "hard links (it resolves to " + filepath.Join(ws, "planted") + ")"},
		{"single-link file", wsw, "README", true, ""},
		{"danger hard link", Policy{Mode: DangerFullAccess, Workspace: ws}, "planted", true, ""},
		{"unknown mode", Policy{Mode: "yolo", Workspace: ws}, "a.txt", false, "unknown sandbox mode"},
		{"relative workspace", Policy{Mode: WorkspaceWrite, Workspace: "ws"}, "a.txt", false, "absolute workspace"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.p.CheckWrite(tc.path)
			if tc.ok {
				if err != nil {
					t.Fatalf("CheckWrite(%q) = %v, want allowed", tc.path, err)
				}
				return
			}
			var de *DeniedError
			if !errors.As(err, &de) || !errors.Is(err, ErrDenied) {
				t.Fatalf("CheckWrite(%q) = %v, want a *DeniedError", tc.path, err)
			}
			if de.Path != tc.path || de.Mode != tc.p.Mode || !strings.Contains(de.Reason, tc.reason) {
				t.Errorf("got %+v, want path %q mode %q reason containing %q", de, tc.path, tc.p.Mode, tc.reason)
			}
			if !strings.HasPrefix(err.Error(), "sandbox: file access denied") {
				t.Errorf("message %q lacks the denial marker", err)
			}
		})
	}
}

func TestResolvePath(t *testing.T) {
	root, err := resolvePath("/", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	mustMkdir(t, filepath.Join(root, "a", "b"))
	if err := os.Symlink("a/b", filepath.Join(root, "l")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(root, "l"), filepath.Join(root, "abs")); err != nil {
		t.Fatal(err)
	}
	tests := []struct{ in, want string }{
		{"a/b", "a/b"},
		{"l", "a/b"},
		{"l/..", "a"},       // the link's target's parent, as the kernel sees it
		{"abs/../x", "a/x"}, // chained links
		{"l/new/../y", "a/b/y"},
		{"./a//b/.", "a/b"},
		{"../" + filepath.Base(root) + "/l/z", "a/b/z"},
	}
	for _, tc := range tests {
		got, err := resolvePath(root, tc.in)
		if err != nil || got != filepath.Join(root, tc.want) {
			t.Errorf("resolvePath(%q) = %q, %v; want %q", tc.in, got, err, filepath.Join(root, tc.want))
		}
	}
	if _, err := resolvePath("", "rel"); err == nil {
		t.Error("a relative path without base resolved")
	}
}

func TestNewLayout(t *testing.T) {
	root := resolvedTempDir(t)
	ws := filepath.Join(root, "ws")
	mustMkdir(t, filepath.Join(ws, ".git"))
	mustWrite(t, filepath.Join(root, "file"), "")
	// A temp dir named as a root is granted as a temp dir, and its .git
	// is still protected.
	tmp, err := resolvePath("/", os.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	mustMkdir(t, filepath.Join(tmp, ".git"))
	t.Cleanup(func() { os.Remove(filepath.Join(tmp, ".git")) })

	l, err := newLayout(Policy{Mode: WorkspaceWrite, Workspace: ws, WritableRoots: []string{"../missing", tmp, ws}})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(l.roots, []string{ws}) || !slices.Contains(l.temps, tmp) || l.scratch != "" {
		t.Errorf("roots %q temps %q scratch %q; want [%s], %s among temps, no scratch", l.roots, l.temps, l.scratch, ws, tmp)
	}
	if want := []string{filepath.Join(tmp, ".git"), filepath.Join(ws, ".git")}; !slices.Equal(l.protected, want) {
		t.Errorf("protected %q, want %q", l.protected, want)
	}

	l, err = newLayout(Policy{Mode: ReadOnly, Workspace: ws, WritableRoots: []string{tmp}})
	if err != nil {
		t.Fatal(err)
	}
	if l.scratch == "" || len(l.roots)+len(l.temps)+len(l.protected) != 0 {
		t.Errorf("read-only layout %+v, want only the scratch dir", l)
	}
	if fi, err := os.Lstat(l.scratch); err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o700 {
		t.Errorf("scratch dir %s: %v %v, want a 0700 directory", l.scratch, fi, err)
	}

	for _, bad := range []string{"", "ws", filepath.Join(root, "missing"), filepath.Join(root, "file")} {
		if _, err := newLayout(Policy{Mode: WorkspaceWrite, Workspace: bad}); err == nil {
			t.Errorf("workspace %q accepted", bad)
		}
	}
	if _, err := newLayout(Policy{Mode: DangerFullAccess}); err == nil {
		t.Error("danger-full-access got a layout")
	}
}
