package catalog_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/dsh-dev/dsh/internal/projection"
	"github.com/dsh-dev/dsh/internal/session"
	"github.com/dsh-dev/dsh/internal/store/sqlite"
	"github.com/dsh-dev/dsh/internal/subagent"
	"github.com/dsh-dev/dsh/internal/subagent/catalog"
)

// listCase builds a world and says what each listing of "root" returns.
type listCase struct {
	name        string
	build       func(w *world)
	children    []string // ListChildren("root") as rowText lines
	descendants []string // ListDescendants("root")
}

var listCases = []listCase{
	{
		name: "parent event order and pre-order with depths",
		build: func(w *world) {
			// Ids sort against creation order: the catalog's order is the
			// parent's event order.
			w.stored("root", "", "z", "a")
			w.stored("z", "root", "z2", "z1")
			w.stored("z2", "z", "z21")
			w.stored("z21", "z2")
			w.stored("z1", "z")
			w.stored("a", "root", "a1")
			w.stored("a1", "a")
		},
		children: []string{
			`z<root d1 one-shot inactive "task z" +`,
			`a<root d1 one-shot inactive "task a" +`,
		},
		descendants: []string{
			`z<root d1 one-shot inactive "task z" +`,
			`z2<z d2 one-shot inactive "task z2" +`,
			`z21<z2 d3 one-shot inactive "task z21"`,
			`z1<z d2 one-shot inactive "task z1"`,
			`a<root d1 one-shot inactive "task a" +`,
			`a1<a d2 one-shot inactive "task a1"`,
		},
	},
	{
		name: "a corrupt child is a row and its siblings are listed",
		build: func(w *world) {
			w.stored("root", "", "a", "bad", "b")
			w.stored("a", "root")
			w.stored("bad", "root", "hidden")
			w.stored("hidden", "bad")
			w.stored("b", "root", "b1")
			w.stored("b1", "b")
			w.corrupt("bad")
		},
		children: []string{
			`a<root d1 one-shot inactive "task a"`,
			`bad<root d1 one-shot inactive "task bad" !corrupt`,
			`b<root d1 one-shot inactive "task b" +`,
		},
		descendants: []string{
			`a<root d1 one-shot inactive "task a"`,
			`bad<root d1 one-shot inactive "task bad" !corrupt`,
			`b<root d1 one-shot inactive "task b" +`,
			`b1<b d2 one-shot inactive "task b1"`,
		},
	},
	{
		name: "a missing child is unavailable",
		build: func(w *world) {
			w.stored("root", "", "gone", "a")
			w.stored("a", "root", "gone-too")
		},
		children: []string{
			`gone<root d1 one-shot inactive "task gone" !unavailable`,
			`a<root d1 one-shot inactive "task a" +`,
		},
		descendants: []string{
			`gone<root d1 one-shot inactive "task gone" !unavailable`,
			`a<root d1 one-shot inactive "task a" +`,
			`gone-too<a d2 one-shot inactive "task gone-too" !unavailable`,
		},
	},
	{
		name: "a child whose header names another parent is corrupt there and listed by its own",
		build: func(w *world) {
			w.stored("root", "", "a", "b")
			w.stored("a", "root", "b1") // a's catalog claims b's child
			w.stored("b", "root", "b1")
			w.stored("b1", "b")
		},
		children: []string{
			`a<root d1 one-shot inactive "task a" +`,
			`b<root d1 one-shot inactive "task b" +`,
		},
		descendants: []string{
			`a<root d1 one-shot inactive "task a" +`,
			`b1<a d2 one-shot inactive "task b1" !corrupt`,
			`b<root d1 one-shot inactive "task b" +`,
			`b1<b d2 one-shot inactive "task b1"`,
		},
	},
	{
		name: "cycles and repeated ids are skipped",
		build: func(w *world) {
			w.stored("root", "", "a")
			w.stored("a", "root", "b")
			// b lists the root and its own parent back, then a real child.
			w.stored("b", "a", "root", "a", "c")
			w.stored("c", "b", "c")
		},
		children: []string{
			`a<root d1 one-shot inactive "task a" +`,
		},
		descendants: []string{
			`a<root d1 one-shot inactive "task a" +`,
			`b<a d2 one-shot inactive "task b" +`,
			`c<b d3 one-shot inactive "task c" +`,
		},
	},
	{
		name: "fork-inherited starts are not the fork's children",
		build: func(w *world) {
			root := w.stored("root", "", "a")
			w.stored("a", "root")
			// f and g are forked from root after root started a: their
			// seeds hold that subagent/start, which names root's child.
			w.fork("f", root, "f1")
			w.fork("g", root)
			w.stored("f1", "f")
		},
		children: []string{
			`a<root d1 one-shot inactive "task a"`,
			`f<root d1 one-shot inactive "task f" +`,
			`g<root d1 one-shot inactive "task g"`,
		},
		descendants: []string{
			`a<root d1 one-shot inactive "task a"`,
			`f<root d1 one-shot inactive "task f" +`,
			`f1<f d2 one-shot inactive "task f1"`,
			`g<root d1 one-shot inactive "task g"`,
		},
	},
	{
		name: "live sessions are read live and report activity",
		build: func(w *world) {
			w.stored("root", "", "busy", "idle", "cold")
			// busy's only start was never flushed: a cold read of busy
			// would not see busy-1.
			w.liveOnly("busy", "root", true, "busy-1")
			w.stored("busy-1", "busy")
			w.liveOnly("idle", "root", false)
			w.stored("cold", "root")
		},
		children: []string{
			`busy<root d1 one-shot running "task busy" +`,
			`idle<root d1 one-shot inactive "task idle"`,
			`cold<root d1 one-shot inactive "task cold"`,
		},
		descendants: []string{
			`busy<root d1 one-shot running "task busy" +`,
			`busy-1<busy d2 one-shot inactive "task busy-1"`,
			`idle<root d1 one-shot inactive "task idle"`,
			`cold<root d1 one-shot inactive "task cold"`,
		},
	},
	{
		name: "one-shot and unknown children are traversal nodes",
		build: func(w *world) {
			root := w.stored("root", "", "one")
			rawStart(w.t, root, `{"childId":"odd","mode":"resident","label":"from the future"}`)
			if err := root.Flush(context.Background()); err != nil {
				w.t.Fatal(err)
			}
			w.stored("one", "root", "one-1")
			w.stored("one-1", "one")
			w.stored("odd", "root", "odd-1")
			w.stored("odd-1", "odd")
		},
		children: []string{
			`one<root d1 one-shot inactive "task one" +`,
			`odd<root d1 unknown inactive "from the future" +`,
		},
		descendants: []string{
			`one<root d1 one-shot inactive "task one" +`,
			`one-1<one d2 one-shot inactive "task one-1"`,
			`odd<root d1 unknown inactive "from the future" +`,
			`odd-1<odd d2 one-shot inactive "task odd-1"`,
		},
	},
	{
		name:  "no children",
		build: func(w *world) { w.stored("root", "") },
	},
}

func TestListings(t *testing.T) {
	for _, tt := range listCases {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorld(t)
			tt.build(w)
			ctx := context.Background()
			for _, conc := range []int{1, 8} {
				deps := w.deps()
				deps.Concurrency = conc
				got, err := catalog.ListChildren(ctx, deps, "root")
				if err != nil {
					t.Fatalf("ListChildren: %v", err)
				}
				if g, want := rowsText(got), strings.Join(tt.children, "\n"); g != want {
					t.Errorf("ListChildren (concurrency %d):\n%s\nwant:\n%s", conc, g, want)
				}
				got, err = catalog.ListDescendants(ctx, deps, "root")
				if err != nil {
					t.Fatalf("ListDescendants: %v", err)
				}
				if g, want := rowsText(got), strings.Join(tt.descendants, "\n"); g != want {
					t.Errorf("ListDescendants (concurrency %d):\n%s\nwant:\n%s", conc, g, want)
				}
				for _, r := range got {
					if (r.Diagnostic == "") != (r.Reason == "") {
						t.Errorf("%s: diagnostic %q with reason %q", r.ID, r.Diagnostic, r.Reason)
					}
				}
			}
		})
	}
}

func TestDiagnosticReasons(t *testing.T) {
	w := newWorld(t)
	w.stored("root", "", "bad", "gone")
	w.stored("bad", "root")
	w.corrupt("bad")
	rows, err := catalog.ListChildren(context.Background(), w.deps(), "root")
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 {
		t.Fatalf("rows:\n%s", rowsText(rows))
	}
	for _, tc := range []struct {
		row        catalog.Row
		diag, says string
	}{
		{rows[0], catalog.DiagnosticCorrupt, "unsupported format at seq 0"},
		{rows[1], catalog.DiagnosticUnavailable, "session not found"},
	} {
		if tc.row.Diagnostic != tc.diag || !strings.Contains(tc.row.Reason, tc.says) {
			t.Errorf("%s: %s %q, want %s mentioning %q", tc.row.ID, tc.row.Diagnostic, tc.row.Reason, tc.diag, tc.says)
		}
	}
}

// TestListChildrenOfFork lists a fork directly: the children its seed
// names belong to its parent and must not appear.
func TestListChildrenOfFork(t *testing.T) {
	w := newWorld(t)
	root := w.stored("root", "", "a")
	w.stored("a", "root")
	w.fork("f", root, "f1")
	w.stored("f1", "f")
	rows, err := catalog.ListChildren(context.Background(), w.deps(), "f")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := rowsText(rows), `f1<f d1 one-shot inactive "task f1"`; got != want {
		t.Errorf("rows:\n%s\nwant:\n%s", got, want)
	}
}

// TestLiveProjectionsServeTheCatalog: a live session with the catalog
// unit attached is served from its watermark state.
func TestLiveProjectionsServeTheCatalog(t *testing.T) {
	w := newWorld(t)
	w.stored("root", "", "p")
	l := w.liveOnly("p", "root", true)
	reg := projection.NewRegistry()
	if err := reg.Register(catalog.Unit(l.Header())); err != nil {
		t.Fatal(err)
	}
	w.proj["p"] = reg.Attach(l)
	start(t, l, "p1", subagent.ModeContinuable)
	w.stored("p1", "p")

	rows, err := catalog.ListDescendants(context.Background(), w.deps(), "root")
	if err != nil {
		t.Fatal(err)
	}
	want := `p<root d1 one-shot running "task p" +` + "\n" + `p1<p d2 continuable inactive "task p1"`
	if got := rowsText(rows); got != want {
		t.Errorf("rows:\n%s\nwant:\n%s", got, want)
	}
	if w.served != 1 {
		t.Errorf("catalog served from projections %d times, want 1", w.served)
	}
}

func TestListingFailures(t *testing.T) {
	tests := []struct {
		name  string
		build func(w *world) (context.Context, catalog.Deps)
		root  string
		check func(err error) bool
	}{
		{
			name:  "missing root",
			build: func(w *world) (context.Context, catalog.Deps) { return context.Background(), w.deps() },
			root:  "nobody",
			check: func(err error) bool { return errors.Is(err, sqlite.ErrNotFound) },
		},
		{
			name: "corrupt root",
			build: func(w *world) (context.Context, catalog.Deps) {
				w.stored("root", "", "a")
				w.corrupt("root")
				return context.Background(), w.deps()
			},
			root: "root",
			check: func(err error) bool {
				var fe *session.FormatError
				return errors.As(err, &fe) && errors.Is(err, sqlite.ErrCorrupt)
			},
		},
		{
			name: "cancelled before",
			build: func(w *world) (context.Context, catalog.Deps) {
				w.stored("root", "")
				ctx, cancel := context.WithCancel(context.Background())
				cancel()
				return ctx, w.deps()
			},
			root:  "root",
			check: func(err error) bool { return errors.Is(err, context.Canceled) },
		},
		{
			name: "cancelled while reading a child",
			build: func(w *world) (context.Context, catalog.Deps) {
				w.stored("root", "", "a", "b")
				w.stored("a", "root")
				w.stored("b", "root")
				ctx, cancel := context.WithCancel(context.Background())
				w.t.Cleanup(cancel)
				deps := w.deps()
				deps.Store = cancelOn{Store: w.store, id: "b", cancel: cancel}
				return ctx, deps
			},
			root:  "root",
			check: func(err error) bool { return errors.Is(err, context.Canceled) },
		},
		{
			name: "cancelled with a cause",
			build: func(w *world) (context.Context, catalog.Deps) {
				w.stored("root", "", "a")
				w.stored("a", "root")
				ctx, cancel := context.WithCancelCause(context.Background())
				cancel(errStop)
				return ctx, w.deps()
			},
			root:  "root",
			check: func(err error) bool { return errors.Is(err, errStop) },
		},
		{
			name: "no store",
			build: func(w *world) (context.Context, catalog.Deps) {
				return context.Background(), catalog.Deps{Live: w}
			},
			root:  "root",
			check: func(err error) bool { return err != nil && strings.Contains(err.Error(), "no session store") },
		},
		{
			name:  "no root id",
			build: func(w *world) (context.Context, catalog.Deps) { return context.Background(), w.deps() },
			root:  "",
			check: func(err error) bool { return err != nil },
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, listing := range []struct {
				name string
				fn   func(context.Context, catalog.Deps, string) ([]catalog.Row, error)
			}{{"ListChildren", catalog.ListChildren}, {"ListDescendants", catalog.ListDescendants}} {
				w := newWorld(t)
				ctx, deps := tt.build(w)
				rows, err := listing.fn(ctx, deps, tt.root)
				if rows != nil || !tt.check(err) {
					t.Errorf("%s = %d rows, %v", listing.name, len(rows), err)
				}
			}
		})
	}
}

var errStop = errors.New("user stopped the listing")
