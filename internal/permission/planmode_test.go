package permission

import (
	"errors"
	"testing"

	"github.com/dsh-dev/dsh/internal/sandbox"
	"github.com/dsh-dev/dsh/internal/tool"
)

// recordBox confines nothing and records the policy it was asked for.
type recordBox struct{ got *sandbox.Policy }

func (r recordBox) Confine(argv []string, p sandbox.Policy) (sandbox.Confined, error) {
	*r.got = p
	return sandbox.Confined{Argv: argv, Backend: "record", Enforcement: sandbox.Full}, nil
}

// TestPlanModeClampsToReadOnly: in plan mode every preset's commands and
// the write fence get the read-only policy, a danger-full-access session
// included (it then needs the sandbox), and an escalation grant is not
// applied; out of plan mode the preset's policy is back.
func TestPlanModeClampsToReadOnly(t *testing.T) {
	for _, preset := range []string{PresetWorkspaceWrite, PresetFullAccess} {
		t.Run(preset, func(t *testing.T) {
			l := newLog(t, "/cwd")
			if err := Select(l, preset, "test"); err != nil {
				t.Fatal(err)
			}
			plan := true
			var got sandbox.Policy
			grants := NewGrants()
			b := &BashConfiner{Sandbox: recordBox{&got}, Log: l, Grants: grants, PlanMode: func() bool { return plan }}
			if p := b.Policy(&tool.Call{Cwd: "/cwd"}); p.Mode != sandbox.ReadOnly || p.Network {
				t.Fatalf("plan-mode policy %+v", p)
			}
			grants.offer("c", Grant{Mode: sandbox.DangerFullAccess, Network: true})
			c, err := b.Confine(&tool.Call{ID: "c", Cwd: "/cwd"}, []string{"bash", "-c", "true"})
			if err != nil || got.Mode != sandbox.ReadOnly || got.Network || c.Policy.Mode != sandbox.ReadOnly {
				t.Fatalf("confined under %+v (%+v), %v", got, c.Policy, err)
			}
			fence := WriteFence(func(p sandbox.Policy, path string) error {
				if p.Mode == sandbox.ReadOnly {
					return errors.New("sandbox: file access denied: " + path + " (read-only: nothing is writable)")
				}
				return nil
			}, b.Policy)
			if msg := fence(&tool.Call{Name: "write", Cwd: "/cwd", Arguments: []byte(`{"file_path":"x"}`)}); msg == "" {
				t.Fatal("the write fence let a write through in plan mode")
			}
			plan = false
			if p := b.Policy(&tool.Call{Cwd: "/cwd"}); p.Mode == sandbox.ReadOnly {
				t.Fatalf("out of plan mode: %+v", p)
			}
		})
	}
}
