package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/dsh-dev/dsh/internal/session"
)

// insertChunk is how many rows one multi-row INSERT writes, and the unit
// in which a batch is validated and encoded. Binding many rows per
// statement amortizes database/sql's per-Exec overhead.
const insertChunk = 64

func insertEventsSQL(rows int) string {
	var b strings.Builder
	b.WriteString("INSERT INTO events (session_id, seq, type, time, body) VALUES ")
	for i := range rows {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString("(?, ?, ?, ?, ?)")
	}
	return b.String()
}

// Append durably appends events to session id in one transaction; it
// implements [session.Sink]. The first event's seq must equal the stored
// next seq and the seqs must be contiguous, else nothing is written and
// the error is a *[SeqConflictError]. Every event is validated
// ([session.Event.Validate]) before it is written and an invalid event
// rolls back the whole batch. An unknown id fails with [ErrNotFound]; an
// empty batch is a no-op. A session whose lease a live process holds is
// refused with a *[BusyError]: its holder writes through its [Lease].
func (s *Store) Append(ctx context.Context, id string, events []session.Event) error {
	return s.appendChecked(ctx, id, events, func(ctx context.Context, tx *sql.Tx, lease *sql.Stmt) error {
		return s.checkNotLeased(ctx, tx, lease, id)
	})
}

// appendChecked is Append with check run first in the write transaction
// (the lease condition); a check error writes nothing.
func (s *Store) appendChecked(ctx context.Context, id string, events []session.Event, check func(context.Context, *sql.Tx, *sql.Stmt) error) error {
	if len(events) == 0 {
		return nil
	}
	if err := checkSeqs(id, events[0].Seq, events); err != nil {
		return err
	}
	st, err := s.appendStmts(ctx, len(events) >= insertChunk)
	if err != nil {
		return fmt.Errorf("session %s: append: %w", id, err)
	}
	enc, err := startEncoder(id, events, true)
	if err != nil {
		return err
	}
	defer enc.stop()
	return s.inTx(ctx, func(tx *sql.Tx) error {
		if err := check(ctx, tx, st.lease); err != nil {
			return err
		}
		return s.appendTx(ctx, tx, st, id, enc)
	})
}

// checkSeqs checks that events are numbered from first on.
func checkSeqs(id string, first int64, events []session.Event) error {
	for i, e := range events {
		if want := first + int64(i); e.Seq != want {
			return &SeqConflictError{SessionID: id, Want: want, Got: e.Seq}
		}
	}
	return nil
}

// appendTx is the conditional append inside a write transaction: the
// transaction began IMMEDIATE, so the next_seq read here cannot change
// before the commit. st holds the statements, the multi-row insert
// included when the batch has a full chunk.
func (s *Store) appendTx(ctx context.Context, tx *sql.Tx, st appendStmts, id string, enc *encoder) error {
	events := enc.events
	var (
		next       int64
		sum        summary
		cwd        string
		searchFrom int64 // the first unindexed seq, -1 for none (search_lag.go)
	)
	err := tx.StmtContext(ctx, st.next).QueryRowContext(ctx, id).Scan(&next, &sum.title, &sum.turns, &sum.state, &cwd, &searchFrom)
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("session %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("session %s: append: %w", id, err)
	}
	if events[0].Seq != next {
		return &SeqConflictError{SessionID: id, Want: next, Got: events[0].Seq}
	}
	args := make([]any, 0, 5*insertChunk)
	var insN *sql.Stmt
	if st.insertN != nil {
		insN = tx.StmtContext(ctx, st.insertN)
	}
	ins1 := tx.StmtContext(ctx, st.insert1)
	for k := range enc.chunks() {
		lo, bodies, err := enc.wait(k)
		if err != nil {
			return err
		}
		// A full chunk is one statement; a short tail goes row by row
		// rather than needing a statement per tail length.
		ins, per := insN, insertChunk
		if len(bodies) < insertChunk {
			ins, per = ins1, 1
		}
		for i := 0; i < len(bodies); i += per {
			args = args[:0]
			for j := i; j < i+per; j++ {
				e := events[lo+j]
				args = append(args, id, e.Seq, e.Type, e.Time, bodies[j])
			}
			if _, err := ins.ExecContext(ctx, args...); err != nil {
				return fmt.Errorf("session %s: append at seq %d: %w", id, events[lo+i].Seq, err)
			}
		}
	}
	if deferIndex(searchFrom, events) {
		if searchFrom < 0 {
			searchFrom = events[0].Seq
		}
	} else {
		if searchFrom >= 0 {
			if err := indexStored(ctx, tx, st.search, id, cwd, searchFrom, next); err != nil {
				return err
			}
		}
		if err := indexBatch(ctx, tx, st.search, id, cwd, events); err != nil {
			return err
		}
		searchFrom = -1
	}
	var lag any // NULL: nothing left unindexed
	if searchFrom >= 0 {
		lag = searchFrom
	}
	for _, e := range events {
		sum.fold(e)
	}
	end := next + int64(len(events))
	if _, err := tx.StmtContext(ctx, st.update).ExecContext(ctx, end, s.now(), sum.title, sum.turns, sum.state, lag, id); err != nil {
		return fmt.Errorf("session %s: append: %w", id, err)
	}
	return nil
}

// encoder validates and encodes the envelopes of a batch, chunk by chunk
// in seq order, on background goroutines: validation
// (session.CheckLossless) costs about as much as the insert itself, so
// overlapping the two shortens a large append (by about a fifth for
// 256-event batches on two cores). A batch of one chunk is encoded up
// front, before any lock is taken.
type encoder struct {
	id       string
	events   []session.Event
	validate bool
	bodies   []string
	errs     []error         // errs[k] is chunk k's result
	done     []chan struct{} // done[k] is closed when chunk k is encoded
	claim    atomic.Int64    // next chunk for a worker to take
	halt     atomic.Bool
	wg       sync.WaitGroup
}

// startEncoder starts encoding events. A single-chunk batch is encoded
// synchronously and its validation error returned at once.
func startEncoder(id string, events []session.Event, validate bool) (*encoder, error) {
	n := (len(events) + insertChunk - 1) / insertChunk
	e := &encoder{id: id, events: events, validate: validate,
		bodies: make([]string, len(events)), errs: make([]error, n), done: make([]chan struct{}, n)}
	for k := range e.done {
		e.done[k] = make(chan struct{})
	}
	if n == 1 {
		e.encode(0)
		return e, e.errs[0]
	}
	for range min(runtime.GOMAXPROCS(0), n) {
		e.wg.Go(func() {
			for !e.halt.Load() {
				k := int(e.claim.Add(1) - 1)
				if k >= n {
					return
				}
				e.encode(k)
			}
		})
	}
	return e, nil
}

func (e *encoder) chunks() int { return len(e.done) }

func (e *encoder) bounds(k int) (lo, hi int) {
	return k * insertChunk, min((k+1)*insertChunk, len(e.events))
}

func (e *encoder) encode(k int) {
	defer close(e.done[k])
	lo, hi := e.bounds(k)
	for i := lo; i < hi; i++ {
		ev := e.events[i]
		// Unvalidated events (an import: parsed and checked already)
		// take Marshal's path, which compacts whatever they hold.
		compact := false
		if e.validate {
			spaced, err := ev.ValidateSpacing()
			if err != nil {
				e.errs[k] = fmt.Errorf("session %s: append: %w", e.id, err)
				return
			}
			compact = !spaced
		}
		b, err := encodeBody(ev, compact)
		if err != nil {
			e.errs[k] = fmt.Errorf("session %s: append: encode event %d: %w", e.id, ev.Seq, err)
			return
		}
		e.bodies[i] = string(b)
	}
}

// wait blocks until chunk k is encoded and returns its first index and
// bodies, or its error.
func (e *encoder) wait(k int) (lo int, bodies []string, err error) {
	<-e.done[k]
	lo, hi := e.bounds(k)
	return lo, e.bodies[lo:hi], e.errs[k]
}

// stop makes the workers quit after their current chunk and waits for
// them, so that none outlives the append.
func (e *encoder) stop() {
	e.halt.Store(true)
	e.wg.Wait()
}
