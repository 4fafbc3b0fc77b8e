package proc

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestResolveDir(t *testing.T) {
	base, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(base, "dir")
	file := filepath.Join(base, "file")
	link := filepath.Join(base, "link")
	noexec := filepath.Join(base, "noexec")
	for _, err := range []error{
		os.Mkdir(dir, 0o755), os.WriteFile(file, nil, 0o644),
		os.Symlink(dir, link), os.Mkdir(noexec, 0o600),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	t.Chdir(base)
	for _, tc := range []struct {
		name, override, session, want, err string
	}{
		{"override wins", dir, "/", dir, ""},
		{"relative override against launch dir", "dir", "", dir, ""},
		{"override symlink resolved", link, "", dir, ""},
		{"override missing", filepath.Join(base, "nope"), "/", "", "no such file"},
		{"override is a file", file, "/", "", "not a directory"},
		{"session cwd", "", dir, dir, ""},
		{"session cwd symlink resolved", "", link, dir, ""},
		{"session cwd relative", "", "dir", "", "absolute"},
		{"session cwd missing", "", filepath.Join(base, "nope"), "", "no such file"},
		{"session cwd is a file", "", file, "", "not a directory"},
		{"neither", "", "", "", "no working directory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ResolveDir(tc.override, tc.session)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("ResolveDir = %q, %v; want error containing %q", got, err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("ResolveDir = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
	t.Run("not enterable", func(t *testing.T) {
		if os.Geteuid() == 0 {
			t.Skip("root can enter any directory")
		}
		if _, err := ResolveDir("", noexec); err == nil || !strings.Contains(err.Error(), "not enterable") {
			t.Fatalf("err = %v", err)
		}
	})
}

func TestValidateOverride(t *testing.T) {
	if _, err := ValidateOverride(""); err == nil || !strings.Contains(err.Error(), "must not be empty") {
		t.Fatalf("empty override: %v", err)
	}
	dir, _ := filepath.EvalSymlinks(t.TempDir())
	if got, err := ValidateOverride(dir + "/."); err != nil || got != dir {
		t.Fatalf("ValidateOverride = %q, %v", got, err)
	}
}
