package sqlite

import (
	"bytes"
	"context"
	"database/sql"
	"database/sql/driver"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/dsh-dev/dsh/internal/session"
)

// repairAttempts bounds how often Load re-reads a log whose repair lost a
// race with another writer (which may itself have repaired it).
const repairAttempts = 3

// Load reads and validates session id and returns its balanced log. A log
// left open by a crash is repaired first: the closers of
// [session.Closers] are appended durably, with the same conditional
// append as [Store.Append], so a concurrent writer is never overwritten.
// Nothing is truncated or deleted. Unreadable data fails with an error
// wrapping [ErrCorrupt] and a *[session.FormatError]; it affects only
// this session.
//
// The store cannot tell a crashed log from one a live process is still
// writing: Load is for resuming, and a live session must be viewed with
// [Store.Inspect] instead.
//
// A session whose lease a live process holds is refused with a
// *[BusyError] when it needs repair; its holder loads it with
// [Lease.Load].
func (s *Store) Load(ctx context.Context, id string) (session.Header, []session.Event, error) {
	return s.load(ctx, id, s.Append, false)
}

// load is Load with the repair written through appendFn; bare leaves
// the bodies of session.Bare events unread (see Lease.Load).
func (s *Store) load(ctx context.Context, id string, appendFn func(context.Context, string, []session.Event) error, bare bool) (session.Header, []session.Event, error) {
	for attempt := 1; ; attempt++ {
		h, events, err := s.readRange(ctx, id, 0, 0, bare)
		if err != nil {
			return session.Header{}, nil, err
		}
		closers := session.Closers(events)
		if len(closers) == 0 {
			return h, events, nil
		}
		err = appendFn(ctx, id, closers)
		if err == nil {
			return h, append(events, closers...), nil
		}
		if !errors.Is(err, ErrSeqConflict) || attempt == repairAttempts {
			return session.Header{}, nil, fmt.Errorf("session %s: repair: %w", id, err)
		}
	}
}

// Inspect is Load without the write: it returns the balanced view of
// session id, with any closers appended in memory only (numbered after
// the stored events), and user/messages stored as inbox references
// expanded, as a [session.Log] holds them (see [session.InboxRef]).
func (s *Store) Inspect(ctx context.Context, id string) (session.Header, []session.Event, error) {
	h, events, err := s.inspectStored(ctx, id)
	if err != nil {
		return session.Header{}, nil, err
	}
	events, err = session.ExpandEvents(events)
	if err != nil {
		return session.Header{}, nil, corrupt(id, -1, err.Error())
	}
	return h, events, nil
}

// inspectStored is Inspect in the stored form: inbox references stay.
func (s *Store) inspectStored(ctx context.Context, id string) (session.Header, []session.Event, error) {
	h, events, err := s.read(ctx, id, 0)
	if err != nil {
		return session.Header{}, nil, err
	}
	return h, append(events, session.Closers(events)...), nil
}

// ReadFrom returns the stored events of session id with seq >= fromSeq,
// validated, without repair: a crashed log's closers are not included.
// User/messages stored as inbox references are expanded, as a
// [session.Log] holds them (see [session.InboxRef]).
func (s *Store) ReadFrom(ctx context.Context, id string, fromSeq int64) ([]session.Event, error) {
	if fromSeq < 0 {
		return nil, fmt.Errorf("session %s: read from negative seq %d", id, fromSeq)
	}
	_, events, err := s.read(ctx, id, fromSeq)
	if err != nil || !session.HasInboxRefs(events) {
		return events, err
	}
	if fromSeq > 0 {
		// A reference may point before fromSeq: expand over the whole log.
		if _, events, err = s.read(ctx, id, 0); err != nil {
			return nil, err
		}
	}
	events, err = session.ExpandEvents(events)
	if err != nil {
		return nil, corrupt(id, -1, err.Error())
	}
	return events[min(fromSeq, int64(len(events))):], nil
}

// ReadPage returns at most limit stored events of session id from seq
// fromSeq on, validated, in the stored form (inbox references are not
// expanded: see [session.Expander]) and without repair (see
// [session.Balance]): one page of a log read in bounded memory. A page
// past the end is empty.
func (s *Store) ReadPage(ctx context.Context, id string, fromSeq int64, limit int) ([]session.Event, error) {
	if fromSeq < 0 || limit <= 0 {
		return nil, fmt.Errorf("session %s: read page from seq %d, limit %d", id, fromSeq, limit)
	}
	_, events, err := s.readRange(ctx, id, fromSeq, limit, false)
	return events, err
}

// read returns the header and the stored events from seq from on, from
// one read snapshot, checking the header, every envelope and the seq
// numbering.
func (s *Store) read(ctx context.Context, id string, from int64) (session.Header, []session.Event, error) {
	return s.readRange(ctx, id, from, 0, false)
}

// readRange is read of at most limit events (0: all). With bare, the
// bodies of session.Bare events are not read: they come as
// session.ReleasedEvents made from the row's columns.
func (s *Store) readRange(ctx context.Context, id string, from int64, limit int, bare bool) (session.Header, []session.Event, error) {
	conn, err := s.r.Conn(ctx)
	if err != nil {
		return session.Header{}, nil, fmt.Errorf("session %s: read: %w", id, err)
	}
	defer conn.Close()
	tx, err := conn.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return session.Header{}, nil, fmt.Errorf("session %s: read: %w", id, err)
	}
	// A read-only transaction has nothing to commit; the events are read
	// on its connection, in its snapshot.
	defer tx.Rollback()

	var (
		hb   []byte
		next int64
	)
	err = tx.QueryRowContext(ctx, `SELECT CAST(header AS BLOB), ifnull(CAST(next_seq AS INTEGER), -1)
		FROM sessions WHERE id = ?`, id).Scan(&hb, &next)
	if errors.Is(err, sql.ErrNoRows) {
		return session.Header{}, nil, fmt.Errorf("session %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return session.Header{}, nil, fmt.Errorf("session %s: read: %w", id, err)
	}
	h, err := decodeHeader(id, hb)
	if err != nil {
		return session.Header{}, nil, err
	}
	if next < 0 {
		return session.Header{}, nil, corrupt(id, -1, fmt.Sprintf("next seq %d", next))
	}

	end := next
	if limit > 0 {
		end = min(next, from+int64(limit))
	}
	// A page is a LIMIT, not a seq bound, so that events stored past
	// next_seq are still seen as corruption.
	rowLimit := int64(-1)
	if limit > 0 {
		rowLimit = int64(limit)
	}
	// Rows are decoded on other goroutines while the scan goes on:
	// decoding and validating an envelope costs about what scanning its
	// row does. next_seq bounds the preallocation; it is capped because a
	// tampered value must not trigger a huge allocation.
	dec := newDecoder(id, from, bare, min(max(end-from, 0), maxPrealloc))
	defer dec.stop()
	want := from
	// A bad row is corruption, reported after the scan ends (rawQuery's
	// errors are the driver's).
	var bad error
	row := func(v []driver.Value) error {
		seq, ok0 := v[0].(int64)
		typ, ok1 := v[1].([]byte)
		tm, ok2 := v[2].(int64)
		body, ok3 := v[3].([]byte)
		if !ok0 || !ok1 || !ok2 || (!ok3 && v[3] != nil) {
			bad = corrupt(id, want, fmt.Sprintf("unreadable row: column types %T, %T, %T, %T", v[0], v[1], v[2], v[3]))
			return errStopRows
		}
		if seq != want {
			bad = corrupt(id, want, fmt.Sprintf("seq gap: next stored seq is %d", seq))
			return errStopRows
		}
		// The driver may reuse a []byte value for the next row; the
		// decoded event aliases its body.
		if body != nil {
			body = bytes.Clone(body)
		}
		dec.add(typ, tm, body)
		want++
		return nil
	}
	// The query leaves out the body of the one session.Bare type; the
	// decoding refuses a body left out of any other type. The rows are
	// read through the driver: database/sql's per-column conversions
	// were a fifth of reading a long log.
	bareType := ""
	if bare {
		bareType = session.TypeAssistantChunk
	}
	q := `SELECT seq, CAST(type AS BLOB), time, CASE WHEN type = ? THEN NULL ELSE CAST(body AS BLOB) END
		FROM events WHERE session_id = ? AND seq >= ? ORDER BY seq LIMIT ?`
	err = conn.Raw(func(dc any) error { return rawQuery(ctx, dc, q, []any{bareType, id, from, rowLimit}, 4, row) })
	if bad != nil {
		return session.Header{}, nil, bad
	}
	if err != nil {
		return session.Header{}, nil, fmt.Errorf("session %s: read: %w", id, err)
	}
	switch {
	case want == from && from > next:
		// A suffix read starting past the end.
	case want > next:
		return session.Header{}, nil, corrupt(id, next, fmt.Sprintf("events stored past next seq %d", next))
	case want == end:
		// Complete (up to the page's end).
	case want < end:
		return session.Header{}, nil, corrupt(id, want, fmt.Sprintf("log ends before next seq %d", next))
	default:
		return session.Header{}, nil, corrupt(id, next, fmt.Sprintf("events stored past next seq %d", next))
	}
	events, err := dec.finish()
	if err != nil {
		return session.Header{}, nil, err
	}
	return h, events, nil
}

// internType returns typ as a string, reusing the previous row's string
// when equal: logs are long runs of few types.
func internType(types []string, typ []byte) string {
	if n := len(types); n > 0 && types[n-1] == string(typ) {
		return types[n-1]
	}
	return string(typ)
}

// errStopRows ends a raw scan at a bad row (the row function keeps the
// error to report).
var errStopRows = errors.New("stop")

// maxPrealloc caps the rows a read preallocates for (a variable for the
// test of a log longer than that).
var maxPrealloc int64 = 1 << 20

// decodeEvent decodes and validates one stored envelope.
func decodeEvent(body []byte) (session.Event, error) {
	// The layout the store writes decodes in one pass, its data aliasing
	// the row's bytes; anything else the usual way.
	if e, ok, err := session.DecodeStored(body); ok {
		return e, err
	}
	var e session.Event
	if err := json.Unmarshal(body, &e); err != nil {
		return session.Event{}, fmt.Errorf("envelope does not decode: %v", err)
	}
	if err := e.Validate(); err != nil {
		return session.Event{}, err
	}
	return e, nil
}
