package permission

import (
	"slices"
	"testing"

	"github.com/dsh-dev/dsh/internal/sandbox"
	"github.com/dsh-dev/dsh/internal/tool"
)

// The read rules reach every confined policy, the file fence's
// included, whatever the mode.
func TestBashConfinerCarriesReads(t *testing.T) {
	reads := Reads{DenyRead: []string{"/home/u/.ssh"}, ConfineReads: true, ReadRoots: []string{"/srv"}, Protected: []string{"scripts/check.sh"}}
	for _, preset := range []string{PresetReadOnly, PresetWorkspaceWrite} {
		l := newLog(t, "/cwd")
		if err := Select(l, preset, "test"); err != nil {
			t.Fatal(err)
		}
		b := &BashConfiner{Log: l, Reads: reads}
		got := b.Policy(&tool.Call{Cwd: "/cwd"})
		if !slices.Equal(got.DenyRead, reads.DenyRead) || !got.ConfineReads || !slices.Equal(got.ReadRoots, reads.ReadRoots) || !slices.Equal(got.Protected, reads.Protected) {
			t.Errorf("%s: policy %+v", preset, got)
		}
	}
	if text := ReadsText(sandbox.WorkspaceWrite, reads); text == "" {
		t.Error("the model is not told about the read rules")
	}
	if text := ReadsText(sandbox.DangerFullAccess, reads); text != "" {
		t.Errorf("danger-full-access is unconfined, yet: %q", text)
	}
}
