package sqlite

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/dsh-dev/dsh/internal/llm"
	"github.com/dsh-dev/dsh/internal/session"
	"github.com/dsh-dev/dsh/internal/store"
)

// TestFTS5CompiledIn: the pure-Go driver has FTS5 (the index depends on
// it; a driver upgrade that drops it must fail here, not at a user's
// first search).
func TestFTS5CompiledIn(t *testing.T) {
	s, _ := newStore(t)
	var on int
	if err := s.r.QueryRow(`SELECT sqlite_compileoption_used('ENABLE_FTS5')`).Scan(&on); err != nil || on != 1 {
		t.Fatalf("ENABLE_FTS5 = %d (%v)", on, err)
	}
}

// searchLog is a turn with a prompt, a reply with reasoning, a tool call
// and its result.
func searchLog(t testing.TB, first int64, prompt, reply, cmd, output string) []session.Event {
	user := llm.Message{ID: fmt.Sprint("u", first), Role: llm.RoleUser, Content: []llm.Block{llm.TextBlock(prompt)}, Source: llm.Source{Kind: "user"}}
	am := llm.Message{ID: fmt.Sprint("a", first), Role: llm.RoleAssistant, Source: llm.Source{Kind: "model"}, Content: []llm.Block{
		{Type: llm.BlockReasoning, Text: "thinking about " + reply},
		llm.TextBlock(reply),
		{Type: llm.BlockToolCall, ID: fmt.Sprint("c", first), Name: "bash", Arguments: fmt.Sprintf(`{"command":%q}`, cmd)},
	}}
	n := first
	next := func() int64 { n++; return n - 1 }
	events := []session.Event{
		ev(t, next(), session.TypeTurnStart, session.TurnStart{Turn: 0}),
		ev(t, next(), session.TypeStepStart, session.StepRef{}),
		ev(t, next(), session.TypeUserMessage, user),
		ev(t, next(), session.TypeAssistantChunk, session.AssistantChunk{Chunk: llm.Chunk{Type: llm.ChunkTextDelta, Text: reply}}),
		ev(t, next(), session.TypeAssistantMsg, session.AssistantMessage{Message: am}),
		ev(t, next(), session.TypeToolCall, session.ToolCall{CallID: fmt.Sprint("c", first), Name: "bash", Arguments: fmt.Sprintf(`{"command":%q}`, cmd)}),
		ev(t, next(), session.TypeToolResult, session.ToolResult{CallID: fmt.Sprint("c", first), Name: "bash", Content: []llm.Block{llm.TextBlock(output)}}),
		ev(t, next(), session.TypeStepEnd, session.StepRef{}),
		ev(t, next(), session.TypeTurnEnd, session.TurnEnd{Reason: session.TurnEndReason{Kind: session.EndCompleted}}),
	}
	events[4].SourceEventSeqs = []int64{first + 3}
	return events
}

// indexRows dumps the index in rowid order.
func indexRows(t testing.TB, s *Store) []string {
	t.Helper()
	rows, err := s.r.Query(`SELECT rowid, text, scope, session_id, seq, type, time FROM search ORDER BY rowid`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var (
			rid, seq, tm     int64
			text, sc, sid, y string
		)
		if err := rows.Scan(&rid, &text, &sc, &sid, &seq, &y, &tm); err != nil {
			t.Fatal(err)
		}
		out = append(out, fmt.Sprintf("%d|%s|%s|%d|%s|%d|%q", rid, sc, sid, seq, y, tm, text))
	}
	return out
}

func seqsOf(hits []store.EventHit) []string {
	var out []string
	for _, h := range hits {
		out = append(out, fmt.Sprintf("%s/%d", h.SessionID, h.Seq))
	}
	return out
}

func TestSearchIndexKeptCurrentOnAppend(t *testing.T) {
	ctx := context.Background()
	s, _ := newStore(t)
	mustCreate(t, s, "a")
	mustAppend(t, s, "a", searchLog(t, 0, "fix the flaky quokka test", "the quokka was racing", "go test ./quokka", "ok quokka 0.2s")...)
	hits, err := s.SearchEvents(ctx, store.SearchQuery{Text: "quokka"})
	if err != nil {
		t.Fatal(err)
	}
	// Newest first; the chunk (seq 3) is not indexed, its message is.
	if got, want := seqsOf(hits), []string{"a/6", "a/5", "a/4", "a/2"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("hits %v, want %v", got, want)
	}
	if h := hits[3]; h.Type != session.TypeUserMessage || h.Snippet != "fix the flaky "+store.SnippetOpen+"quokka"+store.SnippetClose+" test" {
		t.Errorf("prompt hit %+v", h)
	}
	// Reasoning is searchable; the tool call by its argument's words.
	for q, want := range map[string]string{"thinking": "a/4", `"go test"`: "a/5", "racing": "a/4"} {
		hits, err := s.SearchEvents(ctx, store.SearchQuery{Text: q})
		if err != nil || len(hits) != 1 || seqsOf(hits)[0] != want {
			t.Errorf("%s: %v (%v), want %s", q, seqsOf(hits), err, want)
		}
	}
	// A second append is indexed too, and a title event.
	mustAppend(t, s, "a", searchLog(t, 9, "now the wombat", "wombat done", "true", "")...)
	mustAppend(t, s, "a", ev(t, 18, session.TypeTitle, session.Title{Title: "Quokka and wombat work"}))
	hits, err = s.SearchEvents(ctx, store.SearchQuery{Text: "wombat quokka"})
	if err != nil || !reflect.DeepEqual(seqsOf(hits), []string{"a/18"}) {
		t.Errorf("both words: %v (%v)", seqsOf(hits), err)
	}
}

func TestSearchInboxReferencedPrompt(t *testing.T) {
	ctx := context.Background()
	s, _ := newStore(t)
	mustCreate(t, s, "s")
	log, err := session.NewLog(hdr("s"), nil, s)
	if err != nil {
		t.Fatal(err)
	}
	prompt := llm.Message{ID: "m1", Role: llm.RoleUser, Content: []llm.Block{llm.TextBlock("the platypus prompt")}, Source: llm.Source{Kind: "user"}}
	sp, err := log.Append(session.TypeInboxSpliced, session.InboxSpliced{Target: session.TargetNextTurn, Inserted: []llm.Message{prompt}})
	if err != nil {
		t.Fatal(err)
	}
	// The splice is stored before the referencing message, in another batch.
	if err := log.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := log.Append(session.TypeUserMessage, prompt, session.Surface(), session.FromInbox(session.InboxRef{Seq: sp.Seq})); err != nil {
		t.Fatal(err)
	}
	if err := log.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	hits, err := s.SearchEvents(ctx, store.SearchQuery{Text: "platypus"})
	if err != nil || !reflect.DeepEqual(seqsOf(hits), []string{"s/1"}) {
		t.Fatalf("hits %v (%v), want the user/message only", seqsOf(hits), err)
	}
	before := indexRows(t, s)
	if _, _, err := s.Reindex(ctx, "s"); err != nil {
		t.Fatal(err)
	}
	if after := indexRows(t, s); !reflect.DeepEqual(before, after) {
		t.Errorf("reindex differs:\n%v\n%v", before, after)
	}
}

func TestSearchReindexEqualsIncremental(t *testing.T) {
	ctx := context.Background()
	s, _ := newStore(t)
	for i := range 5 {
		id := fmt.Sprint("s", i)
		mustCreate(t, s, id)
		mustAppend(t, s, id, searchLog(t, 0, fmt.Sprintf("task %d about lemurs", i), "done with lemurs", "ls", strings.Repeat("output line\n", i*400))...)
	}
	// A huge result is bounded: its start and end are indexed, not its middle.
	big := "BEGINMARK " + strings.Repeat("filler ", 4000) + "MIDDLEMARK " + strings.Repeat("filler ", 4000) + "ENDMARK"
	mustCreate(t, s, "big")
	mustAppend(t, s, "big", searchLog(t, 0, "big one", "ok", "cat big", big)...)
	incremental := indexRows(t, s)
	if n, m, err := s.Reindex(ctx, ""); err != nil || n != 6 || m != 6*4 {
		t.Fatalf("Reindex all: %d sessions %d events (%v)", n, m, err)
	}
	if got := indexRows(t, s); !reflect.DeepEqual(got, incremental) {
		t.Errorf("reindexed index differs from the incremental one")
	}
	if n, m, err := s.Reindex(ctx, "s3"); err != nil || n != 1 || m != 4 {
		t.Fatalf("Reindex s3: %d %d (%v)", n, m, err)
	}
	if got := indexRows(t, s); !reflect.DeepEqual(got, incremental) {
		t.Errorf("a one-session reindex changed the index")
	}
	if _, _, err := s.Reindex(ctx, "nope"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Reindex of an unknown session: %v", err)
	}
	for q, n := range map[string]int{"BEGINMARK": 1, "ENDMARK": 1, "MIDDLEMARK": 0} {
		if hits, err := s.SearchEvents(ctx, store.SearchQuery{Text: q}); err != nil || len(hits) != n {
			t.Errorf("%s: %d hits (%v), want %d", q, len(hits), err, n)
		}
	}
}

// TestSearchMigrationBackfills: a version-7 database (no index) opened by
// this build gets every stored session indexed, exactly as appends would
// have, in the background.
func TestSearchMigrationBackfills(t *testing.T) {
	ctx := context.Background()
	s, path := newStore(t)
	for i := range 3 {
		id := fmt.Sprint("old", i)
		mustCreate(t, s, id)
		mustAppend(t, s, id, searchLog(t, 0, "migrate the narwhal", "narwhal migrated", "echo", "fine")...)
	}
	want := indexRows(t, s)
	rawExec(t, s, `DROP TABLE search`)
	rawExec(t, s, `PRAGMA user_version = 7`)
	s.Close()
	s2 := openAt(t, path)
	// The migration lists the stored sessions; the backfill (started in
	// the background by Open, and run here to its end) indexes them.
	if _, err := s2.Backfill(ctx); err != nil {
		t.Fatal(err)
	}
	if n, err := s2.IndexPending(ctx); err != nil || n != 0 {
		t.Fatalf("%d sessions still pending (%v)", n, err)
	}
	if got := indexRows(t, s2); !reflect.DeepEqual(got, want) {
		t.Fatalf("backfilled index:\n%v\nwant\n%v", got, want)
	}
	hits, err := s2.SearchSessions(ctx, store.SearchQuery{Text: "narwhal"})
	if err != nil || len(hits) != 3 {
		t.Fatalf("%d session hits (%v)", len(hits), err)
	}
	if hits[0].Entry.Title != "migrate the narwhal" || hits[0].Hit.Seq != 4 {
		t.Errorf("first hit %+v", hits[0])
	}
}

func TestSearchFiltersScopeAndLimit(t *testing.T) {
	ctx := context.Background()
	s, _ := newStore(t)
	for i := range 4 {
		id := fmt.Sprint("s", i)
		mustCreate(t, s, id)
		mustAppend(t, s, id, searchLog(t, 0, "about the axolotl", "axolotl fed", "feed axolotl", "axolotl happy")...)
	}
	q := func(sq store.SearchQuery) []string {
		t.Helper()
		sq.Text = "axolotl"
		hits, err := s.SearchEvents(ctx, sq)
		if err != nil {
			t.Fatal(err)
		}
		return seqsOf(hits)
	}
	if got := q(store.SearchQuery{Limit: 3}); !reflect.DeepEqual(got, []string{"s3/6", "s3/5", "s3/4"}) {
		t.Errorf("limit: %v", got)
	}
	if got := q(store.SearchQuery{SessionID: "s1", Types: []string{session.TypeToolCall, session.TypeUserMessage}}); !reflect.DeepEqual(got, []string{"s1/5", "s1/2"}) {
		t.Errorf("types: %v", got)
	}
	five := int64(5)
	if got := q(store.SearchQuery{SessionID: "s2", SeqFrom: 3, SeqTo: &five}); !reflect.DeepEqual(got, []string{"s2/5", "s2/4"}) {
		t.Errorf("seq range: %v", got)
	}
	if got := q(store.SearchQuery{SessionID: "s2", Since: 1_700_000_000_004, Until: 1_700_000_000_005}); !reflect.DeepEqual(got, []string{"s2/5", "s2/4"}) {
		t.Errorf("time range: %v", got)
	}
	if got := q(store.SearchQuery{Scope: &store.SearchScope{Sessions: []string{"s0"}}, Limit: 2}); !reflect.DeepEqual(got, []string{"s0/6", "s0/5"}) {
		t.Errorf("scope: %v", got)
	}
	if got := q(store.SearchQuery{Scope: &store.SearchScope{Cwds: []string{"/elsewhere"}}}); len(got) != 0 {
		t.Errorf("another directory's scope: %v", got)
	}
	if got := q(store.SearchQuery{Scope: &store.SearchScope{}}); len(got) != 0 {
		t.Errorf("the empty scope: %v", got)
	}
	// A scope of more sessions than the match expression takes is checked
	// row by row, with the same answer.
	big := &store.SearchScope{Sessions: []string{"s1"}}
	for i := range maxScopeTokens {
		big.Sessions = append(big.Sessions, fmt.Sprint("other", i))
	}
	if got := q(store.SearchQuery{Scope: big, Limit: 2}); !reflect.DeepEqual(got, []string{"s1/6", "s1/5"}) {
		t.Errorf("large scope: %v", got)
	}
	if got := q(store.SearchQuery{Scope: &store.SearchScope{Cwds: []string{"/work/project"}}, Limit: 1}); !reflect.DeepEqual(got, []string{"s3/6"}) {
		t.Errorf("directory scope: %v", got)
	}
	hits, err := s.SearchSessions(ctx, store.SearchQuery{Text: "axolotl", Scope: &store.SearchScope{Sessions: []string{"s0", "s2", "s3"}}, Limit: 2})
	if err != nil || len(hits) != 2 || hits[0].Entry.Header.ID != "s3" || hits[1].Entry.Header.ID != "s2" || hits[0].Hit.Seq != 6 {
		t.Errorf("sessions: %+v (%v)", hits, err)
	}
}

// TestSearchQueryQuoting: no input is an FTS5 syntax error or a panic;
// input without a word is SEARCH_INVALID_QUERY.
func TestSearchQueryQuoting(t *testing.T) {
	ctx := context.Background()
	s, _ := newStore(t)
	mustCreate(t, s, "s")
	mustAppend(t, s, "s", searchLog(t, 0, `a "quoted" prompt with NEAR and OR words: col:val (parens) foo_bar`, "reply", "x", "y")...)
	for _, q := range []string{`"unterminated`, `AND OR NOT`, `foo(`, `NEAR(a b)`, `col:val`, `^x`, `"quoted`, `foo_bar`, `pro*`,
		`a OR`, `OR a`, `"" word`, "\xff\xfe bad utf8", `x"y"z`, `'single'`, `{curly}`, `-minus +plus`} {
		if _, err := s.SearchEvents(ctx, store.SearchQuery{Text: q}); err != nil {
			t.Errorf("%q: %v", q, err)
		}
	}
	for q, n := range map[string]int{`pro*`: 1, `"with NEAR"`: 1, `"NEAR with"`: 0, `col:val`: 1, `foo_bar`: 1, `quoted OR nothinghere`: 1, `quoted nothinghere`: 0} {
		if hits, err := s.SearchEvents(ctx, store.SearchQuery{Text: q}); err != nil || len(hits) != n {
			t.Errorf("%q: %d hits (%v), want %d", q, len(hits), err, n)
		}
	}
	for _, q := range []string{"", "   ", `""`, `"" ()`, "* ** OR", strings.Repeat("x", store.MaxQueryLen+1)} {
		_, err := s.SearchEvents(ctx, store.SearchQuery{Text: q})
		var qe *store.QueryError
		if !errors.As(err, &qe) || qe.Code() != store.CodeSearchInvalidQuery || !errors.Is(err, store.ErrInvalidQuery) {
			t.Errorf("%q: %v, want a QueryError", q, err)
		}
	}
}

func TestSearchSnippetBounded(t *testing.T) {
	ctx := context.Background()
	s, _ := newStore(t)
	mustCreate(t, s, "s")
	long := strings.Repeat("supercalifragilistic ", 40) + "needle " + strings.Repeat("expialidocious ", 40)
	mustAppend(t, s, "s", searchLog(t, 0, long, "r", "x", strings.Repeat("needle ", 200))...)
	hits, err := s.SearchEvents(ctx, store.SearchQuery{Text: "needle"})
	if err != nil || len(hits) != 2 {
		t.Fatal(len(hits), err)
	}
	for _, h := range hits {
		if n := utf8.RuneCountInString(h.Snippet); n > store.MaxSnippet {
			t.Errorf("snippet of %d code points: %q", n, h.Snippet)
		}
		if strings.Count(h.Snippet, store.SnippetOpen) != strings.Count(h.Snippet, store.SnippetClose) || !strings.Contains(h.Snippet, store.SnippetOpen+"needle"+store.SnippetClose) {
			t.Errorf("markers of %q", h.Snippet)
		}
	}
}

func TestSearchLineageAndCwds(t *testing.T) {
	ctx := context.Background()
	s, _ := newStore(t)
	mk := func(id, cwd, parent string) {
		h := hdr(id)
		h.Cwd, h.ParentSession = cwd, parent
		if err := s.Create(ctx, h); err != nil {
			t.Fatal(err)
		}
	}
	mk("p", "/w/a", "")
	mk("c2", "/w/a", "p")
	mk("c1", "/w/b", "p")
	mk("x", "/w/c", "")
	if got, err := s.Children(ctx, "p"); err != nil || !reflect.DeepEqual(got, []string{"c1", "c2"}) {
		t.Errorf("Children: %v (%v)", got, err)
	}
	if got, err := s.SessionsIn(ctx, []string{"/w/a", "/w/c"}); err != nil || len(got) != 3 {
		t.Errorf("SessionsIn: %v (%v)", got, err)
	}
	if got, err := s.Cwds(ctx); err != nil || len(got) != 3 {
		t.Errorf("Cwds: %v (%v)", got, err)
	}
}

// TestSearchSkipsInjectedContextAndQueryTools: plugin-injected context
// and the session query tools' own calls and results are not indexed.
func TestSearchSkipsInjectedContextAndQueryTools(t *testing.T) {
	ctx := context.Background()
	s, _ := newStore(t)
	mustCreate(t, s, "s")
	mustAppend(t, s, "s",
		ev(t, 0, session.TypeUserMessage, llm.Message{ID: "r", Role: llm.RoleUser, Content: []llm.Block{llm.TextBlock("reminder about capybara")}, Source: llm.Source{Kind: "plugin", Plugin: "runtime-context"}}),
		ev(t, 1, session.TypeToolCall, session.ToolCall{CallID: "c", Name: "session_search", Arguments: `{"query":"capybara"}`}),
		ev(t, 2, session.TypeToolResult, session.ToolResult{CallID: "c", Name: "session_search", Content: []llm.Block{llm.TextBlock("capybara found")}}),
		ev(t, 3, session.TypeToolCall, session.ToolCall{CallID: "d", Name: "grep", Arguments: `{"pattern":"capybara"}`}),
	)
	hits, err := s.SearchEvents(ctx, store.SearchQuery{Text: "capybara"})
	if err != nil || !reflect.DeepEqual(seqsOf(hits), []string{"s/3"}) {
		t.Errorf("hits %v (%v), want only the grep call", seqsOf(hits), err)
	}
}

// TestSearchImportedSession: an imported session is indexed like an
// appended one.
func TestSearchImportedSession(t *testing.T) {
	ctx := context.Background()
	src, _ := newStore(t)
	mustCreate(t, src, "s")
	mustAppend(t, src, "s", searchLog(t, 0, "import the okapi", "okapi imported", "true", "")...)
	want := indexRows(t, src)
	dst, _ := newStore(t)
	if _, err := dst.Import(ctx, strings.NewReader(exportString(t, src, "s"))); err != nil {
		t.Fatal(err)
	}
	hits, err := dst.SearchEvents(ctx, store.SearchQuery{Text: "okapi"})
	if err != nil || !reflect.DeepEqual(seqsOf(hits), []string{"s/4", "s/2"}) {
		t.Errorf("imported hits %v (%v)", seqsOf(hits), err)
	}
	if got := indexRows(t, dst); !reflect.DeepEqual(got, want) {
		t.Errorf("imported index:\n%v\nwant\n%v", got, want)
	}
}

// TestSearchBackfillInterleavesWithAppends: a pending session appended to
// before its backfill ends up indexed exactly once, like the others; a
// store closed mid-backfill leaves the rest pending for the next.
func TestSearchBackfillInterleavesWithAppends(t *testing.T) {
	ctx := context.Background()
	s, path := newStore(t)
	for i := range 40 {
		id := fmt.Sprint("p", i)
		mustCreate(t, s, id)
		mustAppend(t, s, id, searchLog(t, 0, "pending quagga", "quagga", "x", "y")...)
	}
	mustCreate(t, s, "late")
	mustAppend(t, s, "late", searchLog(t, 0, "late quagga", "quagga", "x", "y")...)
	want := indexRows(t, s)
	rawExec(t, s, `DELETE FROM search`)
	rawExec(t, s, `INSERT INTO search_pending (session_id) SELECT id FROM sessions`)
	s.Close()

	s2 := openAt(t, path)
	mustAppend(t, s2, "late", searchLog(t, 9, "more quagga", "quagga", "x", "y")...)
	if _, err := s2.Backfill(ctx); err != nil {
		t.Fatal(err)
	}
	got := indexRows(t, s2)
	s3, _ := newStore(t)
	for i := range 40 {
		id := fmt.Sprint("p", i)
		mustCreate(t, s3, id)
		mustAppend(t, s3, id, searchLog(t, 0, "pending quagga", "quagga", "x", "y")...)
	}
	mustCreate(t, s3, "late")
	mustAppend(t, s3, "late", searchLog(t, 0, "late quagga", "quagga", "x", "y")...)
	mustAppend(t, s3, "late", searchLog(t, 9, "more quagga", "quagga", "x", "y")...)
	if len(got) != len(indexRows(t, s3)) || len(got) <= len(want) {
		t.Errorf("%d rows after the backfill, want %d", len(got), len(indexRows(t, s3)))
	}
	hits, err := s2.SearchSessions(ctx, store.SearchQuery{Text: "quagga", Limit: 100})
	if err != nil || len(hits) != 41 {
		t.Errorf("%d sessions found (%v)", len(hits), err)
	}
}
