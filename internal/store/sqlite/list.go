package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"sync"
)

// listChunk is how many rows of a listing one goroutine decodes.
const listChunk = 512

// listColumns selects what an Entry needs but the lease, which a listing
// reads in one query of its own (few sessions are held at any time, and a
// join costs a lookup per listed row).
const listColumns = `SELECT CAST(s.id AS TEXT), CAST(s.header AS BLOB),
	ifnull(CAST(s.next_seq AS INTEGER), 0), ifnull(CAST(s.updated_at AS INTEGER), 0),
	ifnull(CAST(s.title AS TEXT), ''), ifnull(CAST(s.turns AS INTEGER), 0), ifnull(CAST(s.state AS TEXT), '')
	FROM sessions s`

// List returns the sessions f selects, most recently updated first. A
// session whose header is damaged is listed with Err set and does not
// affect the others. No log is read: the filter runs in SQL over the cwd
// and parent columns (copies of the header's), on an index, and the
// headers are decoded while later rows are still being read.
func (s *Store) List(ctx context.Context, f ListFilter) ([]Entry, error) {
	tx, err := s.r.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, fmt.Errorf("list sessions: %w", err)
	}
	// A read-only transaction has nothing to commit; it makes the leases
	// and the sessions one snapshot.
	defer tx.Rollback()
	held, err := heldLeases(ctx, tx)
	if err != nil {
		return nil, fmt.Errorf("list sessions: %w", err)
	}
	q, args := listQuery(f)
	rows, err := tx.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("list sessions: %w", err)
	}
	defer rows.Close()
	now := s.now()

	type chunk struct {
		entries []Entry
		headers [][]byte
	}
	var (
		chunks []*chunk
		cur    = &chunk{}
		wg     sync.WaitGroup
	)
	// Each full chunk is decoded by its own goroutine while the scan goes
	// on; the goroutine owns the chunk until wg.Wait.
	flush := func() {
		c := cur
		chunks = append(chunks, c)
		cur = &chunk{}
		wg.Go(func() {
			for i := range c.entries {
				decodeEntry(&c.entries[i], c.headers[i])
			}
		})
	}
	defer wg.Wait()
	for rows.Next() {
		var (
			e   Entry
			hb  []byte
			sum summary
		)
		if err := rows.Scan(&e.Header.ID, &hb, &e.Events, &e.UpdatedAt, &sum.title, &sum.turns, &sum.state); err != nil {
			return nil, fmt.Errorf("list sessions: %w", err)
		}
		r, ok := held[e.Header.ID]
		_, live := r.liveHolder(now)
		e.Title, e.Turns, e.Status = sum.title, sum.turns, sum.status(ok && live)
		cur.entries, cur.headers = append(cur.entries, e), append(cur.headers, hb)
		if len(cur.entries) == listChunk {
			flush()
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list sessions: %w", err)
	}
	if len(cur.entries) > 0 {
		flush()
	}
	wg.Wait()
	n := 0
	for _, c := range chunks {
		n += len(c.entries)
	}
	out := make([]Entry, 0, n)
	for _, c := range chunks {
		out = append(out, c.entries...)
	}
	return out, nil
}

// heldLeases reads every held lease.
func heldLeases(ctx context.Context, tx *sql.Tx) (map[string]leaseRow, error) {
	rows, err := tx.QueryContext(ctx, `SELECT CAST(session_id AS TEXT), pid, host, start_id, expires_at FROM leases WHERE held = 1`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]leaseRow{}
	for rows.Next() {
		var id string
		r := leaseRow{held: true}
		if err := rows.Scan(&id, &r.owner.PID, &r.owner.Host, &r.owner.Start, &r.expires); err != nil {
			return nil, err
		}
		out[id] = r
	}
	return out, rows.Err()
}

// listQuery builds the query of a List. The WHERE terms match the partial
// indexes of schema version 4 (parent = ”) and sessions_by_cwd.
func listQuery(f ListFilter) (string, []any) {
	q := listColumns
	var where []string
	var args []any
	if f.Cwd != "" {
		where, args = append(where, "s.cwd = ?"), append(args, f.Cwd)
	}
	if f.TopLevelOnly {
		where = append(where, "s.parent = ''")
		if f.Cwd == "" {
			// Without statistics the planner prefers the equality on
			// sessions_by_parent and then sorts every top-level session;
			// the partial index is already in listing order.
			q += " INDEXED BY sessions_top_by_updated"
		}
	}
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	q += " ORDER BY s.updated_at DESC, s.rowid DESC"
	if f.Limit > 0 {
		q += fmt.Sprintf(" LIMIT %d", f.Limit)
	}
	return q, args
}
