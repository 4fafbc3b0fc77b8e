package subagent

import (
	"github.com/dsh-dev/dsh/internal/permission"
	"github.com/dsh-dev/dsh/internal/sandbox"
	"github.com/dsh-dev/dsh/internal/session"
)

// SourceDelegation is the Source of the permission events a child gets
// from its parent.
const SourceDelegation = "delegation"

// ApplyPermission writes the delegated permission st (the parent's state
// captured at start) into a fresh child's log, after any fork seed, so it
// overrides whatever the seed carried:
//
//   - auto and full-access select the same preset: an auto child's asks
//     go to the automatic reviewer call by call, a full-access child is
//     unconfined as its parent is.
//   - read-only, workspace-write and custom keep the parent's sandbox
//     mode with approval "never": a child has no one to answer an ask, so
//     asks are denied at once and the fence is never widened. No preset is
//     selected, so the child's preset reads as custom.
//
// A zero st (nothing captured) fails closed to read-only.
func ApplyPermission(child *session.Log, st permission.State) error {
	switch st.Preset {
	case permission.PresetAuto, permission.PresetFullAccess:
		return permission.Select(child, st.Preset, SourceDelegation)
	}
	mode := st.Mode
	if mode == "" {
		mode = sandbox.ReadOnly
	}
	if _, err := child.Append(session.TypeSandboxMode, permission.SandboxMode{Mode: mode, Source: SourceDelegation}); err != nil {
		return err
	}
	_, err := child.Append(session.TypeApprovalPolicy, permission.ApprovalPolicy{Policy: permission.ApprovalNever, Source: SourceDelegation})
	return err
}
