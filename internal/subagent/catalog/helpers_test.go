package catalog_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	_ "modernc.org/sqlite" // the raw-SQL handle that damages a stored log

	"github.com/dsh-dev/dsh/internal/projection"
	"github.com/dsh-dev/dsh/internal/session"
	"github.com/dsh-dev/dsh/internal/store/sqlite"
	"github.com/dsh-dev/dsh/internal/subagent"
	"github.com/dsh-dev/dsh/internal/subagent/catalog"
)

// The store and the test registry satisfy the listing's interfaces.
var (
	_ catalog.Store           = (*sqlite.Store)(nil)
	_ catalog.Live            = (*world)(nil)
	_ catalog.LiveProjections = (*world)(nil)
)

// world is a real store in a temp dir plus the sessions a test built in
// it, and a fake process registry of live sessions.
type world struct {
	t     *testing.T
	path  string
	store *sqlite.Store
	depth map[string]int // delegation depth of every created session

	mu      sync.Mutex
	live    map[string]*session.Log            // guarded by mu
	running map[string]bool                    // guarded by mu
	proj    map[string]*projection.Projections // guarded by mu
	served  int                                // guarded by mu; catalogs served from projections
}

func newWorld(t *testing.T) *world {
	t.Helper()
	path := filepath.Join(t.TempDir(), "dsh.db")
	st, err := sqlite.Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return &world{t: t, path: path, store: st, depth: map[string]int{}, live: map[string]*session.Log{},
		running: map[string]bool{}, proj: map[string]*projection.Projections{}}
}

// header is a session header; a non-empty parent makes it a subagent
// child one level below that parent.
func (w *world) header(id, parent string) session.Header {
	h := session.Header{Version: session.FormatVersion, ID: id, CreatedAt: 1_700_000_000_000, Cwd: "/work"}
	if parent != "" {
		h.ParentSession, h.Origin, h.DelegationDepth = parent, "subagent", w.depth[parent]+1
	}
	w.depth[id] = h.DelegationDepth
	return h
}

// start appends the subagent/start a service appends when child starts.
func start(t *testing.T, l *session.Log, child, mode string) {
	t.Helper()
	if _, err := l.Append(session.TypeSubagentStart, subagent.StartEvent{
		RunID: "run-" + child, ChildID: child, Provider: "spawn", Label: "task " + child, Mode: mode, Depth: l.Header().DelegationDepth + 1,
	}); err != nil {
		t.Fatal(err)
	}
}

// stored creates session id below parent ("" for a root) in the store:
// a child's log opens with its descriptor, then one one-shot
// subagent/start per child, in the order given.
func (w *world) stored(id, parent string, children ...string) *session.Log {
	w.t.Helper()
	h := w.header(id, parent)
	if err := w.store.Create(context.Background(), h); err != nil {
		w.t.Fatal(err)
	}
	l, err := session.NewLog(h, nil, w.store)
	if err != nil {
		w.t.Fatal(err)
	}
	w.fill(l, parent, children)
	if err := l.Flush(context.Background()); err != nil {
		w.t.Fatal(err)
	}
	return l
}

// fork creates a stored fork child of parent the way the fork provider
// does: parent's events as its seed (header SeedLength), end-seed, its
// descriptor and its own starts; then parent records the start.
func (w *world) fork(id string, parent *session.Log, children ...string) {
	w.t.Helper()
	ctx := context.Background()
	seed := parent.Events()
	n := int64(len(seed))
	h := w.header(id, parent.ID())
	h.SeedLength = &n
	if err := w.store.Create(ctx, h); err != nil {
		w.t.Fatal(err)
	}
	if err := w.store.Append(ctx, id, seed); err != nil {
		w.t.Fatal(err)
	}
	l, err := session.NewLog(h, seed, w.store)
	if err != nil {
		w.t.Fatal(err)
	}
	if _, err := l.Append(session.TypeEndSeed, struct{}{}); err != nil {
		w.t.Fatal(err)
	}
	w.fill(l, parent.ID(), children)
	start(w.t, parent, id, subagent.ModeOneShot)
	if err := errors.Join(l.Flush(ctx), parent.Flush(ctx)); err != nil {
		w.t.Fatal(err)
	}
}

// liveOnly is a session live in this process that was never flushed:
// only the live path can see its catalog.
func (w *world) liveOnly(id, parent string, running bool, children ...string) *session.Log {
	w.t.Helper()
	l, err := session.NewLog(w.header(id, parent), nil, nil)
	if err != nil {
		w.t.Fatal(err)
	}
	w.fill(l, parent, children)
	w.mu.Lock()
	defer w.mu.Unlock()
	w.live[id], w.running[id] = l, running
	return l
}

func (w *world) fill(l *session.Log, parent string, children []string) {
	w.t.Helper()
	if parent != "" {
		if _, err := l.Append(session.TypeSubagentDescriptor, subagent.Descriptor{Version: subagent.DescriptorVersion, Mode: subagent.ModeOneShot, Provider: "spawn"}); err != nil {
			w.t.Fatal(err)
		}
	}
	for _, c := range children {
		start(w.t, l, c, subagent.ModeOneShot)
	}
}

// corrupt overwrites a stored event body with garbage behind the store's
// back, as disk damage or a foreign writer would.
func (w *world) corrupt(id string) {
	w.t.Helper()
	db, err := sql.Open("sqlite", w.path)
	if err != nil {
		w.t.Fatal(err)
	}
	defer db.Close()
	res, err := db.Exec(`UPDATE events SET body = 'not json {' WHERE session_id = ? AND seq = 0`, id)
	if err != nil {
		w.t.Fatal(err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		w.t.Fatalf("corrupt %s: %d rows changed", id, n)
	}
}

func (w *world) deps() catalog.Deps {
	return catalog.Deps{Store: w.store, Live: w}
}

// Log implements catalog.Live.
func (w *world) Log(id string) (*session.Log, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	l, ok := w.live[id]
	return l, ok
}

// Running implements catalog.Live.
func (w *world) Running(id string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.running[id]
}

// Projections implements catalog.LiveProjections.
func (w *world) Projections(id string) (*projection.Projections, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	p, ok := w.proj[id]
	if ok {
		w.served++
	}
	return p, ok
}

// rowText is the part of a row a test compares, in one readable line.
func rowText(r catalog.Row) string {
	s := fmt.Sprintf("%s<%s d%d %s %s %q", r.ID, r.ParentID, r.Depth, r.Mode, r.Activity, r.Label)
	if r.HasChildren {
		s += " +"
	}
	if r.Diagnostic != "" {
		s += " !" + r.Diagnostic
	}
	return s
}

func rowsText(rows []catalog.Row) string {
	out := make([]string, len(rows))
	for i, r := range rows {
		out[i] = rowText(r)
	}
	return strings.Join(out, "\n")
}

// cancelOn is a Store that cancels the listing's context when it is asked
// for one id, so a test can cancel in the middle of a walk without
// timing.
type cancelOn struct {
	catalog.Store
	id     string
	cancel context.CancelFunc
}

func (c cancelOn) Inspect(ctx context.Context, id string) (session.Header, []session.Event, error) {
	if id == c.id {
		c.cancel()
	}
	return c.Store.Inspect(ctx, id)
}
