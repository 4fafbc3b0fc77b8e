package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/dsh-dev/dsh/internal/session"
	"github.com/dsh-dev/dsh/internal/store"
)

// Session leases.
//
// A process that writes a session holds its lease: a row of the leases
// table naming the holder ([Owner]), an epoch that grows with every
// acquisition, and an expiry that the holder pushes forward while it
// lives. [Store.Acquire] takes the lease in one write transaction; a
// second process gets a *[BusyError] (code SESSION_BUSY) naming the
// holder. A lease whose holder was killed is taken over: it has expired,
// or its holder is provably dead on this host (see [Owner]). Appends
// through a [Lease] are conditional on its epoch as well as on the next
// seq, so a holder whose lease was taken over can never write again; it
// gets a *[LeaseLostError]. [Lease.Load] reads and repairs the log under
// the lease, and plain [Store.Append] (and the repair of [Store.Load])
// refuse a session whose lease a live process holds.

// DefaultLeaseTTL is how long a lease outlives its holder's last renewal.
// A holder renews at a third of it.
const DefaultLeaseTTL = 30 * time.Second

// schemaV2 adds the leases table. held is 1 while a holder has the
// lease; a released row keeps its epoch, so that epochs never repeat.
const schemaV2 = `
CREATE TABLE IF NOT EXISTS leases (
	session_id TEXT PRIMARY KEY REFERENCES sessions (id),
	epoch      INTEGER NOT NULL,
	held       INTEGER NOT NULL,
	pid        INTEGER NOT NULL,
	host       TEXT NOT NULL,
	start_id   TEXT NOT NULL,
	label      TEXT NOT NULL,
	since      INTEGER NOT NULL,
	expires_at INTEGER NOT NULL
);
`

// leaseRow is a stored lease.
type leaseRow struct {
	epoch   int64
	held    bool
	owner   Owner
	expires int64
}

// readLease reads the lease of id inside tx; ok is false when the
// session never had one.
// leaseSQL reads a session's lease row.
const leaseSQL = `SELECT epoch, held, pid, host, start_id, label, since, expires_at
		FROM leases WHERE session_id = ?`

func readLease(ctx context.Context, tx *sql.Tx, prepared *sql.Stmt, id string) (r leaseRow, ok bool, err error) {
	var row *sql.Row
	if prepared != nil {
		// Every append of a leased session reads its lease: prepared
		// once, the query is not parsed again for each transaction.
		row = tx.StmtContext(ctx, prepared).QueryRowContext(ctx, id)
	} else {
		row = tx.QueryRowContext(ctx, leaseSQL, id)
	}
	err = row.Scan(&r.epoch, &r.held, &r.owner.PID, &r.owner.Host,
		&r.owner.Start, &r.owner.Label, &r.owner.Since, &r.expires)
	if errors.Is(err, sql.ErrNoRows) {
		return leaseRow{}, false, nil
	}
	if err != nil {
		return leaseRow{}, false, fmt.Errorf("session %s: read lease: %w", id, err)
	}
	return r, true, nil
}

// liveHolder returns the holder of a lease that is held, unexpired at
// now and whose holder is not provably dead.
func (r leaseRow) liveHolder(now int64) (Owner, bool) {
	if !r.held || r.expires <= now || provablyDead(r.owner) {
		return Owner{}, false
	}
	return r.owner, true
}

// checkNotLeased refuses a write outside a lease to a session that a
// live process holds.
func (s *Store) checkNotLeased(ctx context.Context, tx *sql.Tx, prepared *sql.Stmt, id string) error {
	r, ok, err := readLease(ctx, tx, prepared, id)
	if err != nil || !ok {
		return err
	}
	if h, live := r.liveHolder(s.now()); live {
		return &BusyError{SessionID: id, Holder: h}
	}
	return nil
}

// Lease is this process's exclusive right to write one session, from
// [Store.Acquire] to [Lease.Release]. While held, a goroutine renews it;
// it implements [session.Sink] with epoch-conditional appends.
type Lease struct {
	s     *Store
	id    string
	epoch int64
	owner Owner
	prev  *Owner // the holder whose lease this one took over
	ttl   time.Duration

	stop chan struct{}
	done chan struct{}
	once sync.Once

	mu   sync.Mutex
	lost error // guarded by mu; set once the lease is known lost
}

// Acquire takes the lease of session id for this process, described by
// label ("dsh run"), and starts renewing it. A session held by a live
// process fails at once with a *[BusyError]; a lease left by a killed
// process is taken over (see [Lease.TookOverFrom]). The caller must
// [Lease.Release] it.
func (s *Store) Acquire(ctx context.Context, id, label string) (store.Lease, error) {
	return s.acquire(ctx, id, label)
}

// acquire is Acquire returning the concrete lease.
func (s *Store) acquire(ctx context.Context, id, label string) (*Lease, error) {
	var g grant
	err := s.inTx(ctx, func(tx *sql.Tx) (err error) {
		g, err = s.acquireTx(ctx, tx, id, label)
		return err
	})
	if err != nil {
		return nil, err
	}
	return s.startLease(id, g), nil
}

// CreateLeased creates session h and takes its lease in one transaction
// (see [store.CreateLeaser]): it fails as Create would and otherwise
// cannot fail as Acquire can, since nobody else can hold a session that
// did not exist.
func (s *Store) CreateLeased(ctx context.Context, h session.Header, label string) (store.Lease, error) {
	if err := checkHeader(h); err != nil {
		return nil, fmt.Errorf("create session: %w", err)
	}
	var g grant
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		if err := s.insertSession(ctx, tx, h); err != nil {
			return err
		}
		var err error
		g, err = s.acquireTx(ctx, tx, h.ID, label)
		return err
	})
	if err != nil {
		return nil, err
	}
	return s.startLease(h.ID, g), nil
}

// grant is what a lease's acquiring transaction decided.
type grant struct {
	epoch int64
	self  Owner
	prev  *Owner
	ttl   time.Duration // the expiry it wrote is since + ttl
}

// acquireTx takes the lease of session id inside tx.
func (s *Store) acquireTx(ctx context.Context, tx *sql.Tx, id, label string) (grant, error) {
	g := grant{self: Self(label), ttl: s.leaseTTL}
	var one int
	err := tx.QueryRowContext(ctx, `SELECT 1 FROM sessions WHERE id = ?`, id).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return grant{}, fmt.Errorf("session %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return grant{}, fmt.Errorf("session %s: acquire: %w", id, err)
	}
	r, ok, err := readLease(ctx, tx, nil, id)
	if err != nil {
		return grant{}, err
	}
	now := s.now()
	if ok && r.held {
		if h, live := r.liveHolder(now); live {
			return grant{}, &BusyError{SessionID: id, Holder: h}
		}
		o := r.owner
		g.prev = &o
	}
	g.epoch = r.epoch + 1
	g.self.Since = now
	_, err = tx.ExecContext(ctx, `INSERT INTO leases (session_id, epoch, held, pid, host, start_id, label, since, expires_at)
		VALUES (?, ?, 1, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (session_id) DO UPDATE SET epoch = excluded.epoch, held = 1, pid = excluded.pid,
			host = excluded.host, start_id = excluded.start_id, label = excluded.label,
			since = excluded.since, expires_at = excluded.expires_at`,
		id, g.epoch, g.self.PID, g.self.Host, g.self.Start, g.self.Label, now, now+g.ttl.Milliseconds())
	if err != nil {
		return grant{}, fmt.Errorf("session %s: acquire: %w", id, err)
	}
	return g, nil
}

// startLease makes the lease a committed grant gave and starts its
// renewal.
func (s *Store) startLease(id string, g grant) *Lease {
	l := &Lease{s: s, id: id, epoch: g.epoch, owner: g.self, prev: g.prev, ttl: g.ttl,
		stop: make(chan struct{}), done: make(chan struct{})}
	go l.renewLoop()
	return l
}

// SessionID is the leased session.
func (l *Lease) SessionID() string { return l.id }

// Epoch is this lease's epoch; every acquisition of a session gets a
// higher one.
func (l *Lease) Epoch() int64 { return l.epoch }

// Owner describes the holder (this process).
func (l *Lease) Owner() Owner { return l.owner }

// TookOverFrom returns the holder whose expired or dead lease this one
// took over, if any.
func (l *Lease) TookOverFrom() (Owner, bool) {
	if l.prev == nil {
		return Owner{}, false
	}
	return *l.prev, true
}

// Err returns the *LeaseLostError once renewal found the lease taken
// over, nil while it is held.
func (l *Lease) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lost
}

// renewLoop pushes the expiry forward every third of the TTL until
// Release, or until the lease turns out lost. A renewal that fails for
// another reason (the database busy) is retried at the next tick.
func (l *Lease) renewLoop() {
	defer close(l.done)
	t := time.NewTicker(l.ttl / 3)
	defer t.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), l.ttl/3)
		err := l.Renew(ctx)
		cancel()
		if errors.Is(err, ErrLeaseLost) {
			return
		}
	}
}

// Renew pushes the lease's expiry a TTL past now. It fails with a
// *[LeaseLostError] when the lease is no longer this process's.
func (l *Lease) Renew(ctx context.Context) error {
	return l.s.inTx(ctx, func(tx *sql.Tx) error {
		if err := l.checkHeld(ctx, tx, nil); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `UPDATE leases SET expires_at = ? WHERE session_id = ? AND epoch = ?`,
			l.s.now()+l.ttl.Milliseconds(), l.id, l.epoch)
		return err
	})
}

// checkHeld fails with a *LeaseLostError unless the stored lease is
// still this one, and records the loss.
func (l *Lease) checkHeld(ctx context.Context, tx *sql.Tx, prepared *sql.Stmt) error {
	r, ok, err := readLease(ctx, tx, prepared, l.id)
	if err != nil {
		return err
	}
	if ok && r.held && r.epoch == l.epoch {
		return nil
	}
	lost := &LeaseLostError{SessionID: l.id, Epoch: l.epoch}
	if ok && r.held {
		o := r.owner
		lost.Holder = &o
	}
	l.mu.Lock()
	if l.lost == nil {
		l.lost = lost
	}
	l.mu.Unlock()
	return lost
}

// Append appends events to the leased session like [Store.Append], in
// the same transaction checking that the lease is still this one; it
// implements [session.Sink]. After a takeover it fails with a
// *[LeaseLostError] and writes nothing.
func (l *Lease) Append(ctx context.Context, id string, events []session.Event) error {
	if id != l.id {
		return fmt.Errorf("session %s: append through the lease of session %s", id, l.id)
	}
	return l.s.appendChecked(ctx, id, events, l.checkHeld)
}

// Load reads the leased session like [Store.Load], repairing a log left
// open by a crash (the previous holder's, after a takeover) with
// appends under this lease, except that the events of a [session.Bare]
// type come without their bodies, as [session.ReleasedEvent]s: it seeds
// the session's live log, which reads them back when asked.
func (l *Lease) Load(ctx context.Context) (session.Header, []session.Event, error) {
	return l.s.load(ctx, l.id, l.Append, true)
}

// Release stops the renewal and gives the lease up, so that another
// process can take the session at once. It is idempotent; releasing a
// lease already taken over is not an error.
func (l *Lease) Release(ctx context.Context) error {
	var err error
	l.once.Do(func() {
		close(l.stop)
		<-l.done
		err = l.s.inTx(ctx, func(tx *sql.Tx) error {
			_, err := tx.ExecContext(ctx, `UPDATE leases SET held = 0, expires_at = 0
				WHERE session_id = ? AND epoch = ? AND held = 1`, l.id, l.epoch)
			return err
		})
		if err != nil {
			err = fmt.Errorf("session %s: release lease: %w", l.id, err)
		}
	})
	return err
}
