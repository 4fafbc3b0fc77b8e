package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/dsh-dev/dsh/internal/store"
)

// The workspace registry tables (schema version 4). Order is an integer
// position per row; a move renumbers the rows of its list, which are few.
// The bootstrap marker is a row of meta, written in the bootstrap's own
// transaction.
const schemaV4 = `
CREATE TABLE IF NOT EXISTS workspaces (
	id         TEXT PRIMARY KEY,
	path       TEXT NOT NULL UNIQUE,
	title      TEXT NOT NULL,
	created_at INTEGER NOT NULL,
	updated_at INTEGER NOT NULL,
	position   INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS workspace_sessions (
	workspace_id TEXT NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
	session_id   TEXT NOT NULL REFERENCES sessions (id),
	position     INTEGER NOT NULL,
	PRIMARY KEY (workspace_id, session_id)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS workspace_sessions_by_session ON workspace_sessions (session_id);
CREATE TABLE IF NOT EXISTS meta (
	key   TEXT PRIMARY KEY,
	value TEXT NOT NULL
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS sessions_top_by_cwd ON sessions (cwd, updated_at DESC) WHERE parent = '';
CREATE INDEX IF NOT EXISTS sessions_top_by_updated ON sessions (updated_at DESC) WHERE parent = '';
`

// metaBootstrapped is the meta key set once the registry was bootstrapped.
const metaBootstrapped = "workspaces.bootstrapped"

// querier is what both *sql.DB and *sql.Tx offer for reads.
type querier interface {
	QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row
}

const workspaceCols = `id, path, title, created_at, updated_at`

// ListWorkspaces implements [store.Workspaces].
func (s *Store) ListWorkspaces(ctx context.Context) ([]store.WorkspaceRecord, error) {
	tx, err := s.r.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, fmt.Errorf("list workspaces: %w", err)
	}
	defer tx.Rollback()
	out, err := listWorkspaces(ctx, tx, "")
	if err != nil {
		return nil, fmt.Errorf("list workspaces: %w", err)
	}
	return out, nil
}

// GetWorkspace implements [store.Workspaces].
func (s *Store) GetWorkspace(ctx context.Context, id string) (store.WorkspaceRecord, error) {
	tx, err := s.r.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return store.WorkspaceRecord{}, fmt.Errorf("workspace %s: %w", id, err)
	}
	defer tx.Rollback()
	return getWorkspace(ctx, tx, id)
}

func getWorkspace(ctx context.Context, q querier, id string) (store.WorkspaceRecord, error) {
	out, err := listWorkspaces(ctx, q, id)
	if err != nil {
		return store.WorkspaceRecord{}, fmt.Errorf("workspace %s: %w", id, err)
	}
	if len(out) == 0 {
		return store.WorkspaceRecord{}, fmt.Errorf("workspace %s: %w", id, store.ErrWorkspaceNotFound)
	}
	return out[0], nil
}

// listWorkspaces reads every record (or only record id), with members,
// from one snapshot.
func listWorkspaces(ctx context.Context, q querier, id string) ([]store.WorkspaceRecord, error) {
	query, args := `SELECT `+workspaceCols+` FROM workspaces ORDER BY position, rowid`, []any(nil)
	mq, margs := `SELECT m.workspace_id, m.session_id, ifnull(CAST(s.cwd AS TEXT), '')
		FROM workspace_sessions m LEFT JOIN sessions s ON s.id = m.session_id
		ORDER BY m.workspace_id, m.position`, []any(nil)
	if id != "" {
		query, args = `SELECT `+workspaceCols+` FROM workspaces WHERE id = ?`, []any{id}
		mq, margs = `SELECT m.workspace_id, m.session_id, ifnull(CAST(s.cwd AS TEXT), '')
			FROM workspace_sessions m LEFT JOIN sessions s ON s.id = m.session_id
			WHERE m.workspace_id = ? ORDER BY m.position`, []any{id}
	}
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	var out []store.WorkspaceRecord
	index := map[string]int{}
	for rows.Next() {
		var w store.WorkspaceRecord
		if err := rows.Scan(&w.ID, &w.Path, &w.Title, &w.CreatedAt, &w.UpdatedAt); err != nil {
			rows.Close()
			return nil, err
		}
		index[w.ID] = len(out)
		out = append(out, w)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return out, nil
	}
	rows, err = q.QueryContext(ctx, mq, margs...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var wid string
		var m store.Member
		if err := rows.Scan(&wid, &m.SessionID, &m.Cwd); err != nil {
			return nil, err
		}
		if i, ok := index[wid]; ok {
			out[i].Members = append(out[i].Members, m)
		}
	}
	return out, rows.Err()
}

// CreateWorkspace implements [store.Workspaces].
func (s *Store) CreateWorkspace(ctx context.Context, w store.WorkspaceRecord) (rec store.WorkspaceRecord, created bool, err error) {
	if w.ID == "" || w.Path == "" {
		return store.WorkspaceRecord{}, false, errors.New("create workspace: id and path are required")
	}
	err = s.inTx(ctx, func(tx *sql.Tx) error {
		var id string
		err := tx.QueryRowContext(ctx, `SELECT id FROM workspaces WHERE path = ?`, w.Path).Scan(&id)
		if err == nil {
			rec, err = getWorkspace(ctx, tx, id)
			return err
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		now := s.now()
		if _, err := tx.ExecContext(ctx, `INSERT INTO workspaces (id, path, title, created_at, updated_at, position)
			VALUES (?, ?, ?, ?, ?, (SELECT ifnull(min(position), 0) - 1 FROM workspaces))`,
			w.ID, w.Path, w.Title, now, now); err != nil {
			return err
		}
		created = true
		rec, err = getWorkspace(ctx, tx, w.ID)
		return err
	})
	if err != nil {
		return store.WorkspaceRecord{}, false, fmt.Errorf("create workspace %s: %w", w.Path, err)
	}
	return rec, created, nil
}

// RenameWorkspace implements [store.Workspaces].
func (s *Store) RenameWorkspace(ctx context.Context, id, title string) (store.WorkspaceRecord, error) {
	var rec store.WorkspaceRecord
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		if err := updated(tx.ExecContext(ctx, `UPDATE workspaces SET title = ?, updated_at = ? WHERE id = ?`, title, s.now(), id)); err != nil {
			return err
		}
		var err error
		rec, err = getWorkspace(ctx, tx, id)
		return err
	})
	if err != nil {
		return store.WorkspaceRecord{}, fmt.Errorf("rename workspace %s: %w", id, err)
	}
	return rec, nil
}

// updated turns an UPDATE or DELETE that touched no row into
// ErrWorkspaceNotFound.
func updated(res sql.Result, err error) error {
	if err != nil {
		return err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return err
	}
	if n == 0 {
		return store.ErrWorkspaceNotFound
	}
	return nil
}

// DeleteWorkspace implements [store.Workspaces]. The registrations go with
// the record (ON DELETE CASCADE), in the same transaction.
func (s *Store) DeleteWorkspace(ctx context.Context, id string) error {
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		return updated(tx.ExecContext(ctx, `DELETE FROM workspaces WHERE id = ?`, id))
	})
	if err != nil {
		return fmt.Errorf("delete workspace %s: %w", id, err)
	}
	return nil
}

// MoveWorkspace implements [store.Workspaces].
func (s *Store) MoveWorkspace(ctx context.Context, id, beforeID string) error {
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		ids, err := column(ctx, tx, `SELECT id FROM workspaces ORDER BY position, rowid`)
		if err != nil {
			return err
		}
		order, err := moveBefore(ids, id, beforeID)
		if err != nil {
			return err
		}
		for i, w := range order {
			if _, err := tx.ExecContext(ctx, `UPDATE workspaces SET position = ? WHERE id = ?`, i, w); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("move workspace %s: %w", id, err)
	}
	return nil
}

// AttachSession implements [store.Workspaces].
func (s *Store) AttachSession(ctx context.Context, wsID, sessionID string) error {
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		if err := workspaceExists(ctx, tx, wsID); err != nil {
			return err
		}
		var n int
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM sessions WHERE id = ?`, sessionID).Scan(&n); err != nil {
			return err
		}
		if n == 0 {
			return fmt.Errorf("session %s: %w", sessionID, store.ErrNotFound)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO workspace_sessions (workspace_id, session_id, position)
			VALUES (?, ?, (SELECT ifnull(min(position), 0) - 1 FROM workspace_sessions WHERE workspace_id = ?))
			ON CONFLICT DO NOTHING`, wsID, sessionID, wsID); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `UPDATE workspaces SET updated_at = ? WHERE id = ?`, s.now(), wsID)
		return err
	})
	if err != nil {
		return fmt.Errorf("attach session %s to workspace %s: %w", sessionID, wsID, err)
	}
	return nil
}

func workspaceExists(ctx context.Context, tx *sql.Tx, id string) error {
	var n int
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM workspaces WHERE id = ?`, id).Scan(&n); err != nil {
		return err
	}
	if n == 0 {
		return store.ErrWorkspaceNotFound
	}
	return nil
}

// MoveWorkspaceSession implements [store.Workspaces].
func (s *Store) MoveWorkspaceSession(ctx context.Context, wsID, sessionID, beforeID string) error {
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		if err := workspaceExists(ctx, tx, wsID); err != nil {
			return err
		}
		ids, err := column(ctx, tx, `SELECT session_id FROM workspace_sessions WHERE workspace_id = ? ORDER BY position`, wsID)
		if err != nil {
			return err
		}
		order, err := moveBefore(ids, sessionID, beforeID)
		if err != nil {
			return err
		}
		for i, sid := range order {
			if _, err := tx.ExecContext(ctx, `UPDATE workspace_sessions SET position = ? WHERE workspace_id = ? AND session_id = ?`, i, wsID, sid); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("move session %s in workspace %s: %w", sessionID, wsID, err)
	}
	return nil
}

// moveBefore returns ids with id moved just before beforeID, or to the end
// when beforeID is "" (DOM insertBefore).
func moveBefore(ids []string, id, beforeID string) ([]string, error) {
	if id == beforeID {
		return nil, fmt.Errorf("%w: %s cannot move before itself", store.ErrWorkspaceMove, id)
	}
	out := make([]string, 0, len(ids))
	found, anchor := false, beforeID == ""
	for _, x := range ids {
		switch x {
		case id:
			found = true
		case beforeID:
			anchor = true
			out = append(out, id, x)
		default:
			out = append(out, x)
		}
	}
	if !found {
		return nil, fmt.Errorf("%w: %s is not in the list", store.ErrWorkspaceMove, id)
	}
	if !anchor {
		return nil, fmt.Errorf("%w: anchor %s is not in the list", store.ErrWorkspaceMove, beforeID)
	}
	if beforeID == "" {
		out = append(out, id)
	}
	return out, nil
}

// column reads a one-column string query.
func column(ctx context.Context, q querier, query string, args ...any) ([]string, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var v string
		if err := rows.Scan(&v); err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

// SessionCwd implements [store.Workspaces].
func (s *Store) SessionCwd(ctx context.Context, id string) (string, error) {
	var cwd string
	err := s.r.QueryRowContext(ctx, `SELECT CAST(cwd AS TEXT) FROM sessions WHERE id = ?`, id).Scan(&cwd)
	if errors.Is(err, sql.ErrNoRows) {
		return "", fmt.Errorf("session %s: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return "", fmt.Errorf("session %s: %w", id, err)
	}
	return cwd, nil
}

// TopLevelSessionCwds implements [store.Workspaces]. Only columns are read:
// the cwd column is the header's.
func (s *Store) TopLevelSessionCwds(ctx context.Context) ([]store.SessionCwd, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT CAST(id AS TEXT), CAST(cwd AS TEXT), created_at, updated_at
		FROM sessions WHERE parent = '' ORDER BY created_at DESC, rowid DESC`)
	if err != nil {
		return nil, fmt.Errorf("list session directories: %w", err)
	}
	defer rows.Close()
	var out []store.SessionCwd
	for rows.Next() {
		var c store.SessionCwd
		if err := rows.Scan(&c.SessionID, &c.Cwd, &c.CreatedAt, &c.UpdatedAt); err != nil {
			return nil, fmt.Errorf("list session directories: %w", err)
		}
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list session directories: %w", err)
	}
	return out, nil
}

// WorkspacesBootstrapped implements [store.Workspaces].
func (s *Store) WorkspacesBootstrapped(ctx context.Context) (bool, error) {
	var n int
	err := s.r.QueryRowContext(ctx, `SELECT count(*) FROM meta WHERE key = ?`, metaBootstrapped).Scan(&n)
	if err != nil {
		return false, fmt.Errorf("read workspace bootstrap marker: %w", err)
	}
	return n > 0, nil
}

// BootstrapWorkspaces implements [store.Workspaces].
func (s *Store) BootstrapWorkspaces(ctx context.Context, ws []store.WorkspaceRecord) (bool, error) {
	done := false
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		var n int
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM meta WHERE key = ?`, metaBootstrapped).Scan(&n); err != nil {
			return err
		}
		if n > 0 {
			return nil
		}
		var first int64
		if err := tx.QueryRowContext(ctx, `SELECT ifnull(min(position), 0) FROM workspaces`).Scan(&first); err != nil {
			return err
		}
		now := s.now()
		for i, w := range ws {
			id := w.ID
			err := tx.QueryRowContext(ctx, `SELECT id FROM workspaces WHERE path = ?`, w.Path).Scan(&id)
			switch {
			case errors.Is(err, sql.ErrNoRows):
				created, updatedAt := w.CreatedAt, w.UpdatedAt
				if created == 0 {
					created = now
				}
				if updatedAt == 0 {
					updatedAt = created
				}
				if _, err := tx.ExecContext(ctx, `INSERT INTO workspaces (id, path, title, created_at, updated_at, position)
					VALUES (?, ?, ?, ?, ?, ?)`, w.ID, w.Path, w.Title, created, updatedAt, first-int64(len(ws))+int64(i)); err != nil {
					return err
				}
			case err != nil:
				return err
			}
			for j, m := range w.Members {
				if _, err := tx.ExecContext(ctx, `INSERT INTO workspace_sessions (workspace_id, session_id, position)
					VALUES (?, ?, ?) ON CONFLICT DO NOTHING`, id, m.SessionID, j); err != nil {
					return err
				}
			}
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO meta (key, value) VALUES (?, ?)`, metaBootstrapped, fmt.Sprint(now)); err != nil {
			return err
		}
		done = true
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("bootstrap workspaces: %w", err)
	}
	return done, nil
}
