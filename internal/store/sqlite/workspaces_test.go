package sqlite

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/dsh-dev/dsh/internal/llm"
	"github.com/dsh-dev/dsh/internal/session"
	"github.com/dsh-dev/dsh/internal/store"
)

// dropV4 turns a current database back into a version-3 one.
func dropV4(t testing.TB, s *Store) {
	t.Helper()
	for _, q := range []string{
		`DROP INDEX IF EXISTS sessions_top_by_cwd`, `DROP INDEX IF EXISTS sessions_top_by_updated`,
		`DROP INDEX IF EXISTS sessions_list_top`, `DROP INDEX IF EXISTS sessions_list_top_by_cwd`,
		`DROP TABLE workspace_sessions`, `DROP TABLE workspaces`, `DROP TABLE meta`,
		`PRAGMA user_version = 3`,
	} {
		rawExec(t, s, q)
	}
}

// TestSchemaV3Migrates: a version-3 database opens as the current version with its
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
	if err := s2.r.QueryRow(`PRAGMA user_version`).Scan(&v); err != nil || v != schemaVersion {
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
	// Each session a millisecond newer than the one before (with equal
	// times the id would decide).
	clock := int64(1_700_000_000_000)
	s.now = func() int64 { clock++; return clock }
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

// TestSchemaV4Migrates: a version-4 database, whose events table has no
// rowid, opens as the current version with every log intact (body
// bytes included), the events table a rowid table, and the (session_id,
// seq) key still refusing a duplicate.
func TestSchemaV4Migrates(t *testing.T) {
	ctx := context.Background()
	s, path := newStore(t)
	// Sessions stored by this build, then the database taken back to the
	// version-4 shape: the events table without a rowid, no search index.
	fillSessions(t, s)
	mustCreate(t, s, "big")
	big := simpleLog(t)
	big = append(big, ev(t, int64(len(big)), session.TypeUserMessage,
		llm.Message{ID: "u", Role: llm.RoleUser, Content: []llm.Block{llm.TextBlock(strings.Repeat("x", 40_000))}}))
	mustAppend(t, s, "big", big...)
	for _, q := range []string{
		`CREATE TABLE events_v4 (
			session_id TEXT NOT NULL REFERENCES sessions (id),
			seq        INTEGER NOT NULL,
			type       TEXT NOT NULL,
			time       INTEGER NOT NULL,
			body       TEXT NOT NULL,
			PRIMARY KEY (session_id, seq)
		) WITHOUT ROWID`,
		`INSERT INTO events_v4 SELECT session_id, seq, type, time, body FROM events`,
		`DROP TABLE events`,
		`ALTER TABLE events_v4 RENAME TO events`,
		`DROP TABLE search`,
		`PRAGMA user_version = 4`,
	} {
		rawExec(t, s, q)
	}
	bodies := func(s *Store) map[string]string {
		rows, err := s.r.QueryContext(ctx, `SELECT session_id, seq, body FROM events ORDER BY session_id, seq`)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		m := map[string]string{}
		for rows.Next() {
			var id, body string
			var seq int64
			if err := rows.Scan(&id, &seq, &body); err != nil {
				t.Fatal(err)
			}
			m[fmt.Sprint(id, "/", seq)] = body
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		return m
	}
	before := bodies(s)
	s.Close()

	s2 := openAt(t, path)
	var v int
	var ddl string
	if err := s2.r.QueryRow(`PRAGMA user_version`).Scan(&v); err != nil || v != schemaVersion {
		t.Fatalf("user_version %d, %v", v, err)
	}
	if err := s2.r.QueryRow(`SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'events'`).Scan(&ddl); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(strings.ToUpper(ddl), "WITHOUT ROWID") {
		t.Fatalf("events still without rowid: %s", ddl)
	}
	after := bodies(s2)
	if len(after) != len(before) || len(before) == 0 {
		t.Fatalf("%d event rows after the migration, %d before", len(after), len(before))
	}
	for k, b := range before {
		if after[k] != b {
			t.Fatalf("event %s changed in the migration", k)
		}
	}
	checkFilled(t, entries(t, s2))
	if _, got, err := s2.Inspect(ctx, "big"); err != nil || len(got) != len(big) {
		t.Fatalf("big: %d events, %v", len(got), err)
	}
	// The key still refuses a second event at a stored seq, and appends go on.
	if _, err := s2.w.ExecContext(ctx, `INSERT INTO events (session_id, seq, type, time, body) VALUES ('big', 0, 'x', 0, '{}')`); err == nil {
		t.Fatal("duplicate (session_id, seq) stored")
	}
	mustAppend(t, s2, "big", ev(t, int64(len(big)), session.TypeTurnStart, session.TurnStart{Turn: 1}))
}
