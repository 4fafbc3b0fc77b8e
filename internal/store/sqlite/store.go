// Package sqlite is the embedded default session store: one SQLite
// database (normally $DSH_HOME/dsh.db) holding every session's header and
// its append-only event log.
//
// The store is the durable side of [session.Log]: [Store.Append]
// implements [session.Sink]. Appends are conditional on the stored next
// seq, so two processes writing the same database can never interleave or
// overwrite each other's events; the loser gets [ErrSeqConflict]. Reading
// validates every event, and [Store.Load] closes a log left open by a
// crash by appending the synthetic closers of [session.Closers]. Nothing
// is ever truncated or deleted.
//
// A process that writes a live session holds its lease ([Store.Acquire],
// lease.go): a second process is refused with SESSION_BUSY, a killed
// holder's lease is taken over, and appends through a [Lease] are
// conditional on its epoch, so a stale holder can never write.
package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"time"

	"github.com/dsh-dev/dsh/internal/session"

	_ "modernc.org/sqlite" // registers the "sqlite" database/sql driver
)

// schemaVersion is stored in PRAGMA user_version. Bump it and add a step
// to migrate when the schema changes. Version 2 added the leases table,
// version 3 the summary columns of the sessions table (summary.go),
// version 4 the workspace registry (workspaces.go) and the partial
// indexes of top-level listings, version 5 made events a rowid table
// (schemaV5), version 6 the listing indexes ordered by (updated_at, id)
// that serve a paged listing (schemaV6, list.go), version 7 the
// automation tables (schemaV7, automation.go), version 8 the full-text
// search index (schemaV8, search_index.go), backfilled from the logs in
// the background (search_backfill.go), version 9 the index's lag
// (migrateV9, search_lag.go), version 10 the webhook deliveries' content
// keys (schemaV10, automation.go).
const schemaVersion = 10

// busyTimeout is how long a connection waits for another process's write
// lock before failing with SQLITE_BUSY.
const busyTimeout = 5 * time.Second

// schemaV1 creates the version-1 schema. The events table is keyed by
// (session_id, seq), so a duplicate seq cannot be stored (version 1 kept
// it without a rowid; schemaV5 adds one). body keeps the whole envelope
// so that a read never has to reassemble columns; type and time are
// copies for ad-hoc queries.
const schemaV1 = `
CREATE TABLE IF NOT EXISTS sessions (
	id         TEXT PRIMARY KEY,
	header     TEXT NOT NULL,
	cwd        TEXT NOT NULL DEFAULT '',
	parent     TEXT NOT NULL DEFAULT '',
	created_at INTEGER NOT NULL,
	updated_at INTEGER NOT NULL,
	next_seq   INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS sessions_by_updated ON sessions (updated_at DESC);
CREATE INDEX IF NOT EXISTS sessions_by_cwd ON sessions (cwd, updated_at DESC);
CREATE INDEX IF NOT EXISTS sessions_by_parent ON sessions (parent);
CREATE TABLE IF NOT EXISTS events (
	session_id TEXT NOT NULL REFERENCES sessions (id),
	seq        INTEGER NOT NULL,
	type       TEXT NOT NULL,
	time       INTEGER NOT NULL,
	body       TEXT NOT NULL,
	PRIMARY KEY (session_id, seq)
) WITHOUT ROWID;
`

// schemaV5 rebuilds the events table of schemaV1 as a rowid table whose
// (session_id, seq) primary key is a separate index. Without a rowid the
// whole row is the b-tree key, so every row over about 1 KB (a request
// header with the tool schemas is ~33 KB, tool results and messages are
// often several) overflows, and every insert or seek read the whole
// payload of each overflowing row it compared against: at the first
// flush of a new session that was the largest single cost of start-up,
// growing with the database. Rows keep their order: the copy goes
// session by session, seq by seq.
const schemaV5 = `
CREATE TABLE events_v5 (
	session_id TEXT NOT NULL REFERENCES sessions (id),
	seq        INTEGER NOT NULL,
	type       TEXT NOT NULL,
	time       INTEGER NOT NULL,
	body       TEXT NOT NULL,
	PRIMARY KEY (session_id, seq)
);
INSERT INTO events_v5 (session_id, seq, type, time, body)
	SELECT session_id, seq, type, time, body FROM events ORDER BY session_id, seq;
DROP TABLE events;
ALTER TABLE events_v5 RENAME TO events;
`

// Store is a session store backed by one SQLite database file. It is safe
// for concurrent use, and several Stores (in several processes) may share
// one file.
type Store struct {
	// w is the write pool: one connection whose transactions begin
	// IMMEDIATE, so writers in this process queue in database/sql and
	// writers in other processes wait on the SQLite lock (busy_timeout)
	// instead of failing a read-to-write upgrade mid-transaction.
	w *sql.DB
	// r is the read pool: several query_only connections that read WAL
	// snapshots concurrently with the writer.
	r *sql.DB

	// The append statements, prepared on the writer at the first append
	// (the multi-row insert at the first batch that fills it), not at
	// Open: parsing them is a good part of opening the store, and a
	// command that never appends does not need them. Transactions rebind
	// them.
	prepMu sync.Mutex
	st     appendStmts // guarded by prepMu; fields are nil until prepared

	// now returns the wall clock in Unix milliseconds (updated_at, lease
	// expiry); tests replace it.
	now func() int64
	// leaseTTL is the lifetime of a lease past its last renewal.
	leaseTTL time.Duration

	// The backfill of the search index after the version-8 migration
	// (search_backfill.go): a goroutine owned by the store, stopped and
	// waited for by Close.
	bgStop context.CancelFunc
	bg     sync.WaitGroup
}

// Open opens (creating if needed) the store at path, creating its parent
// directory with mode 0700 and the file with mode 0600, and migrates the
// schema.
func Open(ctx context.Context, path string) (*Store, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("open session store: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(abs), 0o700); err != nil {
		return nil, fmt.Errorf("open session store: %w", err)
	}
	// Create the file ourselves: SQLite would create it world-readable,
	// and sessions hold private conversation data. SQLite gives the -wal
	// and -shm files the database file's mode.
	f, err := os.OpenFile(abs, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open session store: %w", err)
	}
	f.Close()

	s := &Store{now: func() int64 { return time.Now().UnixMilli() }, leaseTTL: DefaultLeaseTTL}
	if s.w, err = openPool(abs, false); err != nil {
		return nil, err
	}
	if s.r, err = openPool(abs, true); err != nil {
		s.w.Close()
		return nil, err
	}
	if err := s.init(ctx); err != nil {
		s.Close()
		return nil, fmt.Errorf("open session store %s: %w", abs, err)
	}
	s.startBackfill(ctx)
	return s, nil
}

// openPool opens a connection pool on path. Per-connection pragmas go in
// the DSN so that every connection the pool ever opens gets them.
func openPool(path string, readOnly bool) (*sql.DB, error) {
	q := url.Values{}
	q.Set("_busy_timeout", fmt.Sprint(busyTimeout.Milliseconds()))
	q.Set("_journal_mode", "WAL")
	q.Set("_synchronous", "NORMAL")
	q.Set("_foreign_keys", "1")
	// A 512 KiB page cache per connection instead of SQLite's 2 MiB: the
	// store's reads are appends' neighbours and sequential pages the OS
	// caches anyway, and the default caches (outside the Go heap, so the
	// memory limit cannot bound them) added ~3 MB to a long run's
	// resident set (issue 12; bench/README.md, Memory).
	q.Add("_pragma", "cache_size(-512)")
	if readOnly {
		q.Set("_query_only", "1")
	} else {
		q.Set("_txlock", "immediate")
	}
	// A file: URI (with the path percent-encoded) lets the path contain
	// '?' or '#' without being mistaken for DSN parameters.
	dsn := (&url.URL{Scheme: "file", Path: filepath.ToSlash(path), RawQuery: q.Encode()}).String()
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("open session store %s: %w", path, err)
	}
	n := 1
	if readOnly {
		n = max(2, runtime.GOMAXPROCS(0))
	}
	db.SetMaxOpenConns(n)
	db.SetMaxIdleConns(n)
	return db, nil
}

// migration takes the schema one version up: its DDL, then any data
// step in the same transaction.
type migration struct {
	sql  string
	then func(context.Context, *sql.Tx) error
}

// migrations[i] takes the schema from version i to i+1; its length is
// schemaVersion.
var migrations = []migration{
	{sql: schemaV1},
	{sql: schemaV2},
	{sql: schemaV3, then: func(ctx context.Context, tx *sql.Tx) error {
		if err := backfillSummaries(ctx, tx); err != nil {
			return fmt.Errorf("backfill titles: %w", err)
		}
		return nil
	}},
	{sql: schemaV4},
	{sql: schemaV5},
	{sql: schemaV6},
	{sql: schemaV7},
	{sql: schemaV8, then: markBackfill},
	{then: migrateV9},
	{sql: schemaV10},
}

// init migrates the schema when it is not current. A current schema
// (every open but the first of a new build) costs one read of the
// version, without taking the write lock.
func (s *Store) init(ctx context.Context) error {
	var v int
	if err := s.w.QueryRowContext(ctx, "PRAGMA user_version").Scan(&v); err != nil {
		return err
	}
	if v == schemaVersion {
		return nil
	}
	return s.inTx(ctx, func(tx *sql.Tx) error {
		// Read the version inside the IMMEDIATE transaction so that two
		// processes opening a new file do not both migrate it.
		var v int
		if err := tx.QueryRowContext(ctx, "PRAGMA user_version").Scan(&v); err != nil {
			return err
		}
		switch {
		case v == schemaVersion:
			return nil
		case v > schemaVersion:
			return fmt.Errorf("schema version %d is newer than this build supports (%d)", v, schemaVersion)
		}
		for i, m := range migrations[v:] {
			to := v + i + 1
			if m.sql != "" {
				if _, err := tx.ExecContext(ctx, m.sql); err != nil {
					return fmt.Errorf("migrate schema to version %d: %w", to, err)
				}
			}
			if m.then != nil {
				if err := m.then(ctx, tx); err != nil {
					return fmt.Errorf("migrate schema to version %d: %w", to, err)
				}
			}
		}
		_, err := tx.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", schemaVersion))
		return err
	})
}

// appendStmts are the statements of an append, prepared on the writer.
type appendStmts struct {
	next, update, insert1, insertN, search, lease *sql.Stmt
}

// appendStmts returns the append statements, preparing them on first
// use; full asks for the multi-row insert too. It must not be called
// inside a write transaction: preparing needs the writer's only
// connection.
func (s *Store) appendStmts(ctx context.Context, full bool) (appendStmts, error) {
	s.prepMu.Lock()
	defer s.prepMu.Unlock()
	var err error
	prep := func(dst **sql.Stmt, q string) {
		if err == nil && *dst == nil {
			*dst, err = s.w.PrepareContext(ctx, q)
		}
	}
	prep(&s.st.next, `SELECT next_seq, CAST(title AS TEXT), ifnull(CAST(turns AS INTEGER), 0), CAST(state AS TEXT), CAST(cwd AS TEXT),
		ifnull(search_from, -1) FROM sessions WHERE id = ?`)
	prep(&s.st.update, `UPDATE sessions SET next_seq = ?, updated_at = ?, title = ?, turns = ?, state = ?, search_from = ? WHERE id = ?`)
	prep(&s.st.insert1, insertEventsSQL(1))
	prep(&s.st.search, insertSearchSQL)
	prep(&s.st.lease, leaseSQL)
	if full {
		prep(&s.st.insertN, insertEventsSQL(insertChunk))
	}
	return s.st, err
}

// Close closes the store. Statements and pools are released; the database
// file stays.
func (s *Store) Close() error {
	if s.bgStop != nil {
		s.bgStop()
		s.bg.Wait()
	}
	s.prepMu.Lock()
	for _, st := range []*sql.Stmt{s.st.next, s.st.update, s.st.insert1, s.st.insertN, s.st.search, s.st.lease} {
		if st != nil {
			st.Close()
		}
	}
	s.st = appendStmts{}
	s.prepMu.Unlock()
	return errors.Join(s.w.Close(), s.r.Close())
}

// inTx runs fn in one write transaction, committing if fn succeeds.
func (s *Store) inTx(ctx context.Context, fn func(*sql.Tx) error) error {
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		tx.Rollback()
		return err
	}
	return tx.Commit()
}

// Create stores a new, empty session with header h. The id must be
// non-empty and new (else [ErrExists]); the version must be
// [session.FormatVersion].
func (s *Store) Create(ctx context.Context, h session.Header) error {
	if err := checkHeader(h); err != nil {
		return fmt.Errorf("create session: %w", err)
	}
	return s.inTx(ctx, func(tx *sql.Tx) error { return s.insertSession(ctx, tx, h) })
}

func checkHeader(h session.Header) error {
	if h.ID == "" {
		return errors.New("header has no id")
	}
	if h.Version != session.FormatVersion {
		return fmt.Errorf("session %s: header version %d, want %d", h.ID, h.Version, session.FormatVersion)
	}
	return nil
}

// insertSession inserts h with an empty log, or fails with ErrExists.
func (s *Store) insertSession(ctx context.Context, tx *sql.Tx, h session.Header) error {
	hb, err := json.Marshal(h)
	if err != nil {
		return fmt.Errorf("session %s: encode header: %w", h.ID, err)
	}
	// ON CONFLICT DO NOTHING turns a duplicate into zero affected rows,
	// which needs no driver-specific error decoding.
	res, err := tx.ExecContext(ctx, `INSERT INTO sessions (id, header, cwd, parent, created_at, updated_at, next_seq)
		VALUES (?, ?, ?, ?, ?, ?, 0) ON CONFLICT (id) DO NOTHING`,
		h.ID, string(hb), h.Cwd, h.ParentSession, h.CreatedAt, s.now())
	if err != nil {
		return fmt.Errorf("session %s: %w", h.ID, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("session %s: %w", h.ID, err)
	} else if n == 0 {
		return fmt.Errorf("session %s: %w", h.ID, ErrExists)
	}
	return nil
}

// entryQuery selects what an Entry needs, without reading any log. The
// CASTs keep a tampered column from failing the whole scan; the header is
// the only column that is validated.
const entryQuery = `SELECT CAST(s.id AS TEXT), CAST(s.header AS BLOB),
	ifnull(CAST(s.next_seq AS INTEGER), 0), ifnull(CAST(s.updated_at AS INTEGER), 0),
	ifnull(CAST(s.title AS TEXT), ''), ifnull(CAST(s.turns AS INTEGER), 0), ifnull(CAST(s.state AS TEXT), ''),
	ifnull(l.held, 0), ifnull(l.pid, 0), ifnull(l.host, ''), ifnull(l.start_id, ''), ifnull(l.expires_at, 0)
	FROM sessions s LEFT JOIN leases l ON l.session_id = s.id`

// scanEntry scans one row of entryQuery; now decides lease liveness. The
// header is returned undecoded, for [decodeEntry].
func scanEntry(rows interface{ Scan(...any) error }, now int64) (Entry, []byte, error) {
	var (
		e   Entry
		id  sql.NullString
		hb  []byte
		sum summary
		r   leaseRow
	)
	if err := rows.Scan(&id, &hb, &e.Events, &e.UpdatedAt, &sum.title, &sum.turns, &sum.state,
		&r.held, &r.owner.PID, &r.owner.Host, &r.owner.Start, &r.expires); err != nil {
		return Entry{}, nil, err
	}
	e.Header.ID = id.String
	_, live := r.liveHolder(now)
	e.Title, e.Turns, e.Status = sum.title, sum.turns, sum.status(live)
	return e, hb, nil
}

// decodeEntry decodes the header scanEntry left raw.
func decodeEntry(e *Entry, hb []byte) {
	id := e.Header.ID
	e.Header, e.Err = decodeHeader(id, hb)
	if e.Err != nil {
		e.Header = session.Header{ID: id}
	}
}

// Get returns the listing entry of session id, or an error wrapping
// [ErrNotFound].
func (s *Store) Get(ctx context.Context, id string) (Entry, error) {
	e, hb, err := scanEntry(s.r.QueryRowContext(ctx, entryQuery+` WHERE s.id = ?`, id), s.now())
	if errors.Is(err, sql.ErrNoRows) {
		return Entry{}, fmt.Errorf("session %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return Entry{}, fmt.Errorf("session %s: %w", id, err)
	}
	decodeEntry(&e, hb)
	return e, nil
}

// Header returns the header of session id.
func (s *Store) Header(ctx context.Context, id string) (session.Header, error) {
	var hb []byte
	err := s.r.QueryRowContext(ctx, `SELECT CAST(header AS BLOB) FROM sessions WHERE id = ?`, id).Scan(&hb)
	if errors.Is(err, sql.ErrNoRows) {
		return session.Header{}, fmt.Errorf("session %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return session.Header{}, fmt.Errorf("session %s: read header: %w", id, err)
	}
	return decodeHeader(id, hb)
}

// decodeHeader decodes and checks a stored header.
func decodeHeader(id string, hb []byte) (session.Header, error) {
	h, ok := parseHeader(hb)
	if !ok {
		h = session.Header{}
		if err := json.Unmarshal(hb, &h); err != nil {
			return h, corrupt(id, -1, fmt.Sprintf("header does not decode: %v", err))
		}
	}
	if h.ID != id {
		return h, corrupt(id, -1, fmt.Sprintf("header names session %q", h.ID))
	}
	if h.Version != session.FormatVersion {
		return h, corrupt(id, -1, fmt.Sprintf("header version %d, want %d", h.Version, session.FormatVersion))
	}
	return h, nil
}

// corrupt returns an error wrapping both ErrCorrupt and a
// *session.FormatError; seq < 0 means the header.
func corrupt(id string, seq int64, reason string) error {
	return fmt.Errorf("%w: %w", ErrCorrupt, &session.FormatError{SessionID: id, Seq: seq, Reason: reason})
}
