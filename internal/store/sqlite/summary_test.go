package sqlite

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/dsh-dev/dsh/internal/llm"
	"github.com/dsh-dev/dsh/internal/session"
)

// dropSummaryColumns turns a current database back into the version-2
// shape (before the summary columns).
func dropSummaryColumns(t testing.TB, s *Store) {
	t.Helper()
	for _, c := range []string{"title", "turns", "state"} {
		rawExec(t, s, `ALTER TABLE sessions DROP COLUMN `+c)
	}
}

func userMsg(t testing.TB, seq int64, kind, text string) session.Event {
	return ev(t, seq, session.TypeUserMessage, llm.Message{ID: "u", Role: llm.RoleUser,
		Content: []llm.Block{llm.TextBlock(text)}, Source: llm.Source{Kind: kind}})
}

func titleEv(t testing.TB, seq int64, p session.Title) session.Event {
	e := ev(t, seq, session.TypeTitle, p)
	e.Ignorable = true
	return e
}

func entries(t testing.TB, s *Store) map[string]Entry {
	t.Helper()
	list, err := s.List(context.Background(), ListFilter{})
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]Entry{}
	for _, e := range list {
		if e.Err != nil {
			t.Fatalf("entry %s: %v", e.Header.ID, e.Err)
		}
		m[e.Header.ID] = e
	}
	return m
}

func checkEntry(t testing.TB, got Entry, title string, turns int64, status string) {
	t.Helper()
	if got.Title != title || got.Turns != turns || got.Status != status {
		t.Errorf("%s: title %q turns %d status %q; want %q %d %q", got.Header.ID, got.Title, got.Turns, got.Status, title, turns, status)
	}
}

// fillSessions stores one session of each kind the listing tells apart.
func fillSessions(t testing.TB, s *Store) {
	for _, id := range []string{"done", "crashed", "empty", "named", "twice"} {
		mustCreate(t, s, id)
	}
	mustAppend(t, s, "done", simpleLog(t)...)
	mustAppend(t, s, "crashed", crashedLog(t)...)
	// A model title replaces the prompt title; a failed call after it
	// changes nothing.
	log := simpleLog(t)
	log = append(log, titleEv(t, 7, session.Title{Title: "Greeting exchange", Provider: "p", Model: "m"}),
		titleEv(t, 8, session.Title{Provider: "p", Model: "m", Error: &llm.Failure{Code: llm.CodeAuth, Message: "bad key"}}))
	mustAppend(t, s, "named", log...)
	// Titles come from the first human prompt, whichever batch it is in;
	// injected context before it does not count, later prompts do not
	// rename, and every turn is counted.
	mustAppend(t, s, "twice", userMsg(t, 0, "plugin", "AGENTS.md: be terse"))
	mustAppend(t, s, "twice", userMsg(t, 1, "user", "  first   prompt\nwith details"),
		ev(t, 2, session.TypeTurnStart, session.TurnStart{Turn: 0}),
		ev(t, 3, session.TypeTurnEnd, session.TurnEnd{Turn: 0, Reason: session.TurnEndReason{Kind: session.EndError}}))
	mustAppend(t, s, "twice", userMsg(t, 4, "user", "second prompt"),
		ev(t, 5, session.TypeTurnStart, session.TurnStart{Turn: 1}),
		ev(t, 6, session.TypeTurnEnd, session.TurnEnd{Turn: 1, Reason: session.TurnEndReason{Kind: session.EndAborted, Cause: "user"}}))
}

func checkFilled(t testing.TB, m map[string]Entry) {
	t.Helper()
	checkEntry(t, m["done"], "hi <there> & you", 1, session.EndCompleted)
	checkEntry(t, m["crashed"], "look around", 1, StatusInterrupted)
	checkEntry(t, m["empty"], "", 0, StatusNew)
	checkEntry(t, m["named"], "Greeting exchange", 1, session.EndCompleted)
	checkEntry(t, m["twice"], "first prompt", 2, session.EndAborted)
	if m["done"].Events != 7 || m["empty"].Events != 0 {
		t.Errorf("event counts %d %d", m["done"].Events, m["empty"].Events)
	}
}

func TestListSummaries(t *testing.T) {
	ctx := context.Background()
	s, _ := newStore(t)
	fillSessions(t, s)
	checkFilled(t, entries(t, s))

	// While a live process (this one) holds a session it is running;
	// released, it shows how its last turn ended again.
	l := mustAcquire(t, s, "done", "dsh run")
	checkEntry(t, entries(t, s)["done"], "hi <there> & you", 1, StatusRunning)
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	got, err := s.Get(ctx, "done")
	if err != nil {
		t.Fatal(err)
	}
	checkEntry(t, got, "hi <there> & you", 1, session.EndCompleted)
	if _, err := s.Get(ctx, "nope"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Get unknown: %v", err)
	}
}

// TestSchemaV2MigratesSummaries: a version-2 database gains the summary
// columns, backfilled from the stored logs; a damaged event does not stop
// the migration.
func TestSchemaV2MigratesSummaries(t *testing.T) {
	s, path := newStore(t)
	fillSessions(t, s)
	mustCreate(t, s, "damaged")
	mustAppend(t, s, "damaged", simpleLog(t)...)
	rawExec(t, s, `UPDATE events SET body = '{' WHERE session_id = 'damaged' AND seq = 0`)
	dropSummaryColumns(t, s)
	rawExec(t, s, `PRAGMA user_version = 2`)
	s.Close()

	s2 := openAt(t, path)
	m := entries(t, s2)
	checkFilled(t, m)
	checkEntry(t, m["damaged"], "", 1, session.EndCompleted)
}

func TestImportKeepsTitle(t *testing.T) {
	ctx := context.Background()
	s, _ := newStore(t)
	mustCreate(t, s, "named")
	log := append(simpleLog(t), titleEv(t, 7, session.Title{Title: "Greeting exchange", Provider: "p", Model: "m"}))
	mustAppend(t, s, "named", log...)
	var b strings.Builder
	if err := s.Export(ctx, "named", &b); err != nil {
		t.Fatal(err)
	}
	other, _ := newStore(t)
	if _, err := other.Import(ctx, strings.NewReader(b.String())); err != nil {
		t.Fatal(err)
	}
	checkEntry(t, entries(t, other)["named"], "Greeting exchange", 1, session.EndCompleted)
}
