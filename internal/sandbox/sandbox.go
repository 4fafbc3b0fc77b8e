// Package sandbox confines commands so that they can write only where the
// session's sandbox mode allows, and fences in-process writes the same
// way.
//
// Modes fence writes, network and host UNIX sockets: commands still run
// and may read everywhere in every mode, except the policy's deny-read
// list (credentials and dsh's own state: DenyRead, refused with
// "Permission denied" under both backends), everything outside the
// workspace and the system directories under ConfineReads, and what dsh
// and its ancestors hold (their environment, memory and descriptors:
// see Harden and the helper), and connect only to the UNIX sockets of their
// workspace, writable roots and TMPDIR, plus those a policy allows
// (unixgate.go). A backend that cannot confine is never bypassed
// silently: Confine fails with SANDBOX_UNAVAILABLE. Every command,
// danger-full-access included (Sandbox.Supervise), runs under a
// per-command supervisor, the helper, so that nothing it starts outlives
// it or dsh.
package sandbox

import (
	"context"
	"errors"
	"syscall"

	"github.com/dsh-dev/dsh/internal/proc"
)

// Mode is a session's sandbox mode.
type Mode string

// Sandbox modes, from narrowest to widest.
const (
	ReadOnly         Mode = "read-only"
	WorkspaceWrite   Mode = "workspace-write"
	DangerFullAccess Mode = "danger-full-access"
)

// ParseMode validates a mode name.
func ParseMode(s string) (Mode, error) {
	switch m := Mode(s); m {
	case ReadOnly, WorkspaceWrite, DangerFullAccess:
		return m, nil
	}
	return "", errors.New("unknown sandbox mode " + s + " (want read-only, workspace-write or danger-full-access)")
}

// Rank orders modes by how much they allow.
func (m Mode) Rank() int {
	switch m {
	case ReadOnly:
		return 0
	case WorkspaceWrite:
		return 1
	case DangerFullAccess:
		return 2
	}
	return -1
}

// Policy is what one confined command may do.
type Policy struct {
	Mode Mode
	// Workspace is the writable root in workspace-write (the session cwd
	// or its project root).
	Workspace string
	// WritableRoots are extra writable directories (temp directories,
	// an approved escalation).
	WritableRoots []string
	// Network allows network access in read-only and workspace-write
	// (danger-full-access always has it).
	Network bool
	// UnixSockets are pathname UNIX sockets (or directories of them)
	// outside the workspace that commands may connect to, e.g. an
	// ssh-agent or a database socket. Absolute paths. Others outside the
	// workspace, its writable roots and the temp dirs are refused.
	UnixSockets []string
	// DenyRead are absolute paths (files or directories) that neither a
	// confined command nor a file tool may read, in read-only and
	// workspace-write (DefaultDenyRead, adjusted by the configuration):
	// secrets such as ~/.ssh and $DSH_HOME. A denial is an error, never
	// an empty file.
	DenyRead []string
	// ConfineReads limits reads to Workspace, WritableRoots, ReadRoots
	// and the system's read-only directories (SystemReadRoots), for
	// sessions driven by untrusted input (a pull request review): no
	// $HOME, no $DSH_HOME, no other repository.
	ConfineReads bool
	// ReadRoots are extra readable directories under ConfineReads, and
	// in every mode exceptions inside a DenyRead entry: of the deny
	// entries and the readable roots (Workspace, WritableRoots,
	// ReadRoots) holding a path, the most specific decides.
	ReadRoots []string
	// Protected are extra paths (files or directories; absolute, or
	// relative to Workspace) that stay read-only although they lie in a
	// writable root, as .git does: the repository files that trusted
	// hooks run. The repository's agent configuration (.dsh, .claude,
	// .codex) is always protected (configPaths); CheckWrite refuses both
	// by name even where they do not exist yet, the backends only where
	// they exist.
	Protected []string

	// sessionTmp is the Session's private TMPDIR (Session.Confine sets
	// it); "" outside a Session.
	sessionTmp string
	// pin, set by a Session, returns the directory ID the socket gate
	// must hold a root to: the first one the session saw at that path.
	pin func(root string, id fileID) fileID
}

// Enforcement says how completely a backend confines.
type Enforcement string

// Enforcement levels.
const (
	// Full: writes outside the writable roots, .git metadata writes and
	// (unless allowed) network access are all blocked.
	Full Enforcement = "full"
	// Partial: some of the above is not enforced (e.g. Landlock without
	// network rules on an older kernel); the gap is logged.
	Partial Enforcement = "partial"
	// None: danger-full-access, nothing is confined.
	None Enforcement = "none"
)

// Confined is a command ready to run under a policy.
type Confined struct {
	Argv []string
	Env  []string // extra environment for the wrapper, if any
	// ProcAttr, when set, adjusts how Argv must be started (the
	// namespaces the helper is created in): the spawner calls it on its
	// SysProcAttr before starting. A Confined must be started by the
	// process that made it (the helper checks its parent's pid).
	ProcAttr    func(*syscall.SysProcAttr)
	Backend     string
	Enforcement Enforcement
	// Gaps names what a partial enforcement does not cover.
	Gaps []string
	// Denied reports whether a finished command's output shows that the
	// sandbox refused something (so the result can say so plainly and the
	// model may ask to escalate).
	Denied func(exitCode int, output []byte) bool
	// Run, when set, runs the command through the session's sandbox
	// server (Session) instead of starting Argv: spec is what proc.Run
	// would be given for Argv (its Dir, Env, OutputLimit and KillGrace
	// are used), and Run falls back to exactly proc.Run(ctx, spec) when
	// the server cannot take the command. Nil: start Argv.
	Run func(ctx context.Context, spec proc.Spec) (proc.Outcome, error)
}

// CodeUnavailable is the tool error code when no backend can confine.
const CodeUnavailable = "SANDBOX_UNAVAILABLE"

// ErrUnavailable is returned (wrapped) when no backend can confine.
var ErrUnavailable = errors.New("no sandbox backend can confine commands on this machine")
