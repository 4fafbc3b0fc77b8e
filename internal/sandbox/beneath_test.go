//go:build linux

package sandbox

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestOpenBeneath opens directories beneath a root with openat2 and
// with the O_NOFOLLOW walk that replaces it on older kernels: missing
// parents are created, a symlinked component that leaves the root (or,
// for the walk, any symlink: the path was resolved before) is refused
// with ErrPathChanged, and nothing is created outside.
func TestOpenBeneath(t *testing.T) {
	for _, openat2 := range []bool{true, false} {
		t.Run(map[bool]string{true: "openat2", false: "walk"}[openat2], func(t *testing.T) {
			useOpenat2 = openat2
			t.Cleanup(func() { useOpenat2 = true })
			root, err := resolvePath("/", t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			ws, outside := filepath.Join(root, "ws"), filepath.Join(root, "outside")
			for _, d := range []string{ws, outside, filepath.Join(ws, "in")} {
				if err := os.Mkdir(d, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			if err := os.Symlink(outside, filepath.Join(ws, "out")); err != nil {
				t.Fatal(err)
			}
			p := Policy{Mode: WorkspaceWrite, Workspace: ws}
			rootf, err := os.Open(ws)
			if err != nil {
				t.Fatal(err)
			}
			defer rootf.Close()

			f, err := p.openBeneath(rootf, ws, "a/b/c")
			if err != nil {
				t.Fatalf("missing parents: %v", err)
			}
			real, err := fdPath(f, "")
			f.Close()
			if err != nil || real != filepath.Join(ws, "a/b/c") {
				t.Fatalf("opened %q %v", real, err)
			}
			for _, rel := range []string{"out/x", "out/x/y", "in/../out/x"} {
				if f, err := p.openBeneath(rootf, ws, rel); !errors.Is(err, ErrPathChanged) {
					if f != nil {
						f.Close()
					}
					t.Errorf("%s: %v, want ErrPathChanged", rel, err)
				}
			}
			if ents, _ := os.ReadDir(outside); len(ents) != 0 {
				t.Fatalf("created outside: %v", ents)
			}
		})
	}
}

// TestOpenWriteDir is the fence as the write tools use it: the parent
// of the path (its final symlink resolved) is opened beneath the root
// holding it, the innermost when a writable root lies in another, and
// the protected paths and places outside are refused without creating
// anything.
func TestOpenWriteDir(t *testing.T) {
	root, err := resolvePath("/", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ws, extra, outside := filepath.Join(root, "ws"), filepath.Join(root, "extra"), filepath.Join(root, "outside")
	for _, d := range []string{ws, extra, outside, filepath.Join(ws, ".git"), filepath.Join(ws, "in")} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for link, target := range map[string]string{"toextra": extra, "toout": outside, "in/f.link": "../real.txt", "bad.link": filepath.Join(outside, "x")} {
		if err := os.Symlink(target, filepath.Join(ws, link)); err != nil {
			t.Fatal(err)
		}
	}
	p := Policy{Mode: WorkspaceWrite, Workspace: ws, WritableRoots: []string{extra}}
	for path, want := range map[string]string{
		filepath.Join(ws, "new/dir/f"):   filepath.Join(ws, "new/dir"),
		filepath.Join(ws, "toextra/f"):   extra,
		filepath.Join(ws, "in/f.link"):   ws,
		filepath.Join(extra, "sub/f"):    filepath.Join(extra, "sub"),
		filepath.Join(ws, "in", "plain"): filepath.Join(ws, "in"),
	} {
		wd, err := p.OpenWriteDir(path)
		if err != nil {
			t.Errorf("%s: %v", path, err)
			continue
		}
		if wd.Path != want {
			t.Errorf("%s: opened %s, want %s", path, wd.Path, want)
		}
		wd.Close()
	}
	for _, path := range []string{
		filepath.Join(ws, "toout/f"), filepath.Join(ws, "bad.link"), filepath.Join(ws, ".git/config"),
		filepath.Join(ws, ".git/hooks/new/x"), filepath.Join(outside, "f"), ws,
	} {
		if wd, err := p.OpenWriteDir(path); !errors.Is(err, ErrDenied) {
			if wd != nil {
				wd.Close()
			}
			t.Errorf("%s: %v, want a denial", path, err)
		}
	}
	if _, err := os.Stat(filepath.Join(ws, ".git/hooks")); !os.IsNotExist(err) {
		t.Errorf("a refused write created .git/hooks: %v", err)
	}
	if _, err := (Policy{Mode: ReadOnly, Workspace: ws}).OpenWriteDir(filepath.Join(ws, "f")); !errors.Is(err, ErrDenied) {
		t.Errorf("read-only: %v", err)
	}
}

// TestOpenedReadsAgree: the per-call checker with resolved lists gives
// CheckOpenedFile's verdict, reason included, for denied, confined and
// allowed files, so the two cannot drift apart unnoticed.
func TestOpenedReadsAgree(t *testing.T) {
	root, err := resolvePath("/", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ws, home := filepath.Join(root, "ws"), filepath.Join(root, "home")
	files := []string{filepath.Join(ws, "a.go"), filepath.Join(home, ".ssh", "id_rsa"), filepath.Join(home, "notes"), "/etc/hostname"}
	for _, f := range files[:3] {
		os.MkdirAll(filepath.Dir(f), 0o755)
		os.WriteFile(f, []byte("x"), 0o600)
	}
	os.Symlink(filepath.Join(home, ".ssh"), filepath.Join(root, "sshlink"))
	for _, p := range []Policy{
		{Mode: WorkspaceWrite, Workspace: ws, DenyRead: []string{filepath.Join(root, "sshlink")}},
		{Mode: ReadOnly, Workspace: ws, DenyRead: []string{filepath.Join(home, ".ssh")}, ConfineReads: true},
		{Mode: DangerFullAccess, Workspace: ws, DenyRead: []string{filepath.Join(home, ".ssh")}, ConfineReads: true},
	} {
		r := p.OpenedReads()
		for _, path := range files {
			f, err := os.Open(path)
			if err != nil {
				continue
			}
			want, got := p.CheckOpenedFile(path, f), r.Check(path, f)
			f.Close()
			if (want == nil) != (got == nil) || want != nil && want.Error() != got.Error() {
				t.Errorf("%+v %s: OpenedReads %v, CheckOpenedFile %v", p, path, got, want)
			}
		}
	}
}
