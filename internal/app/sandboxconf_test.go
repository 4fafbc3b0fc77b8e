package app

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The sandbox block adjusts the default deny-read list: deny_read adds,
// allow_read removes an entry or makes an exception inside one, and
// anything else is an error; $DSH_HOME/skills stays readable.
func TestSandboxDefReads(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	dsh := filepath.Join(home, ".dsh")
	r, err := sandboxDef{
		DenyRead:  []string{"~/secrets", "/srv/keys/"},
		AllowRead: []string{"~/.kube", "~/.config/gh/hosts.yml"},
		Protected: []string{"scripts/check.sh"},
	}.reads(dsh)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{dsh, filepath.Join(home, ".ssh"), filepath.Join(home, "secrets"), "/srv/keys"} {
		if !slices.Contains(r.DenyRead, want) {
			t.Errorf("%s is not denied: %q", want, r.DenyRead)
		}
	}
	if slices.Contains(r.DenyRead, filepath.Join(home, ".kube")) {
		t.Error("allow_read did not remove ~/.kube")
	}
	for _, want := range []string{filepath.Join(dsh, "skills"), filepath.Join(home, ".config/gh/hosts.yml")} {
		if !slices.Contains(r.ReadRoots, want) {
			t.Errorf("%s is no exception: %q", want, r.ReadRoots)
		}
	}
	if !slices.Equal(r.Protected, []string{"scripts/check.sh"}) {
		t.Errorf("protected %q", r.Protected)
	}
	if _, err := (sandboxDef{AllowRead: []string{"/etc/hosts"}}).reads(dsh); err == nil || !strings.Contains(err.Error(), "not on the deny-read list") {
		t.Errorf("an allow_read outside the list: %v", err)
	}
	if err := (sandboxDef{DenyRead: []string{"rel/path"}}).validate(); err == nil {
		t.Error("a relative deny_read was accepted")
	}
}
