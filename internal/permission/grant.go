package permission

import (
	"encoding/json"

	"github.com/dsh-dev/dsh/internal/session"
	"github.com/dsh-dev/dsh/internal/tool"
)

// SessionGrant is "allow this exact command for the rest of the session",
// logged in the approval/decided event that gave it. A later approval
// question is answered by it only when every field matches exactly: the
// same tool, byte-for-byte the same command, run in the same directory,
// asking for the same sandbox escalation (if any). Grants are read from
// the log, so they survive a resume and end with the session.
type SessionGrant struct {
	ToolName string `json:"toolName"`
	Command  string `json:"command"`
	Cwd      string `json:"cwd"`
	// SandboxPermissions is the escalation the granted call asked for
	// ("" for none): a grant for a network retry does not cover a
	// full-access one.
	SandboxPermissions string `json:"sandboxPermissions,omitempty"`
}

// sandboxPermissionsOf reads a bash call's sandbox_permissions.
func sandboxPermissionsOf(args json.RawMessage) string {
	var a struct {
		SandboxPermissions string `json:"sandbox_permissions"`
	}
	_ = json.Unmarshal(args, &a)
	return a.SandboxPermissions
}

// granted reports whether a logged session grant covers q, and the id of
// the approval that gave it.
func (s *Service) granted(q Question) (string, bool) {
	if q.Command == "" {
		return "", false
	}
	want := SessionGrant{ToolName: q.ToolName, Command: q.Command, Cwd: q.Cwd, SandboxPermissions: sandboxPermissionsOf(q.Arguments)}
	for _, g := range SessionGrants(s.Log) {
		if g.Grant == want {
			return g.ApprovalID, true
		}
	}
	return "", false
}

// LoggedGrant is a session grant and the approval that gave it.
type LoggedGrant struct {
	ApprovalID string
	Grant      SessionGrant
}

// SessionGrants lists the session's grants in log order. Only a grant on
// an allowed-once decision by the user counts, so a forged or malformed
// event cannot widen anything.
func SessionGrants(log *session.Log) []LoggedGrant {
	var out []LoggedGrant
	for e := range log.View().All() {
		if e.Type != session.TypeApprovalDecided {
			continue
		}
		var d ApprovalDecided
		if e.Decode(&d) != nil || d.Grant == nil || d.Outcome != tool.AllowedOnce || d.Grant.Command == "" {
			continue
		}
		if by := d.By; by != DecidedByUser || decidedBy(d.Answerer) != DecidedByUser || d.Answerer == AnswererSessionGrant {
			continue
		}
		out = append(out, LoggedGrant{ApprovalID: d.ID, Grant: *d.Grant})
	}
	return out
}
