package permission

import (
	"fmt"

	"github.com/dsh-dev/dsh/internal/session"
)

// Restrictions is the payload of permission/restrictions: what a session
// started for hostile input (a GitHub review of a pull request) may not
// do, whatever its preset. It is appended when the session is created and
// holds for the session's life, its resumptions and its subagents; no
// event loosens it.
type Restrictions struct {
	// ConfineReads confines reads (commands and file tools) to the
	// workspace, ReadRoots and the system directories
	// (sandbox.Policy.ConfineReads).
	ConfineReads bool `json:"confineReads,omitempty"`
	// ReadRoots are further read-only roots under ConfineReads (the
	// repository's git directory that a worktree's objects live in).
	ReadRoots []string `json:"readRoots,omitempty"`
	// StrictEnv gives commands only the variables bash.StrictEnv names,
	// instead of dsh's environment without secret-named variables.
	StrictEnv bool `json:"strictEnv,omitempty"`
	// Tools, when not empty, are the only tools offered (MCP tools
	// included).
	Tools []string `json:"tools,omitempty"`
	// Source says who asked ("github").
	Source string `json:"source,omitempty"`
}

// Empty reports whether r restricts nothing.
func (r Restrictions) Empty() bool {
	return !r.ConfineReads && !r.StrictEnv && len(r.Tools) == 0
}

// CurrentRestrictions returns the session's restrictions: its latest
// permission/restrictions event, or none. One that cannot be decoded is
// an error (the session must not run without them).
func CurrentRestrictions(log *session.Log) (Restrictions, error) {
	var r Restrictions
	ev, ok := log.Latest(session.TypeRestrictions)
	if !ok {
		return r, nil
	}
	if err := ev.Decode(&r); err != nil {
		return Restrictions{}, fmt.Errorf("session %s: permission/restrictions at %d: %w", log.ID(), ev.Seq, err)
	}
	return r, nil
}

// Restrict appends r to log (nothing when r is empty).
func Restrict(log *session.Log, r Restrictions) error {
	if r.Empty() {
		return nil
	}
	_, err := log.Append(session.TypeRestrictions, r)
	return err
}
