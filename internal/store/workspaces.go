package store

import (
	"context"
	"errors"
)

// Workspace registry storage.
//
// The store keeps registrations only; what a path means (its canonical
// spelling, whether it exists, whether a session's cwd matches it) is
// decided by the registry in internal/workspace. Every mutation is one
// transaction, so a crash never leaves half of one behind.

var (
	// ErrWorkspaceNotFound reports a workspace id the store does not hold.
	ErrWorkspaceNotFound = errors.New("workspace not found")
	// ErrWorkspaceMove reports a move naming an unknown anchor, an
	// unknown session, or the moved item itself as its anchor.
	ErrWorkspaceMove = errors.New("invalid workspace move")
)

// WorkspaceRecord is one stored workspace registration.
type WorkspaceRecord struct {
	ID    string
	Path  string
	Title string
	// CreatedAt and UpdatedAt are Unix milliseconds.
	CreatedAt int64
	UpdatedAt int64
	// Members are the registered sessions in their stored order, each with
	// the cwd of its stored header. A registration is not yet membership:
	// the registry keeps only members whose cwd is the workspace's path.
	Members []Member
}

// Member is one registered session of a workspace.
type Member struct {
	SessionID string
	// Cwd is the session header's cwd ("" when the session is not
	// stored or its header is unreadable).
	Cwd string
}

// SessionCwd is one top-level stored session, for the bootstrap.
type SessionCwd struct {
	SessionID string
	Cwd       string
	CreatedAt int64
	UpdatedAt int64
}

// Workspaces stores the workspace registry: records in a display order and
// each one's ordered session registrations.
type Workspaces interface {
	// ListWorkspaces returns every record in registry order.
	ListWorkspaces(ctx context.Context) ([]WorkspaceRecord, error)
	// GetWorkspace returns record id, or an error wrapping
	// [ErrWorkspaceNotFound].
	GetWorkspace(ctx context.Context, id string) (WorkspaceRecord, error)
	// CreateWorkspace stores w (ID, Path, Title set by the caller; times by
	// the store) at the front of the order and returns it with created
	// true, or returns the record already registered for w.Path with
	// created false.
	CreateWorkspace(ctx context.Context, w WorkspaceRecord) (rec WorkspaceRecord, created bool, err error)
	// RenameWorkspace sets the title of record id.
	RenameWorkspace(ctx context.Context, id, title string) (WorkspaceRecord, error)
	// DeleteWorkspace removes record id and its session registrations;
	// sessions are untouched.
	DeleteWorkspace(ctx context.Context, id string) error
	// MoveWorkspace moves record id just before beforeID ("" = to the end).
	MoveWorkspace(ctx context.Context, id, beforeID string) error
	// AttachSession registers sessionID (a stored session) at the front of
	// workspace wsID; attaching it again changes nothing.
	AttachSession(ctx context.Context, wsID, sessionID string) error
	// MoveWorkspaceSession moves the registered session sessionID of wsID
	// just before beforeID ("" = to the end).
	MoveWorkspaceSession(ctx context.Context, wsID, sessionID, beforeID string) error
	// SessionCwd returns the cwd of stored session id's header, or an
	// error wrapping [ErrNotFound].
	SessionCwd(ctx context.Context, id string) (string, error)
	// TopLevelSessionCwds returns every stored top-level session's id and
	// cwd, newest first, for the bootstrap.
	TopLevelSessionCwds(ctx context.Context) ([]SessionCwd, error)
	// BootstrapWorkspaces stores ws, in that order and before any record
	// already registered, and marks the registry bootstrapped, all in one
	// transaction, unless it was bootstrapped already: then it stores
	// nothing and returns false. A record whose path is already registered
	// adds its sessions to that record instead.
	BootstrapWorkspaces(ctx context.Context, ws []WorkspaceRecord) (bool, error)
	// WorkspacesBootstrapped reports whether the bootstrap has run.
	WorkspacesBootstrapped(ctx context.Context) (bool, error)
}
