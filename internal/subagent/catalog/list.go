package catalog

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/dsh-dev/dsh/internal/projection"
	"github.com/dsh-dev/dsh/internal/session"
)

// Activities of a row.
const (
	// ActivityRunning: the session is running in this process now.
	ActivityRunning = "running"
	// ActivityInactive: anything else (idle, finished, stored only).
	ActivityInactive = "inactive"
)

// Diagnostics of a row whose own catalog could not be read.
const (
	// DiagnosticCorrupt: the log is unreadable by this build (a format
	// error), or its header names another parent. Retrying will not help.
	DiagnosticCorrupt = "corrupt"
	// DiagnosticUnavailable: the log could not be read at all (not found,
	// I/O). A later listing may succeed.
	DiagnosticUnavailable = "unavailable"
)

// DefaultConcurrency is how many cold catalog reads one listing keeps in
// flight when Deps.Concurrency is zero. It bounds a read-only scan of a
// local database, whose read pool is about as wide as the machine.
const DefaultConcurrency = 4

// Store reads stored sessions; every store.Store satisfies it. Inspect must
// not write (no crash repair), so that listing never changes a log that
// another process may still be appending to. An error about unreadable
// data must wrap a *session.FormatError; any other error is taken as the
// session being unavailable.
type Store interface {
	Inspect(ctx context.Context, id string) (session.Header, []session.Event, error)
}

// Live reports the sessions live in this process. Log returns a live
// session's log, whose in-memory events are newer than the store's;
// Running reports whether the session is running now.
type Live interface {
	Log(id string) (*session.Log, bool)
	Running(id string) bool
}

// LiveProjections is optionally implemented by a [Live]: the projections
// attached to a live session. When they hold the catalog unit ([Unit],
// built with that session's header), its watermark state is served
// without copying or refolding the log.
type LiveProjections interface {
	Projections(id string) (*projection.Projections, bool)
}

// Deps are what a listing reads from.
type Deps struct {
	// Store reads cold sessions. Required.
	Store Store
	// Live, when set, serves live sessions and activity; nil means
	// nothing is live (every row is inactive).
	Live Live
	// Concurrency bounds the cold reads in flight; 0 means
	// DefaultConcurrency.
	Concurrency int
}

// Row is one child in a listing.
type Row struct {
	// ID is the child session's id.
	ID string `json:"id"`
	// ParentID is the session whose catalog lists the child.
	ParentID string `json:"parentId"`
	// Depth counts edges from the listed root: direct children are 1.
	Depth int `json:"depth"`
	// CreatedAt, Mode, Label and Provider come from the parent's catalog
	// entry, so a child whose own log is damaged still shows them.
	CreatedAt int64  `json:"createdAt"`
	Mode      string `json:"mode"`
	Label     string `json:"label,omitempty"`
	Provider  string `json:"provider,omitempty"`
	// Activity is ActivityRunning or ActivityInactive.
	Activity string `json:"activity"`
	// HasChildren reports whether the child's own catalog lists any
	// child; false when it could not be read.
	HasChildren bool `json:"hasChildren"`
	// Diagnostic is "" when the child's catalog was read, else
	// DiagnosticCorrupt or DiagnosticUnavailable; Reason then says why.
	Diagnostic string `json:"diagnostic,omitempty"`
	Reason     string `json:"reason,omitempty"`
}

// ListChildren lists the direct children of parentID from its catalog, in
// parent event order. Each child's own catalog is read too (HasChildren,
// diagnostics), with bounded concurrency. Nothing is loaded, resumed or
// repaired. A parent that cannot be read, and cancellation, are errors;
// an unreadable child is a row with a diagnostic.
func ListChildren(ctx context.Context, deps Deps, parentID string) ([]Row, error) {
	return list(ctx, deps, parentID, 1)
}

// ListDescendants lists every child reachable from rootID's catalog
// through the catalogs below it, in stable pre-order (each parent's
// children in its event order, each followed by its own subtree), with
// the catalog parent and root-relative depth on every row. One-shot and
// unknown-mode children are traversed like any other. A child whose
// catalog cannot be read is a row with a diagnostic and ends only its
// branch; ids already listed (repeats, cycles back to an ancestor) are
// skipped. A root that cannot be read, and cancellation, fail the whole
// listing.
func ListDescendants(ctx context.Context, deps Deps, rootID string) ([]Row, error) {
	return list(ctx, deps, rootID, 0)
}

// list walks the catalogs from rootID down to maxDepth (0: unbounded).
func list(ctx context.Context, deps Deps, rootID string, maxDepth int) ([]Row, error) {
	if deps.Store == nil {
		// Checked before any read, so a deployment without a store fails
		// the same way whether or not the root has children.
		return nil, errors.New("list subagents: no session store")
	}
	if rootID == "" {
		return nil, errors.New("list subagents: no session id")
	}
	w := &walker{deps: deps, root: rootID, maxDepth: maxDepth, visited: map[string]bool{rootID: true}}
	w.workers = deps.Concurrency
	if w.workers <= 0 {
		w.workers = DefaultConcurrency
	}
	if lp, ok := deps.Live.(LiveProjections); ok {
		w.proj = lp
	}
	if ctx.Err() != nil {
		return nil, w.cancelled(ctx)
	}
	root, err := w.read(ctx, rootID, "")
	if err != nil {
		if ctx.Err() != nil {
			return nil, w.cancelled(ctx)
		}
		return nil, fmt.Errorf("list subagents of %s: %w", rootID, err)
	}
	if err := w.walk(ctx, rootID, 1, root); err != nil {
		return nil, err
	}
	return w.rows, nil
}

// walker is one listing. Only readGroup's workers run concurrently, and
// they touch nothing but their own result slots, so the rest needs no
// lock.
type walker struct {
	deps     Deps
	root     string
	proj     LiveProjections
	workers  int
	maxDepth int
	visited  map[string]bool
	rows     []Row
}

// readResult is one child's catalog, or why it could not be read.
type readResult struct {
	entries []Entry
	err     error
}

// walk emits the children in entries (parentID's catalog) at depth and
// recurses into each right after its row, which is pre-order. The
// siblings' catalogs are read together first: that is where the
// concurrency is, and the order of the rows does not depend on it.
func (w *walker) walk(ctx context.Context, parentID string, depth int, entries []Entry) error {
	var todo []Entry
	for _, e := range entries {
		if !w.visited[e.ChildID] {
			todo = append(todo, e)
		}
	}
	if len(todo) == 0 {
		return nil
	}
	res := w.readGroup(ctx, parentID, todo)
	if ctx.Err() != nil {
		// A read that failed because of the cancellation must not become
		// an "unavailable" row in a listing presented as complete.
		return w.cancelled(ctx)
	}
	for i, e := range todo {
		// An earlier sibling's subtree may have listed this id already.
		if w.visited[e.ChildID] {
			continue
		}
		r := res[i]
		var notChild *notChildError
		// A child whose header names another parent is not this
		// parent's child, so it does not claim the id: the parent that
		// really owns it still lists it.
		if !errors.As(r.err, &notChild) {
			w.visited[e.ChildID] = true
		}
		row := Row{
			ID: e.ChildID, ParentID: parentID, Depth: depth,
			CreatedAt: e.CreatedAt, Mode: e.Mode, Label: e.Label, Provider: e.Provider,
			Activity: w.activity(e.ChildID), HasChildren: r.err == nil && len(r.entries) > 0,
		}
		if r.err != nil {
			row.Diagnostic, row.Reason = classify(r.err), r.err.Error()
		}
		w.rows = append(w.rows, row)
		if r.err != nil || (w.maxDepth > 0 && depth >= w.maxDepth) {
			continue
		}
		if err := w.walk(ctx, e.ChildID, depth+1, r.entries); err != nil {
			return err
		}
	}
	return nil
}

// readGroup reads the catalogs of siblings with at most w.workers reads in
// flight; result i belongs to todo[i].
func (w *walker) readGroup(ctx context.Context, parentID string, todo []Entry) []readResult {
	res := make([]readResult, len(todo))
	n := min(w.workers, len(todo))
	if n <= 1 {
		for i, e := range todo {
			res[i].entries, res[i].err = w.read(ctx, e.ChildID, parentID)
		}
		return res
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < len(todo); i = int(next.Add(1) - 1) {
				if ctx.Err() != nil {
					return // the caller fails the listing; stop issuing reads
				}
				res[i].entries, res[i].err = w.read(ctx, todo[i].ChildID, parentID)
			}
		})
	}
	wg.Wait()
	return res
}

// read returns the catalog of session id, live if it is live in this
// process, else from the store. parentID, when set, is the catalog that
// listed id: the session's header must name it.
func (w *walker) read(ctx context.Context, id, parentID string) ([]Entry, error) {
	if w.deps.Live != nil {
		if log, ok := w.deps.Live.Log(id); ok {
			h := log.Header()
			if err := checkParent(h, id, parentID); err != nil {
				return nil, err
			}
			if w.proj != nil {
				if p, ok := w.proj.Projections(id); ok {
					if entries, _, ok := projection.GetAs[[]Entry](p, Key); ok {
						return entries, nil
					}
				}
			}
			return FoldSeq(h, log.View().All()), nil
		}
	}
	h, events, err := w.deps.Store.Inspect(ctx, id)
	if err != nil {
		return nil, err
	}
	if err := checkParent(h, id, parentID); err != nil {
		return nil, err
	}
	return Fold(h, events), nil
}

func (w *walker) activity(id string) string {
	if w.deps.Live != nil && w.deps.Live.Running(id) {
		return ActivityRunning
	}
	return ActivityInactive
}

func (w *walker) cancelled(ctx context.Context) error {
	return fmt.Errorf("list subagents of %s: %w", w.root, context.Cause(ctx))
}

// notChildError is a catalog entry whose session's header names another
// parent: the id was reused, or one of the two records was tampered with.
// Either way the entry is not this parent's child, and the data, not the
// read, is at fault, so it is reported as corrupt.
type notChildError struct {
	id, parent, listedBy string
}

func (e *notChildError) Error() string {
	parent := e.parent
	if parent == "" {
		parent = "no parent"
	}
	return fmt.Sprintf("session %s names %s, but the catalog of %s lists it", e.id, parent, e.listedBy)
}

func checkParent(h session.Header, id, parentID string) error {
	if parentID != "" && h.ParentSession != parentID {
		return &notChildError{id: id, parent: h.ParentSession, listedBy: parentID}
	}
	return nil
}

// classify maps a failed catalog read to its diagnostic: data this build
// cannot read is corrupt (retrying cannot help); anything else is
// unavailable.
func classify(err error) string {
	var fe *session.FormatError
	var nc *notChildError
	if errors.As(err, &fe) || errors.As(err, &nc) {
		return DiagnosticCorrupt
	}
	return DiagnosticUnavailable
}
