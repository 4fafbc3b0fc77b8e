package permission

import (
	"slices"
	"testing"

	"github.com/dsh-dev/dsh/internal/sandbox"
	"github.com/dsh-dev/dsh/internal/session"
	"github.com/dsh-dev/dsh/internal/tool"
)

// Restrictions round-trip through the log (nothing is logged for none);
// one that cannot be decoded is an error, not "no restrictions"; a
// session's ConfineReads and ReadRoots reach every policy it builds.
func TestRestrictions(t *testing.T) {
	l := newLog(t, "/cwd")
	if err := Restrict(l, Restrictions{Source: "x"}); err != nil || l.Len() != 0 {
		t.Fatalf("empty restrictions: %v, %d events", err, l.Len())
	}
	if r, err := CurrentRestrictions(l); err != nil || !r.Empty() {
		t.Fatalf("none: %+v %v", r, err)
	}
	want := Restrictions{ConfineReads: true, ReadRoots: []string{"/repo/.git"}, StrictEnv: true, Tools: []string{"bash", "read"}, Source: "github"}
	if err := Restrict(l, want); err != nil {
		t.Fatal(err)
	}
	got, err := CurrentRestrictions(l)
	if err != nil || !got.ConfineReads || !got.StrictEnv || !slices.Equal(got.Tools, want.Tools) || !slices.Equal(got.ReadRoots, want.ReadRoots) {
		t.Fatalf("read back %+v %v", got, err)
	}
	bad := newLog(t, "/cwd")
	if _, err := bad.Append(session.TypeRestrictions, map[string]any{"confineReads": "yes"}); err != nil {
		t.Fatal(err)
	}
	if _, err := CurrentRestrictions(bad); err == nil {
		t.Fatal("an undecodable permission/restrictions read as none")
	}
	for _, preset := range []string{PresetReadOnly, PresetWorkspaceWrite} {
		pl := newLog(t, "/cwd")
		if err := Select(pl, preset, "test"); err != nil {
			t.Fatal(err)
		}
		s, err := New(Config{Log: pl, Reads: Reads{ConfineReads: true, ReadRoots: []string{"/repo/.git"}}, CheckWrite: sandbox.Policy.CheckWrite})
		if err != nil {
			t.Fatal(err)
		}
		p := s.Confiner.Policy(&tool.Call{Cwd: "/cwd"})
		if !p.ConfineReads || !slices.Equal(p.ReadRoots, []string{"/repo/.git"}) {
			t.Errorf("%s: policy %+v", preset, p)
		}
	}
	s, err := New(Config{Log: newLog(t, "/cwd")})
	if err != nil {
		t.Fatal(err)
	}
	if p := s.Confiner.Policy(&tool.Call{Cwd: "/cwd"}); p.ConfineReads || len(p.ReadRoots) != 0 {
		t.Errorf("unrestricted policy %+v", p)
	}
}
