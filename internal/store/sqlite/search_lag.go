package sqlite

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/dsh-dev/dsh/internal/session"
)

// The search index's lag.
//
// Indexing costs an append about as much as storing its events: FTS5
// writes a new segment, its structure record and a document-size row in
// every transaction that adds rows, ~7 of the ~17 pages an agent step's
// commit writes, and about half of the commit's time. So an append leaves
// its events unindexed unless it ends a turn or would leave searchLagMax
// events or more unindexed; it records the first unindexed seq in the
// session's row instead (search_from, written by the UPDATE every append
// makes anyway), and the append that catches up indexes them all in one
// transaction.
//
// Invariants:
//   - every stored event below search_from (every event when it is NULL)
//     has its index rows, and no event at or above it has any;
//   - every search first catches up every session that lags
//     (catchUpSearch), in one write transaction, so a search sees every
//     stored event, as it would if each append had indexed its own;
//   - Reindex and the backfill rebuild a session's rows from its stored
//     events and clear its lag.

// migrateV9 adds the lag column, unless the file has it (migrations are
// idempotent), and the partial index that finds the sessions that lag
// without reading every row.
func migrateV9(ctx context.Context, tx *sql.Tx) error {
	var has bool
	if err := tx.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM pragma_table_info('sessions') WHERE name = 'search_from')`).Scan(&has); err != nil {
		return err
	}
	if !has {
		if _, err := tx.ExecContext(ctx, `ALTER TABLE sessions ADD COLUMN search_from INTEGER`); err != nil {
			return err
		}
	}
	_, err := tx.ExecContext(ctx, `CREATE INDEX IF NOT EXISTS sessions_search_lag ON sessions(id) WHERE search_from IS NOT NULL`)
	return err
}

// searchLagMax bounds the events a session may leave unindexed.
const searchLagMax = 64

// deferIndex reports whether an append of events to a session whose
// unindexed events start at from (-1 for none) may leave them unindexed.
func deferIndex(from int64, events []session.Event) bool {
	start := from
	if start < 0 {
		start = events[0].Seq
	}
	if events[len(events)-1].Seq+1-start >= searchLagMax {
		return false
	}
	for _, e := range events {
		if e.Type == session.TypeTurnEnd {
			return false
		}
	}
	return true
}

// indexStored indexes the stored events of session id with from <= seq <
// to, with the insert statement ins. An event that cannot be decoded is
// skipped, as Reindex skips it.
func indexStored(ctx context.Context, tx *sql.Tx, ins *sql.Stmt, id, cwd string, from, to int64) error {
	if from >= to {
		return nil
	}
	types, in := typeArgs(indexedTypeList...)
	rows, err := tx.QueryContext(ctx, `SELECT CAST(body AS BLOB) FROM events
		WHERE session_id = ? AND seq >= ? AND seq < ? AND type IN (`+in+`) ORDER BY seq`,
		append([]any{id, from, to}, types...)...)
	if err != nil {
		return fmt.Errorf("session %s: index: %w", id, err)
	}
	var events []session.Event
	for rows.Next() {
		var body []byte
		if err := rows.Scan(&body); err != nil {
			rows.Close()
			return fmt.Errorf("session %s: index: %w", id, err)
		}
		if e, err := decodeEvent(body); err == nil {
			events = append(events, e)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("session %s: index: %w", id, err)
	}
	return indexEvents(ctx, tx, ins, id, cwd, events, storedSplice(ctx, tx, id))
}

// catchUpSearch indexes what every lagging session left unindexed, so
// that a search that follows sees every stored event. A store where no
// session lags costs one read of the partial index.
func (s *Store) catchUpSearch(ctx context.Context) error {
	var lag bool
	if err := s.r.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM sessions WHERE search_from IS NOT NULL)`).Scan(&lag); err != nil {
		return fmt.Errorf("search index: %w", err)
	}
	if !lag {
		return nil
	}
	st, err := s.appendStmts(ctx, false)
	if err != nil {
		return fmt.Errorf("search index: %w", err)
	}
	err = s.inTx(ctx, func(tx *sql.Tx) error {
		type lagging struct {
			id, cwd  string
			from, to int64
		}
		rows, err := tx.QueryContext(ctx, `SELECT CAST(id AS TEXT), CAST(cwd AS TEXT), search_from, next_seq
			FROM sessions WHERE search_from IS NOT NULL`)
		if err != nil {
			return err
		}
		var ls []lagging
		for rows.Next() {
			var l lagging
			if err := rows.Scan(&l.id, &l.cwd, &l.from, &l.to); err != nil {
				rows.Close()
				return err
			}
			ls = append(ls, l)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		for _, l := range ls {
			if err := indexStored(ctx, tx, st.search, l.id, l.cwd, l.from, l.to); err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, `UPDATE sessions SET search_from = NULL WHERE id = ?`, l.id); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("search index: catch up: %w", err)
	}
	return nil
}
