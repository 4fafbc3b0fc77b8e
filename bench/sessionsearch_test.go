package bench

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dsh-dev/dsh/internal/llm"
	"github.com/dsh-dev/dsh/internal/session"
	"github.com/dsh-dev/dsh/internal/sessionquery"
	"github.com/dsh-dev/dsh/internal/store"
	"github.com/dsh-dev/dsh/internal/store/sqlite"
)

// Shape of the session search benchmark: 10,000 stored sessions in 20
// directories, each of searchTurns turns: a prompt, a reply with
// reasoning, searchCalls tool calls with their results, a final reply
// (9 indexed events per turn, about 9 KB of indexed text per session;
// the words drawn from a Zipf distribution over a 4,000-word vocabulary,
// so that common words are in most sessions and rare ones in a few).
const (
	searchSessions = 10_000
	searchDirCount = 20
	searchTurns    = 3
	searchCalls    = 3
	searchVocab    = 4000
)

// vocab is the benchmark's vocabulary, most frequent first: English and
// programming words, then synthetic ones for the long tail.
func vocab() []string {
	base := strings.Fields(`the to a of and in is it that for this file test go error function
		with return not be on as we can run fix use package value should if string from code build
		type check failed call add line pass config change need will new now struct make server
		parser list index query session store request response handler cache read write path
		tokenizer module import version update remove output input json http client timeout
		context cancel retry log event stream chunk message tool result bash grep glob edit
		database migration schema table column row sqlite transaction commit rollback lock
		benchmark latency memory goroutine channel mutex race panic nil pointer slice map
		interface method field struct constant variable loop branch merge rebase diff patch`)
	out := append([]string(nil), base...)
	for i := len(out); i < searchVocab; i++ {
		out = append(out, fmt.Sprintf("w%x", i*7919%99991))
	}
	return out
}

type textGen struct {
	r     *rand.Rand
	z     *rand.Zipf
	words []string
}

func newTextGen(seed uint64) *textGen {
	r := rand.New(rand.NewPCG(seed, 1))
	return &textGen{r: r, z: rand.NewZipf(r, 1.07, 2, searchVocab-1), words: vocab()}
}

// text returns about n bytes of words.
func (g *textGen) text(n int) string {
	var b strings.Builder
	for b.Len() < n {
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(g.words[g.z.Uint64()])
	}
	return b.String()
}

// searchSession is one session's log.
func searchSession(b *testing.B, g *textGen, start int64) []session.Event {
	var events []session.Event
	add := func(typ string, data any) *session.Event {
		raw, err := json.Marshal(data)
		if err != nil {
			b.Fatal(err)
		}
		n := int64(len(events))
		e := session.Event{Type: typ, Seq: n, Time: start + n*1000, Data: raw}
		if session.IsSurfaceType(typ) {
			e.SurfaceOp = session.Append
		}
		events = append(events, e)
		return &events[len(events)-1]
	}
	for turn := range searchTurns {
		add(session.TypeTurnStart, session.TurnStart{Turn: turn})
		add(session.TypeUserMessage, llm.Message{ID: fmt.Sprint("u", turn), Role: llm.RoleUser, Source: llm.Source{Kind: "user"},
			Content: []llm.Block{llm.TextBlock(g.text(160))}})
		add(session.TypeStepStart, session.StepRef{Turn: turn})
		chunk := add(session.TypeAssistantChunk, session.AssistantChunk{Turn: turn, Chunk: llm.Chunk{Type: llm.ChunkTextDelta, Text: "…"}})
		blocks := []llm.Block{{Type: llm.BlockReasoning, Text: g.text(300)}, llm.TextBlock(g.text(200))}
		var calls []session.ToolCall
		for c := range searchCalls {
			id := fmt.Sprintf("call-%d-%d", turn, c)
			args, _ := json.Marshal(map[string]string{"command": "go test ./" + g.text(40)})
			calls = append(calls, session.ToolCall{Turn: turn, CallID: id, Name: "bash", Arguments: string(args)})
			blocks = append(blocks, llm.Block{Type: llm.BlockToolCall, ID: id, Name: "bash", Arguments: string(args)})
		}
		am := add(session.TypeAssistantMsg, session.AssistantMessage{Turn: turn, Message: llm.Message{ID: fmt.Sprint("a", turn),
			Role: llm.RoleAssistant, Source: llm.Source{Kind: "model"}, Content: blocks}})
		am.SourceEventSeqs = []int64{chunk.Seq}
		for _, c := range calls {
			add(session.TypeToolCall, c)
		}
		for _, c := range calls {
			add(session.TypeToolResult, session.ToolResult{Turn: turn, CallID: c.CallID, Name: "bash",
				Content: []llm.Block{llm.TextBlock(g.text(700))}})
		}
		add(session.TypeStepEnd, session.StepRef{Turn: turn})
		add(session.TypeStepStart, session.StepRef{Turn: turn, Step: 1})
		chunk = add(session.TypeAssistantChunk, session.AssistantChunk{Turn: turn, Step: 1, Chunk: llm.Chunk{Type: llm.ChunkTextDelta, Text: "…"}})
		am = add(session.TypeAssistantMsg, session.AssistantMessage{Turn: turn, Step: 1, Message: llm.Message{ID: fmt.Sprint("f", turn),
			Role: llm.RoleAssistant, Source: llm.Source{Kind: "model"}, Content: []llm.Block{llm.TextBlock(g.text(250))}}})
		am.SourceEventSeqs = []int64{chunk.Seq}
		add(session.TypeStepEnd, session.StepRef{Turn: turn, Step: 1})
		add(session.TypeTurnEnd, session.TurnEnd{Turn: turn, Reason: session.TurnEndReason{Kind: session.EndCompleted}})
	}
	return events
}

func searchDir(i int) string { return fmt.Sprintf("/work/search-project-%02d", i%searchDirCount) }

// storeSearch stores the benchmark's sessions, one append per session
// (indexed in the append's transaction, as dsh does), and returns the
// time the appends took.
func storeSearch(b *testing.B, st *sqlite.Store) time.Duration {
	ctx := context.Background()
	g := newTextGen(42)
	var spent time.Duration
	for i := range searchSessions {
		id := fmt.Sprintf("019a%08d", i)
		start := int64(1_700_000_000_000 + i*60_000)
		if err := st.Create(ctx, session.Header{Version: session.FormatVersion, ID: id, CreatedAt: start, Cwd: searchDir(i)}); err != nil {
			b.Fatal(err)
		}
		events := searchSession(b, g, start)
		t0 := time.Now()
		if err := st.Append(ctx, id, events); err != nil {
			b.Fatal(err)
		}
		spent += time.Since(t0)
	}
	return spent
}

// BenchmarkSessionSearch10k searches 10,000 stored sessions: session
// search (what session_search, dsh sessions search and the web sidebar
// run) for a common, a mid-frequency and a rare word, two words, a
// phrase and a prefix, over every session, over one directory (dsh
// sessions search) and from one session (what its tools see: its
// directory and lineage), scope computation included; an event
// search in one session; and (logged) the time of the appends that built
// the store and of one full reindex.
func BenchmarkSessionSearch10k(b *testing.B) {
	ctx := context.Background()
	dbPath := filepath.Join(b.TempDir(), "dsh.db")
	st, err := sqlite.Open(ctx, dbPath)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	t0 := time.Now()
	appendTime := storeSearch(b, st)
	b.Logf("stored %d sessions in %v (appends with indexing: %v, %.0f µs per session)", searchSessions,
		time.Since(t0).Round(time.Millisecond), appendTime.Round(time.Millisecond), float64(appendTime.Microseconds())/searchSessions)
	words := vocab()
	svc := sessionquery.New(st)
	dir := searchDir(3)
	// A session's own scope: its directory and its lineage (itself).
	caller := "019a00000003"
	// fts is the same query as FTS5 sees it, to count its matches.
	queries := []struct{ name, q, fts string }{
		{"common", words[2], `text : "` + words[2] + `"`},
		{"mid", words[60], `text : "` + words[60] + `"`},
		{"rare", words[3000], `text : "` + words[3000] + `"`},
		{"absent", "nosuchwordanywhere", `text : "nosuchwordanywhere"`},
		{"two-words", words[30] + " " + words[90], `text : ("` + words[30] + `" "` + words[90] + `")`},
		{"phrase", `"` + words[0] + " " + words[1] + `"`, `text : "` + words[0] + " " + words[1] + `"`},
		{"prefix", words[70][:3] + "*", `text : "` + words[70][:3] + `"*`},
	}
	raw, err := sql.Open("sqlite", dbPath)
	if err != nil {
		b.Fatal(err)
	}
	defer raw.Close()
	for _, q := range queries {
		var n int
		if err := raw.QueryRow(`SELECT count(*) FROM search WHERE search MATCH ?`, q.fts).Scan(&n); err != nil {
			b.Fatal(err)
		}
		b.Logf("%s %s: %d matching events", q.name, q.q, n)
	}
	for _, scope := range []string{"all", "dir", "session"} {
		for _, q := range queries {
			b.Run(scope+"/"+q.name, func(b *testing.B) {
				for b.Loop() {
					sc := sessionquery.AllSessions()
					switch scope {
					case "dir":
						sc, err = svc.DirScope(ctx, dir)
					case "session":
						sc, err = svc.SessionScope(ctx, caller)
					}
					if err != nil {
						b.Fatal(err)
					}
					if _, err := svc.SearchSessions(ctx, sc, q.q, 0); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/1e6, "ms/query")
			})
		}
	}
	b.Run("events-one-session", func(b *testing.B) {
		sc := sessionquery.AllSessions()
		for b.Loop() {
			if _, err := svc.SearchEvents(ctx, sc, store.SearchQuery{Text: words[10], SessionID: "019a00000123", Limit: 50}); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/1e6, "ms/query")
	})
	// One full reindex, timed once: it takes seconds.
	t1 := time.Now()
	n, m, err := st.Reindex(ctx, "")
	if err != nil || n != searchSessions {
		b.Fatal(n, m, err)
	}
	b.Logf("reindexed %d sessions, %d events in %v", n, m, time.Since(t1).Round(time.Millisecond))

	// The upgrade of a version-7 store of these sessions: the migration
	// (which lists them as pending) and the backfill to its end.
	st.Close()
	for _, q := range []string{`DROP TABLE search`, `DROP TABLE search_pending`, `PRAGMA user_version = 7`} {
		if _, err := raw.Exec(q); err != nil {
			b.Fatal(q, err)
		}
	}
	raw.Close()
	t2 := time.Now()
	st2, err := sqlite.Open(ctx, dbPath)
	if err != nil {
		b.Fatal(err)
	}
	defer st2.Close()
	opened := time.Since(t2)
	if _, err := st2.Backfill(ctx); err != nil {
		b.Fatal(err)
	}
	if p, err := st2.IndexPending(ctx); err != nil || p != 0 {
		b.Fatal(p, err)
	}
	b.Logf("upgrade from version 7: open with the migration %v, backfill done %v later", opened.Round(time.Millisecond), time.Since(t2).Round(time.Millisecond))
}
