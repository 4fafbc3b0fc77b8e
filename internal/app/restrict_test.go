package app

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/dsh-dev/dsh/internal/permission"
	"github.com/dsh-dev/dsh/internal/session"
	"github.com/dsh-dev/dsh/internal/subagent"
)

// TestSessionRestrictions: a session opened with Restrictions logs them
// (permission/restrictions) before anything else, its permission layer
// confines reads, and a subagent child is held to the same restrictions;
// an unrestricted session logs none.
func TestSessionRestrictions(t *testing.T) {
	home := t.TempDir()
	t.Setenv("DSH_HOME", home)
	t.Setenv("DEEPSEEK_API_KEY", "test-key")
	if err := os.WriteFile(filepath.Join(home, "config.yaml"), []byte("{}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	a, err := Open(t.Context(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	want := permission.Restrictions{ConfineReads: true, ReadRoots: []string{"/repo/.git"}, StrictEnv: true, Tools: []string{"bash", "read"}, Source: "github"}
	s, err := a.OpenSession(t.Context(), SessionOptions{Cwd: t.TempDir(), Permission: "read-only", Restrictions: want})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if first := s.Log.View().At(0); first.Type != session.TypeRestrictions {
		t.Fatalf("first event %+v", first)
	}
	got, err := permission.CurrentRestrictions(s.Log)
	if err != nil || !slices.Equal(got.Tools, want.Tools) || !got.ConfineReads || !got.StrictEnv {
		t.Fatalf("restrictions %+v %v", got, err)
	}
	child, err := (&childFactory{app: a}).NewChild(t.Context(), subagent.ChildSpec{Parent: s.Log, Permission: permission.Current(s.Log)})
	if err != nil {
		t.Fatal(err)
	}
	defer child.Close()
	if cr, err := permission.CurrentRestrictions(child.Log()); err != nil || !cr.ConfineReads || !cr.StrictEnv || !slices.Equal(cr.Tools, want.Tools) {
		t.Errorf("child restrictions %+v %v", cr, err)
	}
	plain, err := a.OpenSession(t.Context(), SessionOptions{Cwd: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	if _, ok := plain.Log.Latest(session.TypeRestrictions); ok {
		t.Error("an unrestricted session logged restrictions")
	}
}
