package sqlite

import (
	"bytes"
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"io"
	"strings"
	"sync"
)

// schemaV6 replaces the listing indexes of versions 1 and 4, ordered by
// updated_at alone (ties in rowid order), with ones ordered by
// (updated_at, id): the listing's order, unique, so that a page starting
// before a cursor is one range of an index, read in order, with no sort.
const schemaV6 = `
DROP INDEX IF EXISTS sessions_by_updated;
DROP INDEX IF EXISTS sessions_by_cwd;
DROP INDEX IF EXISTS sessions_top_by_updated;
DROP INDEX IF EXISTS sessions_top_by_cwd;
CREATE INDEX IF NOT EXISTS sessions_list ON sessions (updated_at DESC, id DESC);
CREATE INDEX IF NOT EXISTS sessions_list_by_cwd ON sessions (cwd, updated_at DESC, id DESC);
CREATE INDEX IF NOT EXISTS sessions_list_top ON sessions (updated_at DESC, id DESC) WHERE parent = '';
CREATE INDEX IF NOT EXISTS sessions_list_top_by_cwd ON sessions (cwd, updated_at DESC, id DESC) WHERE parent = '';
`

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
	conn, err := s.r.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("list sessions: %w", err)
	}
	defer conn.Close()
	tx, err := conn.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
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
	row := func(v []driver.Value) error {
		var (
			e   Entry
			sum summary
		)
		hb, ok1 := v[1].([]byte)
		id, ok0 := v[0].(string)
		e.Events, _ = v[2].(int64)
		e.UpdatedAt, _ = v[3].(int64)
		sum.title, _ = v[4].(string)
		sum.turns, _ = v[5].(int64)
		sum.state, _ = v[6].(string)
		if !ok0 || (!ok1 && v[1] != nil) {
			return fmt.Errorf("listing row of unexpected types %T, %T", v[0], v[1])
		}
		// The driver may reuse a []byte value for the next row.
		hb = bytes.Clone(hb)
		e.Header.ID = id
		r, ok := held[id]
		_, live := r.liveHolder(now)
		e.Title, e.Turns, e.Status = sum.title, sum.turns, sum.status(ok && live)
		cur.entries, cur.headers = append(cur.entries, e), append(cur.headers, hb)
		if len(cur.entries) == listChunk {
			flush()
		}
		return nil
	}
	// The rows are read through the driver: database/sql's per-column
	// conversions cost about a fifth of a 10,000-session listing. The
	// query runs on the transaction's connection, in its snapshot.
	if err := conn.Raw(func(dc any) error { return rawQuery(ctx, dc, q, args, 7, row) }); err != nil {
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

// rawQuery runs query on the driver connection dc and calls row with
// each row's cols values (valid only during the call).
func rawQuery(ctx context.Context, dc any, query string, args []any, cols int, row func([]driver.Value) error) error {
	qc, ok := dc.(driver.QueryerContext)
	if !ok {
		return fmt.Errorf("driver connection %T cannot query", dc)
	}
	named := make([]driver.NamedValue, len(args))
	for i, a := range args {
		named[i] = driver.NamedValue{Ordinal: i + 1, Value: a}
	}
	rows, err := qc.QueryContext(ctx, query, named)
	if err != nil {
		return err
	}
	defer rows.Close()
	if n := len(rows.Columns()); n != cols {
		return fmt.Errorf("query returns %d columns, want %d", n, cols)
	}
	v := make([]driver.Value, cols)
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		err := rows.Next(v)
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if err := row(v); err != nil {
			return err
		}
	}
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

// listQuery builds the query of a List. Each filter has its index of
// schema version 6, named so that the planner (which has no statistics)
// cannot prefer the equality on sessions_by_parent and then sort; the
// cursor is a row-value range on the index's (updated_at, id).
func listQuery(f ListFilter) (string, []any) {
	q := listColumns
	var where []string
	var args []any
	index := "sessions_list"
	if f.IDs != nil && len(f.IDs) == 0 {
		return q + " WHERE 0", nil
	}
	if f.Cwd != "" {
		where, args = append(where, "s.cwd = ?"), append(args, f.Cwd)
		index += "_by_cwd"
	}
	if f.TopLevelOnly {
		where = append(where, "s.parent = ''")
		index = strings.Replace(index, "sessions_list", "sessions_list_top", 1)
	}
	if f.IDs != nil {
		// A few sessions by primary key, sorted afterwards: cheaper than
		// a walk of the listing index.
		marks := strings.TrimSuffix(strings.Repeat("?,", len(f.IDs)), ",")
		where = append(where, "s.id IN ("+marks+")")
		for _, id := range f.IDs {
			args = append(args, id)
		}
	} else {
		q += " INDEXED BY " + index
	}
	if f.Before != nil {
		where = append(where, "(s.updated_at, s.id) < (?, ?)")
		args = append(args, f.Before.UpdatedAt, f.Before.ID)
	}
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	q += " ORDER BY s.updated_at DESC, s.id DESC"
	if f.Limit > 0 {
		q += fmt.Sprintf(" LIMIT %d", f.Limit)
	}
	return q, args
}
