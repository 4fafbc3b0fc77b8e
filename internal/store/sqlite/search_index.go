package sqlite

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/dsh-dev/dsh/internal/llm"
	"github.com/dsh-dev/dsh/internal/session"
	"github.com/dsh-dev/dsh/internal/store"
)

// The full-text index of session logs (store.Search).
//
// One FTS5 row per indexed event, its rowid the event row's rowid, so a
// session's rows are found through the events index and rowid order is
// storage order (appends are stored in time order). Rows are written in
// the append's transaction or, when the append defers them, by the append
// or search that catches up (search_lag.go), so a search never disagrees
// with the stored log, and Reindex rebuilds them from the stored events with the same
// extraction (indexText). Only events people and models look for carry
// text: prompts (a user/message stored as an inbox reference is indexed
// with the queued text it references), replies and reasoning, tool calls
// (name and the string values of their arguments), tool results (text and
// error code), titles and compaction summaries. Streamed chunks are not
// indexed (their assistant/message carries the same text), nor are
// request headers (the same tool schemas in every session), context
// injected as user messages by plugins (instructions, reminders, runtime
// context: the same text in every session), or the calls and results of
// the session query tools themselves (their arguments are queries and
// their results quote other sessions: indexed, every search would find
// itself and echo what it found).

// schemaV8 creates the index, and search_pending, the sessions stored
// before it that the backfill (search_backfill.go) has yet to index. text is
// what is searched; scope holds two tokens naming the row's session and
// its directory (scopeText), so that a search limited to a caller's
// sessions is an AND of posting lists in FTS5 rather than a walk over
// every match of every session.
const schemaV8 = `
CREATE VIRTUAL TABLE IF NOT EXISTS search USING fts5(
	text,
	scope,
	session_id UNINDEXED,
	seq UNINDEXED,
	type UNINDEXED,
	time UNINDEXED,
	tokenize = 'unicode61 remove_diacritics 2'
);
CREATE TABLE IF NOT EXISTS search_pending (session_id TEXT PRIMARY KEY) WITHOUT ROWID;
`

// insertSearchSQL indexes one event, its rowid looked up on the events
// index.
const insertSearchSQL = `INSERT INTO search (rowid, text, scope, session_id, seq, type, time)
	SELECT rowid, ?, ?, session_id, seq, type, time FROM events WHERE session_id = ? AND seq = ?`

// Scope tokens: a hash of the directory or the session id (any bytes) as
// one lowercase hex token the tokenizer keeps whole, with a prefix that
// tells the two kinds apart. They are in their own column, which user
// queries never reach (ftsQuery limits them to text).
func dirToken(cwd string) string      { return "d" + shortHash(cwd) }
func sessionToken(id string) string   { return "s" + shortHash(id) }
func scopeText(id, cwd string) string { return dirToken(cwd) + " " + sessionToken(id) }

func shortHash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:12])
}

// Bounds of an event's indexed text: its first indexHead and last
// indexTail bytes. Tool results can be megabytes; their start (what ran)
// and end (how it ended, errors) are what a search looks for, and the
// bound keeps the index and the append's cost proportional to the number
// of events rather than their size.
const (
	indexHead = 6 << 10
	indexTail = 2 << 10
)

// indexedTypeList are the event types indexText reads, in a fixed order
// for queries; indexedTypes is the same as a set.
var indexedTypeList = []string{session.TypeUserMessage, session.TypeAssistantMsg, session.TypeToolCall,
	session.TypeToolResult, session.TypeTitle, session.TypeCompactionSummary}

var indexedTypes = func() map[string]bool {
	m := map[string]bool{}
	for _, t := range indexedTypeList {
		m[t] = true
	}
	return m
}()

// typeArgs are types as query arguments, and the placeholders for them.
func typeArgs(types ...string) ([]any, string) {
	args := make([]any, len(types))
	for i, t := range types {
		args[i] = t
	}
	return args, strings.TrimSuffix(strings.Repeat("?, ", len(types)), ", ")
}

// indexText returns the text to index for e ("" for none). splice
// returns the stored agent/inbox/spliced event at a seq, for a
// user/message stored as an inbox reference.
func indexText(e session.Event, splice func(seq int64) (session.Event, bool)) string {
	if !indexedTypes[e.Type] {
		return ""
	}
	var b strings.Builder
	switch e.Type {
	case session.TypeUserMessage:
		var m struct {
			llm.Message
			InboxRef *session.InboxRef `json:"inboxRef"`
		}
		if json.Unmarshal(e.Data, &m) != nil {
			return ""
		}
		if m.InboxRef != nil {
			m.Source, m.Content = inboxMessage(m.InboxRef, splice)
		}
		if m.Source.Kind == "plugin" {
			return ""
		}
		blockText(&b, m.Content)
	case session.TypeAssistantMsg:
		var p session.AssistantMessage
		if e.Decode(&p) != nil {
			return ""
		}
		blockText(&b, p.Message.Content)
	case session.TypeToolCall:
		var p session.ToolCall
		if e.Decode(&p) != nil || queryTools[p.Name] {
			return ""
		}
		b.WriteString(p.Name)
		b.WriteByte('\n')
		argText(&b, p.Arguments)
	case session.TypeToolResult:
		var p session.ToolResult
		if e.Decode(&p) != nil || queryTools[p.Name] {
			return ""
		}
		b.WriteString(p.Name)
		b.WriteByte('\n')
		if p.Error != nil {
			b.WriteString(p.Error.Code)
			b.WriteByte('\n')
		}
		blockText(&b, p.Content)
	case session.TypeTitle:
		t, _ := session.TitleOf(e)
		b.WriteString(t)
	case session.TypeCompactionSummary:
		var p struct {
			Summary []llm.Block `json:"summary"`
		}
		if e.Decode(&p) != nil {
			return ""
		}
		blockText(&b, p.Summary)
	}
	return boundText(strings.TrimSpace(b.String()))
}

// queryTools are the session query tools (internal/tools/sessionquery),
// whose calls and results are not indexed.
var queryTools = map[string]bool{
	"session_search": true, "session_event_search": true, "session_event_read": true,
	"session_trace": true, "session_event_trace": true,
}

// inboxMessage returns the source and content of the message ref names,
// from the splice that queued it.
func inboxMessage(ref *session.InboxRef, splice func(int64) (session.Event, bool)) (llm.Source, []llm.Block) {
	sp, ok := splice(ref.Seq)
	if !ok || sp.Type != session.TypeInboxSpliced {
		return llm.Source{}, nil
	}
	var p session.InboxSpliced
	if sp.Decode(&p) != nil || ref.Index < 0 || ref.Index >= len(p.Inserted) {
		return llm.Source{}, nil
	}
	m := p.Inserted[ref.Index]
	return m.Source, m.Content
}

// blockText writes the text and reasoning of blocks (tool results nest
// blocks), one per line; images and signatures are not text.
func blockText(b *strings.Builder, blocks []llm.Block) {
	for _, bl := range blocks {
		switch {
		case bl.Text != "":
			b.WriteString(bl.Text)
			b.WriteByte('\n')
		case len(bl.Content) > 0:
			blockText(b, bl.Content)
		}
	}
}

// argText writes the string values (and numbers) of a tool call's JSON
// arguments, one per line: the escaped form would glue "\n" to the next
// word. Arguments that are not JSON are written as they are.
func argText(b *strings.Builder, args string) {
	var v any
	if json.Unmarshal([]byte(args), &v) != nil {
		b.WriteString(args)
		return
	}
	var walk func(any)
	walk = func(v any) {
		switch v := v.(type) {
		case string:
			b.WriteString(v)
			b.WriteByte('\n')
		case float64:
			fmt.Fprintf(b, "%v\n", v)
		case []any:
			for _, x := range v {
				walk(x)
			}
		case map[string]any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	walk(v)
}

// boundText keeps the first indexHead and last indexTail bytes of s (on
// rune boundaries) and removes the snippet markers, which must not occur
// in indexed text.
func boundText(s string) string {
	if len(s) > indexHead+indexTail {
		h, t := indexHead, len(s)-indexTail
		for h > 0 && !utf8.RuneStart(s[h]) {
			h--
		}
		for t < len(s) && !utf8.RuneStart(s[t]) {
			t++
		}
		s = s[:h] + "\n…\n" + s[t:]
	}
	if strings.ContainsAny(s, store.SnippetOpen+store.SnippetClose) {
		s = strings.NewReplacer(store.SnippetOpen, "", store.SnippetClose, "").Replace(s)
	}
	return s
}

// indexBatch indexes the events of an append inside its transaction.
// A user/message stored as an inbox reference finds its splice in the
// batch or, when an earlier append stored it, in the events table.
func indexBatch(ctx context.Context, tx *sql.Tx, ins *sql.Stmt, id, cwd string, events []session.Event) error {
	first := events[0].Seq
	stored := storedSplice(ctx, tx, id)
	splice := func(seq int64) (session.Event, bool) {
		if seq >= first && seq < first+int64(len(events)) {
			return events[seq-first], true
		}
		return stored(seq)
	}
	return indexEvents(ctx, tx, ins, id, cwd, events, splice)
}

// storedSplice returns the stored event of session id at a seq, for
// indexText.
func storedSplice(ctx context.Context, tx *sql.Tx, id string) func(seq int64) (session.Event, bool) {
	return func(seq int64) (session.Event, bool) {
		var body []byte
		if err := tx.QueryRowContext(ctx, `SELECT CAST(body AS BLOB) FROM events WHERE session_id = ? AND seq = ?`, id, seq).Scan(&body); err != nil {
			return session.Event{}, false
		}
		e, err := decodeEvent(body)
		return e, err == nil
	}
}

// indexEvents writes the index rows of events (stored in this
// transaction or before it) with the insert statement ins.
func indexEvents(ctx context.Context, tx *sql.Tx, ins *sql.Stmt, id, cwd string, events []session.Event, splice func(int64) (session.Event, bool)) error {
	var st *sql.Stmt
	scope := scopeText(id, cwd)
	for _, e := range events {
		text := indexText(e, splice)
		if text == "" {
			continue
		}
		if st == nil {
			st = tx.StmtContext(ctx, ins)
		}
		if _, err := st.ExecContext(ctx, text, scope, id, e.Seq); err != nil {
			return fmt.Errorf("session %s: index seq %d: %w", id, e.Seq, err)
		}
	}
	return nil
}

// reindexTx rebuilds the index rows of session id ("" for every session)
// from the stored events, in one transaction. Unreadable events are
// skipped: a damaged session must not stop the others.
func reindexTx(ctx context.Context, tx *sql.Tx, id string) (sessions, events int64, err error) {
	// The splices too, for the user messages that reference them.
	args, in := typeArgs(append(slices.Clone(indexedTypeList), session.TypeInboxSpliced)...)
	q := `SELECT CAST(session_id AS TEXT), seq, CAST(type AS TEXT), CAST(body AS BLOB), rowid FROM events
		WHERE type IN (` + in + `)`
	if id == "" {
		if _, err := tx.ExecContext(ctx, `DELETE FROM search`); err != nil {
			return 0, 0, err
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM search_pending`); err != nil {
			return 0, 0, err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE sessions SET search_from = NULL WHERE search_from IS NOT NULL`); err != nil {
			return 0, 0, err
		}
		q += ` ORDER BY rowid`
	} else {
		if _, err := tx.ExecContext(ctx, `DELETE FROM search WHERE rowid IN (SELECT rowid FROM events WHERE session_id = ?)`, id); err != nil {
			return 0, 0, err
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM search_pending WHERE session_id = ?`, id); err != nil {
			return 0, 0, err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE sessions SET search_from = NULL WHERE id = ?`, id); err != nil {
			return 0, 0, err
		}
		q += ` AND session_id = ? ORDER BY seq`
		args = append(args, id)
	}
	cwds, err := sessionCwds(ctx, tx, id)
	if err != nil {
		return 0, 0, err
	}
	rows, err := tx.QueryContext(ctx, q, args...)
	if err != nil {
		return 0, 0, err
	}
	defer rows.Close()
	ins, err := tx.PrepareContext(ctx, `INSERT INTO search (rowid, text, scope, session_id, seq, type, time) VALUES (?, ?, ?, ?, ?, ?, ?)`)
	if err != nil {
		return 0, 0, err
	}
	defer ins.Close()
	// The splices of the session being read, for inbox references (a
	// reference always points back into its own session).
	splices := map[string]map[int64]session.Event{}
	seen := map[string]bool{}
	for rows.Next() {
		var (
			sid, typ string
			seq, rid int64
			body     []byte
		)
		if err := rows.Scan(&sid, &seq, &typ, &body, &rid); err != nil {
			return 0, 0, err
		}
		if !seen[sid] {
			seen[sid] = true
			sessions++
		}
		e, err := decodeEvent(body)
		if err != nil || e.Type != typ {
			continue
		}
		if typ == session.TypeInboxSpliced {
			if splices[sid] == nil {
				splices[sid] = map[int64]session.Event{}
			}
			splices[sid][seq] = e
			continue
		}
		text := indexText(e, func(s int64) (session.Event, bool) { sp, ok := splices[sid][s]; return sp, ok })
		if text == "" {
			continue
		}
		if _, err := ins.ExecContext(ctx, rid, text, scopeText(sid, cwds[sid]), sid, seq, typ, e.Time); err != nil {
			return 0, 0, fmt.Errorf("session %s: index seq %d: %w", sid, seq, err)
		}
		events++
	}
	return sessions, events, rows.Err()
}

// sessionCwds maps session ids to their header cwd: every session's, or
// id's alone.
func sessionCwds(ctx context.Context, tx *sql.Tx, id string) (map[string]string, error) {
	q, args := `SELECT CAST(id AS TEXT), CAST(cwd AS TEXT) FROM sessions`, []any{}
	if id != "" {
		q, args = q+` WHERE id = ?`, append(args, id)
	}
	rows, err := tx.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var sid, cwd string
		if err := rows.Scan(&sid, &cwd); err != nil {
			return nil, err
		}
		out[sid] = cwd
	}
	return out, rows.Err()
}

// Reindex rebuilds the index of session id (every session when id is
// "") from the stored logs in one write transaction. An unknown id fails
// with [ErrNotFound].
func (s *Store) Reindex(ctx context.Context, id string) (sessions, events int64, err error) {
	err = s.inTx(ctx, func(tx *sql.Tx) error {
		if id != "" {
			var one int
			if err := tx.QueryRowContext(ctx, `SELECT 1 FROM sessions WHERE id = ?`, id).Scan(&one); errors.Is(err, sql.ErrNoRows) {
				return fmt.Errorf("session %s: %w", id, ErrNotFound)
			} else if err != nil {
				return err
			}
		}
		var err error
		sessions, events, err = reindexTx(ctx, tx, id)
		if id != "" {
			sessions = 1
		}
		return err
	})
	if err != nil {
		return 0, 0, fmt.Errorf("reindex: %w", err)
	}
	return sessions, events, nil
}
