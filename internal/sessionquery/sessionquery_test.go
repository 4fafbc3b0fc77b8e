package sessionquery_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/dsh-dev/dsh/internal/leakcheck"
	"github.com/dsh-dev/dsh/internal/llm"
	"github.com/dsh-dev/dsh/internal/session"
	"github.com/dsh-dev/dsh/internal/sessionquery"
	"github.com/dsh-dev/dsh/internal/store/sqlite"
)

func TestMain(m *testing.M) { os.Exit(leakcheck.Run(m)) }

func newStore(t *testing.T) *sqlite.Store {
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "dsh.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func add(t *testing.T, st *sqlite.Store, id, cwd, parent, prompt string) {
	t.Helper()
	ctx := context.Background()
	if err := st.Create(ctx, session.Header{Version: session.FormatVersion, ID: id, CreatedAt: 1, Cwd: cwd, ParentSession: parent}); err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(llm.Message{ID: "m", Role: llm.RoleUser, Content: []llm.Block{llm.TextBlock(prompt)}, Source: llm.Source{Kind: "user"}})
	if err := st.Append(ctx, id, []session.Event{{Type: session.TypeUserMessage, Seq: 0, Time: 1, Data: raw, SurfaceOp: session.Append}}); err != nil {
		t.Fatal(err)
	}
}

func code(err error) string {
	var e *sessionquery.Error
	if errors.As(err, &e) {
		return e.Code
	}
	if err != nil {
		return err.Error()
	}
	return ""
}

// TestScopeCanonicalDirAndPrefixes: a session sees the sessions of its
// directory under any spelling (a symlink), its lineage elsewhere, and
// nothing else; id prefixes resolve among the visible sessions only, so
// a prefix shared with a hidden session is not ambiguous.
func TestScopeCanonicalDirAndPrefixes(t *testing.T) {
	ctx := context.Background()
	st := newStore(t)
	real := t.TempDir()
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	other := t.TempDir()
	add(t, st, "aaaa-caller", real, "", "caller talks about otters")
	add(t, st, "aaaa-sibling", link, "", "sibling talks about otters")
	add(t, st, "bbbb-hidden", other, "", "hidden talks about otters")
	add(t, st, "cccc-child", other, "aaaa-caller", "child talks about otters")
	add(t, st, "bbbb-gone", filepath.Join(real, "removed", ".."), "", "gone talks about otters")
	svc := sessionquery.New(st)
	sc, err := svc.SessionScope(ctx, "aaaa-caller")
	if err != nil {
		t.Fatal(err)
	}
	hits, err := svc.SearchSessions(ctx, sc, "otters", 0)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, h := range hits {
		got[h.Entry.Header.ID] = true
	}
	if len(got) != 4 || !got["aaaa-caller"] || !got["aaaa-sibling"] || !got["cccc-child"] || !got["bbbb-gone"] || got["bbbb-hidden"] {
		t.Errorf("visible: %v", got)
	}
	if _, err := svc.Trace(ctx, sc, "bbbb-hidden"); code(err) != sessionquery.CodeSessionNotFound {
		t.Errorf("hidden session: %v", err)
	}
	if _, err := svc.Trace(ctx, sc, "no-such-session"); code(err) != sessionquery.CodeSessionNotFound {
		t.Errorf("missing session: %v", err)
	}
	// "bbbb" prefixes a hidden session and a visible one: it names the visible one.
	if l, err := svc.Trace(ctx, sc, "bbbb"); err != nil || l.Session.ID != "bbbb-gone" {
		t.Errorf("prefix: %+v %v", l.Session, err)
	}
	if _, err := svc.Trace(ctx, sc, "aaaa"); code(err) != "SESSION_AMBIGUOUS" {
		t.Errorf("ambiguous prefix: %v", err)
	}
	l, err := svc.Trace(ctx, sc, "cccc-child")
	if err != nil || len(l.Ancestors) != 1 || l.Ancestors[0].ID != "aaaa-caller" {
		t.Errorf("child lineage: %+v %v", l, err)
	}
	// From the other directory's session, the caller's side is hidden.
	sc2, err := svc.SessionScope(ctx, "bbbb-hidden")
	if err != nil {
		t.Fatal(err)
	}
	if l, err := svc.Trace(ctx, sc2, "cccc-child"); err != nil || len(l.Ancestors) != 0 || l.Hidden != 1 {
		t.Errorf("child seen from its directory: %+v %v", l, err)
	}
	if _, err := svc.SearchEvents(ctx, sc2, sessionquery.EventQuery{Text: "otters", SessionID: "aaaa-caller"}); code(err) != sessionquery.CodeSessionNotFound {
		t.Errorf("event search in a hidden session: %v", err)
	}
	if _, err := svc.SearchSessions(ctx, sc2, "()", 0); code(err) != sessionquery.CodeInvalidQuery {
		t.Errorf("invalid query: %v", err)
	}
}
