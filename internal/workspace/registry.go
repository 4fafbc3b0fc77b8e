package workspace

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/google/uuid"

	"github.com/dsh-dev/dsh/internal/store"
)

// The workspace registry: directories registered by the user (or
// bootstrapped from stored sessions), each with an ordered list of
// sessions. Records live in the store (every mutation one transaction);
// the registry decides what a path means. A record's path is canonical
// (absolute, symlinks and ".." resolved), so every spelling of one
// directory names one record. A session belongs to a workspace when it is
// registered there and its header's cwd is the workspace's path; other
// registrations are left out when reading.

// Stable machine codes of registry errors.
const (
	CodeNotFound     = "WORKSPACE_NOT_FOUND"
	CodeAmbiguous    = "WORKSPACE_AMBIGUOUS"
	CodeInvalidPath  = "WORKSPACE_INVALID_PATH"
	CodeMoveInvalid  = "WORKSPACE_MOVE_INVALID"
	CodeAttachFailed = "WORKSPACE_ATTACH_FAILED"
	CodeInvalidTitle = "WORKSPACE_INVALID_TITLE"
)

// Statuses of a [Workspace], computed on every read.
const (
	StatusOK         = "ok"
	StatusMissingDir = "missing-dir"
)

// Error is a registry error with a stable code.
type Error struct {
	Code    string
	Message string
	Err     error
}

// Error implements error: the message, which says what went wrong in
// full (Err is there for errors.Is and errors.As).
func (e *Error) Error() string {
	if e.Message == "" && e.Err != nil {
		return e.Err.Error()
	}
	return e.Message
}

// Unwrap returns the underlying error.
func (e *Error) Unwrap() error { return e.Err }

// Workspace is a registered directory as clients see it.
type Workspace struct {
	ID         string   `json:"id"`
	Path       string   `json:"path"`
	Title      string   `json:"title"`
	CreatedAt  int64    `json:"createdAt"`
	UpdatedAt  int64    `json:"updatedAt"`
	SessionIDs []string `json:"sessionIds"`
	// Status is StatusOK or StatusMissingDir, checked on read and never
	// stored: a missing directory does not change the record.
	Status string `json:"status"`
}

// Registry is the workspace registry over a store. It keeps no state of
// its own, so several registries (and processes) may share one store.
type Registry struct {
	st store.Workspaces
}

// NewRegistry returns the registry stored in st.
func NewRegistry(st store.Workspaces) *Registry {
	return &Registry{st: st}
}

// Canonical returns the canonical spelling of path: it must be absolute
// and name an existing directory; symlinks and ".." are resolved.
func Canonical(path string) (string, error) {
	if path == "" {
		return "", &Error{Code: CodeInvalidPath, Message: "workspace path is empty"}
	}
	if !filepath.IsAbs(path) {
		return "", &Error{Code: CodeInvalidPath, Message: fmt.Sprintf("workspace path %q is not absolute", path)}
	}
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		msg := fmt.Sprintf("workspace path %s: %v", path, err)
		if errors.Is(err, fs.ErrNotExist) {
			msg = fmt.Sprintf("workspace path %s does not exist", path)
		}
		return "", &Error{Code: CodeInvalidPath, Message: msg, Err: err}
	}
	if real, err = filepath.Abs(real); err != nil {
		return "", &Error{Code: CodeInvalidPath, Message: fmt.Sprintf("workspace path %s: %v", path, err), Err: err}
	}
	fi, err := os.Stat(real)
	if err != nil {
		return "", &Error{Code: CodeInvalidPath, Message: fmt.Sprintf("workspace path %s: %v", path, err), Err: err}
	}
	if !fi.IsDir() {
		return "", &Error{Code: CodeInvalidPath, Message: fmt.Sprintf("workspace path %s is not a directory", path)}
	}
	return real, nil
}

// DefaultTitle is the title of a workspace created without one: the last
// segment of its path, or the path itself for a root.
func DefaultTitle(path string) string {
	base := filepath.Base(path)
	if base == "" || base == "." || base == string(filepath.Separator) || strings.HasSuffix(path, string(filepath.Separator)) {
		return path
	}
	return base
}

// wrap turns store errors into registry errors.
func wrap(err error, id string) error {
	var we *Error
	switch {
	case err == nil:
		return nil
	case errors.As(err, &we):
		return err
	case errors.Is(err, store.ErrWorkspaceNotFound):
		return &Error{Code: CodeNotFound, Message: fmt.Sprintf("no workspace %s", id), Err: err}
	case errors.Is(err, store.ErrWorkspaceMove):
		return &Error{Code: CodeMoveInvalid, Message: err.Error(), Err: err}
	}
	return err
}

// view turns a stored record into a Workspace: members whose cwd is not
// the path are left out, and the status is checked now.
func view(rec store.WorkspaceRecord, canon *cwdCanon) Workspace {
	w := Workspace{ID: rec.ID, Path: rec.Path, Title: rec.Title, CreatedAt: rec.CreatedAt, UpdatedAt: rec.UpdatedAt,
		SessionIDs: []string{}, Status: StatusOK}
	for _, m := range rec.Members {
		if canon.matches(m.Cwd, rec.Path) {
			w.SessionIDs = append(w.SessionIDs, m.SessionID)
		}
	}
	if fi, err := os.Stat(rec.Path); err != nil || !fi.IsDir() {
		w.Status = StatusMissingDir
	}
	return w
}

// cwdCanon canonicalizes session cwds for one read, each at most once.
type cwdCanon map[string]string

// matches reports whether a session cwd is the canonical path: equal as
// stored, or equal once canonicalized (a cwd stored through a symlink).
func (c *cwdCanon) matches(cwd, path string) bool {
	if cwd == "" {
		return false
	}
	if cwd == path {
		return true
	}
	if *c == nil {
		*c = cwdCanon{}
	}
	real, ok := (*c)[cwd]
	if !ok {
		real, _ = Canonical(cwd)
		(*c)[cwd] = real
	}
	return real == path
}

// List returns every workspace in registry order.
func (r *Registry) List(ctx context.Context) ([]Workspace, error) {
	recs, err := r.st.ListWorkspaces(ctx)
	if err != nil {
		return nil, err
	}
	var canon cwdCanon
	out := make([]Workspace, 0, len(recs))
	for _, rec := range recs {
		out = append(out, view(rec, &canon))
	}
	return out, nil
}

// Get returns workspace id.
func (r *Registry) Get(ctx context.Context, id string) (Workspace, error) {
	rec, err := r.st.GetWorkspace(ctx, id)
	if err != nil {
		return Workspace{}, wrap(err, id)
	}
	var canon cwdCanon
	return view(rec, &canon), nil
}

// Resolve returns the id of the one workspace whose id starts with
// prefix (an exact id wins), for commands that accept abbreviated ids.
func (r *Registry) Resolve(ctx context.Context, prefix string) (string, error) {
	recs, err := r.st.ListWorkspaces(ctx)
	if err != nil {
		return "", err
	}
	var found []string
	for _, rec := range recs {
		if rec.ID == prefix {
			return rec.ID, nil
		}
		if prefix != "" && strings.HasPrefix(rec.ID, prefix) {
			found = append(found, rec.ID)
		}
	}
	switch len(found) {
	case 1:
		return found[0], nil
	case 0:
		return "", &Error{Code: CodeNotFound, Message: fmt.Sprintf("no workspace id starts with %q", prefix), Err: store.ErrWorkspaceNotFound}
	}
	return "", &Error{Code: CodeAmbiguous, Message: fmt.Sprintf("workspace id prefix %q matches %d workspaces", prefix, len(found))}
}

// ByPath returns the workspace registered for path's canonical spelling;
// ok is false when none is.
func (r *Registry) ByPath(ctx context.Context, path string) (w Workspace, ok bool, err error) {
	canon, err := Canonical(path)
	if err != nil {
		return Workspace{}, false, err
	}
	all, err := r.List(ctx)
	if err != nil {
		return Workspace{}, false, err
	}
	for _, w := range all {
		if w.Path == canon {
			return w, true, nil
		}
	}
	return Workspace{}, false, nil
}

// Create registers the directory path (absolute, existing) under title
// (default: its last segment) at the front of the order. A directory
// already registered, under any spelling, returns its record with created
// false.
func (r *Registry) Create(ctx context.Context, path, title string) (w Workspace, created bool, err error) {
	canon, err := Canonical(path)
	if err != nil {
		return Workspace{}, false, err
	}
	title = strings.TrimSpace(title)
	if title == "" {
		title = DefaultTitle(canon)
	}
	rec, created, err := r.st.CreateWorkspace(ctx, store.WorkspaceRecord{ID: uuid.NewString(), Path: canon, Title: title})
	if err != nil {
		return Workspace{}, false, err
	}
	var c cwdCanon
	return view(rec, &c), created, nil
}

// Rename sets the title of workspace id; titles may repeat, and a blank
// one is refused.
func (r *Registry) Rename(ctx context.Context, id, title string) (Workspace, error) {
	title = strings.TrimSpace(title)
	if title == "" {
		return Workspace{}, &Error{Code: CodeInvalidTitle, Message: "workspace title is empty"}
	}
	rec, err := r.st.RenameWorkspace(ctx, id, title)
	if err != nil {
		return Workspace{}, wrap(err, id)
	}
	var c cwdCanon
	return view(rec, &c), nil
}

// Delete removes the registration of workspace id: the directory and the
// sessions are untouched.
func (r *Registry) Delete(ctx context.Context, id string) error {
	return wrap(r.st.DeleteWorkspace(ctx, id), id)
}

// MoveBefore moves workspace id just before beforeID in the order; ""
// moves it to the end.
func (r *Registry) MoveBefore(ctx context.Context, id, beforeID string) error {
	return wrap(r.st.MoveWorkspace(ctx, id, beforeID), id)
}

// MoveSessionBefore moves a member session of workspace wsID just before
// beforeID (another member); "" moves it to the end.
func (r *Registry) MoveSessionBefore(ctx context.Context, wsID, sessionID, beforeID string) error {
	return wrap(r.st.MoveWorkspaceSession(ctx, wsID, sessionID, beforeID), wsID)
}

// Attach registers session sessionID in workspace wsID, at the front of
// its sessions. The session's stored cwd must be the workspace's path
// (else WORKSPACE_ATTACH_FAILED): a session belongs to the directory it
// was created in.
func (r *Registry) Attach(ctx context.Context, wsID, sessionID string) error {
	rec, err := r.st.GetWorkspace(ctx, wsID)
	if err != nil {
		return wrap(err, wsID)
	}
	cwd, err := r.st.SessionCwd(ctx, sessionID)
	if err != nil {
		return &Error{Code: CodeAttachFailed, Message: fmt.Sprintf("attach session %s to workspace %s: %v", sessionID, wsID, err), Err: err}
	}
	var c cwdCanon
	if !c.matches(cwd, rec.Path) {
		return &Error{Code: CodeAttachFailed, Message: fmt.Sprintf("session %s works in %s, not in workspace %s (%s)", sessionID, cwd, wsID, rec.Path)}
	}
	if err := r.st.AttachSession(ctx, wsID, sessionID); err != nil {
		if errors.Is(err, store.ErrWorkspaceNotFound) {
			return wrap(err, wsID)
		}
		return &Error{Code: CodeAttachFailed, Message: fmt.Sprintf("attach session %s to workspace %s: %v", sessionID, wsID, err), Err: err}
	}
	return nil
}

// Bootstrap registers, once per store, a workspace for every directory
// that stored top-level sessions worked in (the canonical cwd; sessions
// whose directory no longer exists stay ungrouped), with those sessions
// attached newest first, and the workspaces ordered by their newest
// session. Later calls, in this process or another, do nothing: the
// marker is written in the bootstrap's own transaction.
func (r *Registry) Bootstrap(ctx context.Context) error {
	if done, err := r.st.WorkspacesBootstrapped(ctx); err != nil || done {
		return err
	}
	cwds, err := r.st.TopLevelSessionCwds(ctx)
	if err != nil {
		return err
	}
	var (
		recs  []store.WorkspaceRecord
		index = map[string]int{}
		canon = map[string]string{}
	)
	for _, c := range cwds { // newest first
		if c.Cwd == "" || !filepath.IsAbs(c.Cwd) {
			continue
		}
		path, seen := canon[c.Cwd]
		if !seen {
			path, _ = Canonical(c.Cwd)
			canon[c.Cwd] = path
		}
		if path == "" {
			continue
		}
		i, ok := index[path]
		if !ok {
			i = len(recs)
			index[path] = i
			recs = append(recs, store.WorkspaceRecord{ID: uuid.NewString(), Path: path, Title: DefaultTitle(path),
				CreatedAt: c.CreatedAt, UpdatedAt: c.UpdatedAt})
		}
		recs[i].Members = append(recs[i].Members, store.Member{SessionID: c.SessionID, Cwd: c.Cwd})
		recs[i].CreatedAt = min(recs[i].CreatedAt, c.CreatedAt)
	}
	_, err = r.st.BootstrapWorkspaces(ctx, recs)
	return err
}
