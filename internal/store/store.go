// Package store is what the rest of dsh knows about session storage: the
// [Store] interface (sessions with their leases, and the workspace
// registry) and the types and typed errors its callers handle. The
// embedded SQLite store (internal/store/sqlite) implements it; another
// store (Postgres, for several nodes) is a second implementation of the
// same interface, not a change to its callers.
package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/dsh-dev/dsh/internal/session"
)

// Store is a session store with its workspace registry.
type Store interface {
	Sessions
	Workspaces
	Schedules
	Deliveries
	// Close releases the store.
	Close() error
}

// CreateLeaser is what a store that can create a session and take its
// lease in one write transaction provides: a new session costs one
// commit instead of two (on a fresh process, the first commit is also
// the one that fsyncs a new write-ahead log). The result is that of
// Create followed by Acquire; a store without it gets exactly those two.
type CreateLeaser interface {
	CreateLeased(ctx context.Context, h session.Header, label string) (Lease, error)
}

// Sessions stores session headers and their append-only event logs.
type Sessions interface {
	// Create stores a new, empty session with header h; an id already
	// stored fails with [ErrExists].
	Create(ctx context.Context, h session.Header) error
	// Append appends events outside a lease (conditional on the next seq;
	// [ErrSeqConflict]); a session a live process holds is refused with a
	// *[BusyError]. It implements [session.Sink].
	Append(ctx context.Context, id string, events []session.Event) error
	// Acquire takes the lease of session id for this process (label says
	// what holds it: "dsh run", "dsh serve"). A live holder elsewhere fails
	// with a *[BusyError]; a dead or expired one is taken over.
	Acquire(ctx context.Context, id, label string) (Lease, error)
	// Load reads, validates and (after a crash) repairs session id.
	Load(ctx context.Context, id string) (session.Header, []session.Event, error)
	// Inspect is Load without writing: closers are added in memory only.
	Inspect(ctx context.Context, id string) (session.Header, []session.Event, error)
	// ReadFrom returns the stored events with seq >= fromSeq, unrepaired.
	ReadFrom(ctx context.Context, id string, fromSeq int64) ([]session.Event, error)
	// ReadPage returns at most limit stored events from seq fromSeq on,
	// unrepaired and unexpanded (inbox references stay): one page of a log
	// read in bounded memory, with [session.Expander] and
	// [session.Balance] doing what Inspect does for the whole log.
	ReadPage(ctx context.Context, id string, fromSeq int64, limit int) ([]session.Event, error)
	// List returns the sessions f selects, most recently updated first
	// (ties broken by id, descending), without reading any log.
	List(ctx context.Context, f ListFilter) ([]Entry, error)
	// Get returns the listing entry of session id ([ErrNotFound]).
	Get(ctx context.Context, id string) (Entry, error)
	// Header returns the header of session id.
	Header(ctx context.Context, id string) (session.Header, error)
	// Resolve turns a unique id prefix into the id; otherwise an *[IDError].
	Resolve(ctx context.Context, prefix string) (string, error)
	// IDs returns every stored session id in byte order, without reading
	// the sessions themselves (short ids of a long listing need them all).
	IDs(ctx context.Context) ([]string, error)
	// Export writes session id as JSONL; Import stores one such session.
	Export(ctx context.Context, id string, w io.Writer) error
	Import(ctx context.Context, r io.Reader) (session.Header, error)
}

// ListFilter selects the sessions of a [Sessions.List]. The zero value
// selects every session.
type ListFilter struct {
	// Cwd keeps only sessions whose header cwd is exactly Cwd.
	Cwd string
	// TopLevelOnly drops subagent children and forks (a header with a
	// parent session).
	TopLevelOnly bool
	// Limit keeps at most Limit entries (0: no limit).
	Limit int
	// IDs, when not nil, keeps only these sessions (looked up by id; the
	// other fields still apply).
	IDs []string
	// Before keeps only the entries after this cursor in listing order
	// (older, or as old with a smaller id); nil starts at the newest.
	// The next page of a listing starts before its last entry.
	Before *Cursor
}

// Lease is a process's exclusive right to write one session, from
// [Sessions.Acquire] to Release. It implements [session.Sink] with appends
// conditional on its epoch as well as on the next seq.
type Lease interface {
	// SessionID is the leased session.
	SessionID() string
	// Epoch grows with every acquisition of the session.
	Epoch() int64
	// Owner describes the holder (this process).
	Owner() Owner
	// TookOverFrom returns the dead or expired holder this lease replaced.
	TookOverFrom() (Owner, bool)
	// Err is the *[LeaseLostError] once the lease is known lost, else nil.
	Err() error
	// Renew pushes the expiry forward; a lost lease fails with a
	// *[LeaseLostError].
	Renew(ctx context.Context) error
	// Append appends under the lease; it implements [session.Sink].
	Append(ctx context.Context, id string, events []session.Event) error
	// Load reads the leased session, repairing it under the lease, to
	// seed its live [session.Log]: the bodies of events of a
	// [session.Bare] type are not read (they are
	// [session.ReleasedEvent]s, which the log reads back from its
	// source when someone asks for them).
	Load(ctx context.Context) (session.Header, []session.Event, error)
	// Release gives the lease up; idempotent.
	Release(ctx context.Context) error
}

// Sentinel errors. Every error a store returns about a session wraps one
// of these (with %w) together with the session id.
var (
	// ErrNotFound reports a session id the store does not hold.
	ErrNotFound = errors.New("session not found")
	// ErrExists reports a Create or Import of an id already stored.
	ErrExists = errors.New("session already exists")
	// ErrSeqConflict reports an append whose seqs do not continue the
	// stored log; see [SeqConflictError].
	ErrSeqConflict = errors.New("session seq conflict")
	// ErrCorrupt reports stored (or imported) data this build cannot read.
	// Such errors also wrap a *[session.FormatError] naming the session and
	// the seq.
	ErrCorrupt = errors.New("corrupt session")
	// ErrAmbiguous reports an id prefix that more than one session
	// matches; see [IDError].
	ErrAmbiguous = errors.New("ambiguous session id")
	// ErrBusy reports a session another live process holds; see
	// [BusyError].
	ErrBusy = errors.New("session in use by another process")
	// ErrLeaseLost reports a write through a lease that is no longer
	// held; see [LeaseLostError].
	ErrLeaseLost = errors.New("session lease lost")
)

// Stable machine codes of store errors.
const (
	CodeSessionNotFound  = "SESSION_NOT_FOUND"
	CodeSessionAmbiguous = "SESSION_AMBIGUOUS"
	CodeSessionBusy      = "SESSION_BUSY"
	CodeLeaseLost        = "SESSION_LEASE_LOST"
)

// Session statuses reported in [Entry.Status] besides a last turn's end
// reason kind ("completed", "error", "aborted", …).
const (
	// StatusNew is a session without a turn yet.
	StatusNew = "new"
	// StatusRunning is a session a live process holds.
	StatusRunning = "running"
	// StatusInterrupted is a session whose process stopped mid-turn;
	// resuming it closes the turn.
	StatusInterrupted = "interrupted"
)

// Entry is one session of a [Sessions.List].
type Entry struct {
	// Header is the decoded header; when Err is set only Header.ID is
	// meaningful.
	Header session.Header
	// Title names the session: from a logged session/title, else from
	// its first prompt; "" before the first prompt.
	Title string
	// Events is the number of stored events.
	Events int64
	// Turns is the number of turns started.
	Turns int64
	// Status is [StatusRunning] while a live process holds the session,
	// [StatusInterrupted] when a turn was left open, [StatusNew] before
	// the first turn, else the reason kind of the last turn/end
	// ("completed", "error", "aborted", …).
	Status string
	// UpdatedAt is the time of the last write, Unix milliseconds.
	UpdatedAt int64
	// Err is set when the header cannot be read; the entry is still
	// listed so that a damaged session stays visible and removable.
	Err error
}

// SeqConflictError reports an append that does not continue the log: its
// first seq is not the stored next seq, or its seqs are not contiguous.
// It wraps [ErrSeqConflict].
type SeqConflictError struct {
	SessionID string
	// Want is the seq the store expected at the offending position.
	Want int64
	// Got is the seq the batch carried there.
	Got int64
}

// Error implements error.
func (e *SeqConflictError) Error() string {
	return fmt.Sprintf("session %s: append seq %d, want %d: %v", e.SessionID, e.Got, e.Want, ErrSeqConflict)
}

// Unwrap makes errors.Is(err, ErrSeqConflict) hold.
func (e *SeqConflictError) Unwrap() error { return ErrSeqConflict }

// MaxCandidates is how many matching sessions an ambiguous [IDError]
// names.
const MaxCandidates = 10

// Candidate is one session an ambiguous prefix matches.
type Candidate struct {
	ID        string
	Title     string
	UpdatedAt int64
}

// IDError reports a session id (or id prefix) that names no session, or
// more than one. It wraps [ErrNotFound] or [ErrAmbiguous].
type IDError struct {
	// Prefix is the id as given.
	Prefix string
	// Candidates are the first [MaxCandidates] matches in id order; empty
	// when nothing matched.
	Candidates []Candidate
	// More is set when further sessions match beyond Candidates.
	More bool
}

// Error implements error.
func (e *IDError) Error() string {
	if len(e.Candidates) == 0 {
		return fmt.Sprintf("no session id starts with %q", e.Prefix)
	}
	n := fmt.Sprint(len(e.Candidates))
	if e.More {
		n = "more than " + n
	}
	return fmt.Sprintf("session id prefix %q is ambiguous: it matches %s sessions", e.Prefix, n)
}

// Code returns CodeSessionNotFound or CodeSessionAmbiguous.
func (e *IDError) Code() string {
	if len(e.Candidates) == 0 {
		return CodeSessionNotFound
	}
	return CodeSessionAmbiguous
}

// Unwrap makes errors.Is hold for ErrNotFound or ErrAmbiguous.
func (e *IDError) Unwrap() error {
	if len(e.Candidates) == 0 {
		return ErrNotFound
	}
	return ErrAmbiguous
}

// Owner identifies the process holding a session lease.
type Owner struct {
	// PID is the holder's process id on Host.
	PID int
	// Host is the holder's host name.
	Host string
	// Start is the holder's process start identity on Linux (boot id and
	// start time in clock ticks, from /proc), which tells a reused pid
	// from the holder; empty where /proc is not available.
	Start string
	// Label says what the holder is, for people: "dsh run", "dsh serve".
	Label string
	// Since is when the holder took the lease, Unix milliseconds.
	Since int64
}

// BusyError reports that a live process holds the session's lease.
type BusyError struct {
	SessionID string
	Holder    Owner
}

// Error implements error with a message meant for people.
func (e *BusyError) Error() string {
	label := e.Holder.Label
	if label == "" {
		label = "another process"
	}
	since := time.UnixMilli(e.Holder.Since).Local()
	at := since.Format("15:04:05")
	if y, m, d := since.Date(); y != time.Now().Year() || m != time.Now().Month() || d != time.Now().Day() {
		at = since.Format("2006-01-02 15:04:05")
	}
	return fmt.Sprintf("session %s is in use by %s (pid %d on %s, since %s); wait for it to finish, or stop that process, then resume again",
		e.SessionID, label, e.Holder.PID, e.Holder.Host, at)
}

// Code returns CodeSessionBusy.
func (e *BusyError) Code() string { return CodeSessionBusy }

// Unwrap makes errors.Is(err, ErrBusy) hold.
func (e *BusyError) Unwrap() error { return ErrBusy }

// LeaseLostError reports a write or renewal through a lease that another
// process has taken over (or that was released).
type LeaseLostError struct {
	SessionID string
	Epoch     int64
	// Holder is the current holder, when there is one.
	Holder *Owner
}

// Error implements error.
func (e *LeaseLostError) Error() string {
	if e.Holder != nil {
		return fmt.Sprintf("session %s: this process no longer holds the session (lease %d); %s (pid %d on %s) took it over",
			e.SessionID, e.Epoch, e.Holder.Label, e.Holder.PID, e.Holder.Host)
	}
	return fmt.Sprintf("session %s: this process no longer holds the session (lease %d was released)", e.SessionID, e.Epoch)
}

// Code returns CodeLeaseLost.
func (e *LeaseLostError) Code() string { return CodeLeaseLost }

// Unwrap makes errors.Is(err, ErrLeaseLost) hold.
func (e *LeaseLostError) Unwrap() error { return ErrLeaseLost }
