package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"sync"

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
	return s.load(ctx, id, s.Append)
}

// load is Load with the repair written through appendFn.
func (s *Store) load(ctx context.Context, id string, appendFn func(context.Context, string, []session.Event) error) (session.Header, []session.Event, error) {
	for attempt := 1; ; attempt++ {
		h, events, err := s.read(ctx, id, 0)
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
	_, events, err := s.readRange(ctx, id, fromSeq, limit)
	return events, err
}

// read returns the header and the stored events from seq from on, from
// one read snapshot, checking the header, every envelope and the seq
// numbering.
func (s *Store) read(ctx context.Context, id string, from int64) (session.Header, []session.Event, error) {
	return s.readRange(ctx, id, from, 0)
}

// readRange is read of at most limit events (0: all).
func (s *Store) readRange(ctx context.Context, id string, from int64, limit int) (session.Header, []session.Event, error) {
	tx, err := s.r.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return session.Header{}, nil, fmt.Errorf("session %s: read: %w", id, err)
	}
	// A read-only transaction has nothing to commit.
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
	rows, err := tx.QueryContext(ctx, `SELECT seq, CAST(type AS BLOB), CAST(body AS BLOB)
		FROM events WHERE session_id = ? AND seq >= ? ORDER BY seq LIMIT ?`, id, from, rowLimit)
	if err != nil {
		return session.Header{}, nil, fmt.Errorf("session %s: read: %w", id, err)
	}
	defer rows.Close()
	// Rows are scanned first and decoded afterwards in parallel: decoding
	// and validating an envelope costs several times the scan.
	// next_seq bounds the preallocation; it is capped because a tampered
	// value must not trigger a huge allocation.
	bodies := make([][]byte, 0, min(max(end-from, 0), 1<<20))
	want := from
	var typ []byte
	var types []string
	for rows.Next() {
		var (
			seq  int64
			body []byte
		)
		if err := rows.Scan(&seq, (*sql.RawBytes)(&typ), &body); err != nil {
			return session.Header{}, nil, corrupt(id, want, fmt.Sprintf("unreadable row: %v", err))
		}
		if seq != want {
			return session.Header{}, nil, corrupt(id, want, fmt.Sprintf("seq gap: next stored seq is %d", seq))
		}
		bodies = append(bodies, body)
		types = append(types, internType(types, typ))
		want++
	}
	if err := rows.Err(); err != nil {
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
	events := make([]session.Event, len(bodies))
	err = parallel(len(bodies), func(lo, hi int) error {
		for i := lo; i < hi; i++ {
			seq := from + int64(i)
			e, err := decodeEvent(bodies[i])
			if err != nil {
				return corrupt(id, seq, err.Error())
			}
			if e.Seq != seq || e.Type != types[i] {
				return corrupt(id, seq, fmt.Sprintf("envelope (type %q, seq %d) does not match its row (type %q)", e.Type, e.Seq, types[i]))
			}
			events[i] = e
		}
		return nil
	})
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

// parallel calls fn over [0, n) split into contiguous ranges, one per
// available core, and returns the error of the lowest failing range, which
// is the error a sequential loop would report.
func parallel(n int, fn func(lo, hi int) error) error {
	workers := min(runtime.GOMAXPROCS(0), n/insertChunk)
	if workers <= 1 {
		return fn(0, n)
	}
	errs := make([]error, workers)
	per := (n + workers - 1) / workers
	var wg sync.WaitGroup
	for w := range workers {
		lo, hi := w*per, min((w+1)*per, n)
		wg.Go(func() { errs[w] = fn(lo, hi) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

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
