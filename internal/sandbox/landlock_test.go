package sandbox

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestLandlockSpecGaps(t *testing.T) {
	lay := layout{
		roots:     []string{"/home/u/ws", "/tmp/wt"},
		temps:     []string{"/tmp"},
		protected: []string{"/home/u/ws/.git", "/tmp/wt/.git"},
	}
	tests := []struct {
		name     string
		lay      layout
		network  bool
		abi      int
		seccomp  bool
		loose    bool
		gaps     []string // substrings, one per expected gap
		protects []string
	}{
		{"modern kernel", lay, false, 7, true, false, []string{"/tmp/wt/.git lies inside temp dir /tmp"}, []string{"/home/u/ws/.git"}},
		{"no truncate right", lay, true, 2, true, false, []string{"temp dir", "truncating"}, []string{"/home/u/ws/.git"}},
		{"no seccomp, TCP rules", lay, false, 4, false, false, []string{"temp dir", "only TCP"}, []string{"/home/u/ws/.git"}},
		{"no seccomp, no net rules", lay, false, 3, false, false, []string{"temp dir", "network access is not blocked"}, []string{"/home/u/ws/.git"}},
		{"network allowed needs no filter", lay, true, 7, false, false, []string{"temp dir"}, []string{"/home/u/ws/.git"}},
		{"loose git", lay, true, 7, true, true, []string{"LooseGit"}, nil},
		{"read-only", layout{scratch: "/tmp/s"}, false, 7, true, false, nil, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			spec, gaps := landlockSpec(tc.lay, tc.network, tc.abi, tc.seccomp, tc.loose)
			if len(gaps) != len(tc.gaps) {
				t.Fatalf("gaps %q, want %d matching %q", gaps, len(tc.gaps), tc.gaps)
			}
			for i, g := range tc.gaps {
				if !strings.Contains(gaps[i], g) {
					t.Errorf("gap %q lacks %q", gaps[i], g)
				}
			}
			if !slices.Equal(spec.Protected, tc.protects) {
				t.Errorf("protected %q, want %q", spec.Protected, tc.protects)
			}
			if tc.lay.scratch != "" && (spec.TmpDir != tc.lay.scratch || !slices.Equal(spec.Whole, []string{tc.lay.scratch}) || len(spec.Roots) != 0) {
				t.Errorf("read-only spec %+v, want only the scratch dir writable", spec)
			}
		})
	}
}

// The helper never runs a command unconfined: a bad policy or a missing
// command stops it with its own message, which is not read as a denial.
func TestLandlockHelperFailsClosed(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args []string
		code int
	}{
		{"no separator", []string{HelperArg, "e30", "true"}, helperExitSetup},
		{"bad base64", []string{HelperArg, "!!", "--", "true"}, helperExitSetup},
		{"bad json", []string{HelperArg, "bm90IGpzb24", "--", "true"}, helperExitSetup},
		{"missing command", []string{HelperArg, "e30", "--", "/nonexistent/cmd"}, helperExitNotFound},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, err := exec.Command(self, tc.args...).CombinedOutput()
			ee, ok := err.(*exec.ExitError)
			if !ok || ee.ExitCode() != tc.code {
				t.Fatalf("err %v, want exit %d; output %s", err, tc.code, out)
			}
			if !strings.HasPrefix(string(out), helperErrPrefix) {
				t.Errorf("output %q lacks %q", out, helperErrPrefix)
			}
			if outputDenied(tc.code, out) {
				t.Errorf("a helper failure was read as a denial: %q", out)
			}
		})
	}
}

// A binary whose main does not call RunHelperIfRequested must fail the
// probe rather than run commands unconfined.
func TestLandlockProbeNeedsHook(t *testing.T) {
	if landlockABI() < 1 {
		t.Skip("no Landlock in this kernel")
	}
	for _, self := range []string{"/bin/true", "/bin/false"} {
		if _, err := os.Stat(self); err != nil {
			continue
		}
		if err := NewLandlock(self).Probe(); err == nil {
			t.Errorf("probe with %s as helper succeeded", self)
		}
	}
}

func TestBwrapArgs(t *testing.T) {
	lay := layout{
		roots:     []string{"/w/ws", "/w"},
		temps:     []string{"/tmp"},
		protected: []string{"/nonexistent-for-test/.git"},
	}
	args, gaps := bwrapArgs(lay, false)
	joined := strings.Join(args, " ")
	for _, want := range []string{
		"--die-with-parent --new-session --unshare-pid --unshare-net ",
		"--ro-bind / / --dev /dev --proc /proc",
		"--bind /tmp /tmp --bind /w /w --bind /w/ws /w/ws",
	} {
		if !strings.Contains(joined, want) {
			t.Errorf("args %q lack %q", joined, want)
		}
	}
	if strings.Contains(joined, "nonexistent-for-test") || len(gaps) != 0 {
		t.Errorf("a missing protected path was bound: %q %q", joined, gaps)
	}
	if args, _ := bwrapArgs(layout{scratch: "/tmp/s"}, true); strings.Contains(strings.Join(args, " "), "unshare-net") ||
		!strings.HasSuffix(strings.Join(args, " "), "--setenv TMPDIR /tmp/s --bind /tmp/s /tmp/s") {
		t.Errorf("read-only with network: %q", args)
	}

	// Read-only binds come after every writable bind; a symlinked .git
	// is reported, not bound.
	root := resolvedTempDir(t)
	mustMkdir(t, filepath.Join(root, "real-git"))
	if err := os.Symlink("real-git", filepath.Join(root, ".git")); err != nil {
		t.Fatal(err)
	}
	lay = layout{roots: []string{root}, protected: gitPaths(root)}
	args, gaps = bwrapArgs(lay, false)
	last := strings.Join(args[len(args)-3:], " ")
	if want := "--ro-bind " + filepath.Join(root, "real-git") + " " + filepath.Join(root, "real-git"); last != want {
		t.Errorf("args end %q, want %q", last, want)
	}
	if len(gaps) != 1 || !strings.Contains(gaps[0], "symlink") {
		t.Errorf("gaps %q, want the symlink gap", gaps)
	}
}

func TestGitPaths(t *testing.T) {
	root := resolvedTempDir(t)
	main := filepath.Join(root, "main")
	wt := filepath.Join(root, "wt")
	gitdir := filepath.Join(main, ".git", "worktrees", "wt")
	mustMkdir(t, gitdir)
	mustMkdir(t, wt)
	mustWrite(t, filepath.Join(wt, ".git"), "gitdir: "+gitdir+"\n")
	mustWrite(t, filepath.Join(gitdir, "commondir"), "../..\n")
	tests := []struct {
		root string
		want []string
	}{
		{main, []string{filepath.Join(main, ".git")}},
		{wt, []string{filepath.Join(wt, ".git"), gitdir, filepath.Join(main, ".git")}},
		{root, nil},
	}
	for _, tc := range tests {
		if got := gitPaths(tc.root); !slices.Equal(got, tc.want) {
			t.Errorf("gitPaths(%s) = %q, want %q", tc.root, got, tc.want)
		}
	}
}

// resolvedTempDir is t.TempDir() with its symlinks resolved, as the
// layout code sees it.
func resolvedTempDir(t *testing.T) string {
	t.Helper()
	d, err := resolvePath("/", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// A probe run inside another's command (a binary without the helper hook
// re-running itself) fails at once instead of probing again.
func TestNestedProbeFailsFast(t *testing.T) {
	t.Setenv(probingEnv, "1")
	for _, b := range []Backend{NewBwrap(""), NewLandlock("")} {
		if err := b.Probe(); !errors.Is(err, errNestedProbe) {
			t.Errorf("%s: %v, want errNestedProbe", b.Name(), err)
		}
	}
}
