package sqlite

import (
	"context"
	"database/sql"
	"fmt"
)

// The backfill of the search index.
//
// The version-8 migration does not index the sessions already stored: at
// 10,000 sessions that takes minutes on a slow machine, and the migration
// holds the write lock throughout, so every other dsh process would fail
// with SQLITE_BUSY after its busy timeout. It lists them in
// search_pending instead (milliseconds), and any process that opens the
// store indexes them in the background, backfillBatch sessions per write
// transaction, so writers interleave and a process that exits keeps what
// it did. Appends index their own events meanwhile; a session's backfill
// rebuilds all of its rows, so the order does not matter. Reindex clears
// what it rebuilds.

// backfillBatch is how many sessions one backfill transaction indexes.
const backfillBatch = 32

// markBackfill lists every stored session as pending (the version-8
// migration).
func markBackfill(ctx context.Context, tx *sql.Tx) error {
	_, err := tx.ExecContext(ctx, `INSERT OR IGNORE INTO search_pending (session_id) SELECT id FROM sessions`)
	return err
}

// startBackfill starts the background backfill when sessions are pending.
// Its goroutine is the store's: Close cancels it and waits for it. The
// check runs on the writer, whose connection init has just opened: on
// the reader it would open a second connection (and parse the schema
// again) before a process that may never read gets to its first request.
func (s *Store) startBackfill(ctx context.Context) {
	var pending bool
	if err := s.w.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM search_pending)`).Scan(&pending); err != nil || !pending {
		return
	}
	bctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	s.bgStop = stop
	s.bg.Go(func() {
		// An error (the store closing, a busy database) ends this
		// process's share; the next process to open the store goes on.
		_, _ = s.Backfill(bctx)
	})
}

// Backfill indexes every pending session (see above) and returns how many
// it indexed. The background backfill runs it; tests and benchmarks call
// it to wait for the index to be complete.
func (s *Store) Backfill(ctx context.Context) (int, error) {
	total := 0
	for {
		n, err := s.backfillStep(ctx)
		total += n
		if err != nil || n == 0 {
			return total, err
		}
	}
}

// backfillStep indexes up to backfillBatch pending sessions in one write
// transaction.
func (s *Store) backfillStep(ctx context.Context) (int, error) {
	n := 0
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, `SELECT session_id FROM search_pending LIMIT ?`, backfillBatch)
		if err != nil {
			return err
		}
		var ids []string
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				rows.Close()
				return err
			}
			ids = append(ids, id)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		for _, id := range ids {
			if _, _, err := reindexTx(ctx, tx, id); err != nil {
				return fmt.Errorf("session %s: %w", id, err)
			}
		}
		n = len(ids)
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("backfill the search index: %w", err)
	}
	return n, nil
}

// IndexPending returns how many stored sessions the search index does
// not cover yet (the backfill is still running).
func (s *Store) IndexPending(ctx context.Context) (int64, error) {
	var n int64
	if err := s.r.QueryRowContext(ctx, `SELECT count(*) FROM search_pending`).Scan(&n); err != nil {
		return 0, fmt.Errorf("search index: %w", err)
	}
	return n, nil
}
