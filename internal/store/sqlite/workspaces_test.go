package sqlite

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/dsh-dev/dsh/internal/session"
	"github.com/dsh-dev/dsh/internal/store"
)

// dropV4 turns a current database back into a version-3 one.
func dropV4(t testing.TB, s *Store) {
	t.Helper()
	for _, q := range []string{
		`DROP INDEX sessions_top_by_cwd`, `DROP INDEX sessions_top_by_updated`,
		`DROP TABLE workspace_sessions`, `DROP TABLE workspaces`, `DROP TABLE meta`,
		`PRAGMA user_version = 3`,
	} {
		rawExec(t, s, q)
	}
}

// TestSchemaV3Migrates: a version-3 database opens as version 4 with its
// sessions, logs and summaries intact, and an empty registry that works.
func TestSchemaV3Migrates(t *testing.T) {
	ctx := context.Background()
	s, path := newStore(t)
	fillSessions(t, s)
	before := map[string][]session.Event{}
	for id := range entries(t, s) {
		_, events, err := s.Inspect(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		before[id] = events
	}
	dropV4(t, s)
	s.Close()

	s2 := openAt(t, path)
	var v int
	if err := s2.r.QueryRow(`PRAGMA user_version`).Scan(&v); err != nil || v != 4 {
		t.Fatalf("user_version %d, %v", v, err)
	}
	m := entries(t, s2)
	checkFilled(t, m)
	for id, want := range before {
		_, got, err := s2.Inspect(ctx, id)
		if err != nil || len(got) != len(want) {
			t.Fatalf("%s: %d events, want %d: %v", id, len(got), len(want), err)
		}
	}
	if done, err := s2.WorkspacesBootstrapped(ctx); err != nil || done {
		t.Fatalf("bootstrapped = %v, %v", done, err)
	}
	w, created, err := s2.CreateWorkspace(ctx, store.WorkspaceRecord{ID: "w", Path: "/work/project", Title: "project"})
	if err != nil || !created || w.CreatedAt == 0 {
		t.Fatalf("CreateWorkspace = %+v, %v, %v", w, created, err)
	}
	if err := s2.AttachSession(ctx, "w", "done"); err != nil {
		t.Fatal(err)
	}
	if got, _ := s2.GetWorkspace(ctx, "w"); len(got.Members) != 1 || got.Members[0] != (store.Member{SessionID: "done", Cwd: "/work/project"}) {
		t.Fatalf("members %+v", got.Members)
	}
}

// TestBootstrapIsOneTransaction: a bootstrap that fails halfway (here a
// registration of a session the store does not hold) leaves neither
// records nor the marker, and a later one runs.
func TestBootstrapIsOneTransaction(t *testing.T) {
	ctx := context.Background()
	s, _ := newStore(t)
	mustCreate(t, s, "a")
	bad := []store.WorkspaceRecord{
		{ID: "w1", Path: "/p1", Title: "p1", Members: []store.Member{{SessionID: "a"}}},
		{ID: "w2", Path: "/p2", Title: "p2", Members: []store.Member{{SessionID: "missing"}}},
	}
	if _, err := s.BootstrapWorkspaces(ctx, bad); err == nil {
		t.Fatal("bootstrap with an unknown session succeeded")
	}
	if all, _ := s.ListWorkspaces(ctx); len(all) != 0 {
		t.Fatalf("half a bootstrap stored: %+v", all)
	}
	if done, _ := s.WorkspacesBootstrapped(ctx); done {
		t.Fatal("marker written by a failed bootstrap")
	}
	if done, err := s.BootstrapWorkspaces(ctx, bad[:1]); err != nil || !done {
		t.Fatalf("bootstrap = %v, %v", done, err)
	}
	if done, err := s.BootstrapWorkspaces(ctx, bad[:1]); err != nil || done {
		t.Fatalf("second bootstrap = %v, %v", done, err)
	}
}

func TestWorkspaceStoreErrors(t *testing.T) {
	ctx := context.Background()
	s, _ := newStore(t)
	if _, err := s.GetWorkspace(ctx, "nope"); !errors.Is(err, store.ErrWorkspaceNotFound) {
		t.Fatalf("Get: %v", err)
	}
	if _, err := s.RenameWorkspace(ctx, "nope", "t"); !errors.Is(err, store.ErrWorkspaceNotFound) {
		t.Fatalf("Rename: %v", err)
	}
	if err := s.DeleteWorkspace(ctx, "nope"); !errors.Is(err, store.ErrWorkspaceNotFound) {
		t.Fatalf("Delete: %v", err)
	}
	if err := s.AttachSession(ctx, "nope", "x"); !errors.Is(err, store.ErrWorkspaceNotFound) {
		t.Fatalf("Attach: %v", err)
	}
	if _, _, err := s.CreateWorkspace(ctx, store.WorkspaceRecord{}); err == nil {
		t.Fatal("created a workspace without id and path")
	}
	if _, _, err := s.CreateWorkspace(ctx, store.WorkspaceRecord{ID: "w", Path: "/p"}); err != nil {
		t.Fatal(err)
	}
	if err := s.AttachSession(ctx, "w", "x"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Attach unknown session: %v", err)
	}
	if err := s.MoveWorkspace(ctx, "w", "w"); !errors.Is(err, store.ErrWorkspaceMove) {
		t.Fatalf("Move before itself: %v", err)
	}
	if err := s.MoveWorkspaceSession(ctx, "nope", "x", ""); !errors.Is(err, store.ErrWorkspaceNotFound) {
		t.Fatalf("MoveSession: %v", err)
	}
	if _, err := s.SessionCwd(ctx, "x"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("SessionCwd: %v", err)
	}
}

func TestListFilter(t *testing.T) {
	ctx := context.Background()
	s, _ := newStore(t)
	create := func(id, cwd, parent string) {
		h := hdr(id)
		h.Cwd, h.ParentSession = cwd, parent
		if err := s.Create(ctx, h); err != nil {
			t.Fatal(err)
		}
	}
	create("a1", "/a", "")
	create("b1", "/b", "")
	create("a2", "/a", "")
	create("a2-child", "/a", "a2")
	create("a3", "/a", "")
	list := func(f ListFilter) []string {
		es, err := s.List(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, e := range es {
			ids = append(ids, e.Header.ID)
		}
		return ids
	}
	for _, c := range []struct {
		f    ListFilter
		want []string
	}{
		{ListFilter{}, []string{"a3", "a2-child", "a2", "b1", "a1"}},
		{ListFilter{Cwd: "/a"}, []string{"a3", "a2-child", "a2", "a1"}},
		{ListFilter{Cwd: "/a", TopLevelOnly: true}, []string{"a3", "a2", "a1"}},
		{ListFilter{TopLevelOnly: true, Limit: 2}, []string{"a3", "a2"}},
		{ListFilter{Cwd: "/none"}, nil},
	} {
		if got := list(c.f); !slices.Equal(got, c.want) {
			t.Errorf("List(%+v) = %v, want %v", c.f, got, c.want)
		}
	}
}

// TestListUsesIndexes: a filtered listing searches an index in listing
// order instead of scanning and sorting the sessions table (only rows of
// equal updated_at are sorted, by rowid).
func TestListUsesIndexes(t *testing.T) {
	s, _ := newStore(t)
	for _, f := range []ListFilter{{Cwd: "/a"}, {Cwd: "/a", TopLevelOnly: true}, {TopLevelOnly: true}, {}} {
		q, args := listQuery(f)
		rows, err := s.r.Query("EXPLAIN QUERY PLAN "+q, args...)
		if err != nil {
			t.Fatal(err)
		}
		var plan []string
		for rows.Next() {
			var id, parent, notused int
			var detail string
			if err := rows.Scan(&id, &parent, &notused, &detail); err != nil {
				t.Fatal(err)
			}
			plan = append(plan, detail)
		}
		rows.Close()
		p := strings.Join(plan, "; ")
		if strings.Contains(p, "SCAN s") && !strings.Contains(p, "USING INDEX") || strings.Contains(p, "TEMP B-TREE FOR ORDER BY") {
			t.Errorf("List(%+v) plan %q", f, p)
		}
	}
}
