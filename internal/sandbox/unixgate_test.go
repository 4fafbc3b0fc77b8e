package sandbox

import (
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// helperSpecOf decodes the helper spec a confined argv carries.
func helperSpecOf(t *testing.T, argv []string) helperSpec {
	t.Helper()
	// The innermost helper: under bwrap an outer, lifetime-only one
	// runs bwrap, which runs the gate's helper.
	i := -1
	for j, a := range argv {
		if a == HelperArg {
			i = j
		}
	}
	if i < 0 || i+1 >= len(argv) {
		t.Fatalf("no helper in %q", argv)
	}
	raw, err := base64.RawURLEncoding.DecodeString(argv[i+1])
	if err != nil {
		t.Fatal(err)
	}
	var s helperSpec
	if err := json.Unmarshal(raw, &s); err != nil {
		t.Fatal(err)
	}
	return s
}

// What each mode lets the gate reach: the workspace, the writable roots
// (workspace-write only), the private TMPDIR, never the shared temp dirs;
// allowed sockets resolved through symlinks.
func TestGateSpec(t *testing.T) {
	if err := unixGateSupported(); err != nil {
		t.Skipf("no gate: %v", err)
	}
	f := newFixture(t)
	extra := filepath.Join(f.root, "extra")
	mustMkdir(t, extra)
	target := filepath.Join(f.root, "agent.sock")
	link := filepath.Join(f.root, "agent-link")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	scratch, err := scratchDir()
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range realBackends() {
		for _, tc := range []struct {
			mode  Mode
			roots []string
		}{
			{ReadOnly, []string{f.ws, scratch}},
			{WorkspaceWrite, []string{f.ws, extra, scratch}},
		} {
			t.Run(b.Name()+"/"+string(tc.mode), func(t *testing.T) {
				c, err := b.Confine([]string{"true"}, Policy{Mode: tc.mode, Workspace: f.ws, WritableRoots: []string{extra}, UnixSockets: []string{link}})
				if err != nil {
					t.Skipf("%s: %v", b.Name(), err)
				}
				s := helperSpecOf(t, c.Argv)
				if s.Gate == nil {
					t.Fatalf("no gate in %+v", s)
				}
				want := slices.Clone(tc.roots)
				slices.Sort(want)
				if !slices.Equal(s.Gate.Roots, want) || !slices.Equal(s.Gate.Sockets, []string{target}) {
					t.Errorf("gate %+v, want roots %q and socket %q", *s.Gate, want, target)
				}
				for _, tmp := range tempDirs() {
					if _, ok := s.Gate.allows(filepath.Join(tmp, "x.sock")); ok && withinAny(tmp, want) == "" {
						t.Errorf("shared temp dir %s is reachable", tmp)
					}
				}
				if b.Name() == "bwrap" && !s.Lifetime {
					t.Error("bwrap's helper is not gate-only")
				}
				if s.TmpDir != "" && s.TmpDir != scratch {
					t.Errorf("TMPDIR %s, want %s", s.TmpDir, scratch)
				}
			})
		}
	}
}

func TestValidateUnixSockets(t *testing.T) {
	if err := ValidateUnixSockets([]string{"/run/a.sock", "/var/run/postgresql"}); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"", "a.sock", "/run/../run/a.sock", "/run/a.sock/"} {
		err := ValidateUnixSockets([]string{bad})
		if err == nil || !strings.Contains(err.Error(), "allowed UNIX socket") {
			t.Errorf("%q: %v", bad, err)
		}
		// Confine refuses such a policy outright.
		if _, err := New(&fakeBackend{name: "f"}).Confine([]string{"true"}, Policy{Mode: ReadOnly, UnixSockets: []string{bad}}); err == nil {
			t.Errorf("Confine accepted %q", bad)
		}
	}
}
