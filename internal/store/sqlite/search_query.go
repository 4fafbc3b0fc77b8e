package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/dsh-dev/dsh/internal/store"
)

// Interface check: the store provides the search seam.
var (
	_ store.Search       = (*Store)(nil)
	_ store.CreateLeaser = (*Store)(nil)
)

// ftsQuery turns a user's query into an FTS5 expression that cannot be a
// syntax error: every word and every "quoted phrase" becomes a quoted
// FTS5 string (all must match), a word ending in * a prefix, and OR
// between two terms stays an OR. Terms without a letter or digit are
// dropped (the tokenizer would drop them too); a query left with none is
// a *store.QueryError.
func ftsQuery(text string) (string, error) {
	if len(text) > store.MaxQueryLen {
		return "", &store.QueryError{Query: text, Reason: fmt.Sprintf("the query is longer than %d bytes", store.MaxQueryLen)}
	}
	type item struct {
		term   string
		prefix bool
		or     bool
	}
	var items []item
	add := func(term string, phrase bool) {
		if !phrase && term == "OR" {
			items = append(items, item{or: true})
			return
		}
		prefix := false
		if !phrase && strings.HasSuffix(term, "*") {
			term, prefix = strings.TrimRight(term, "*"), true
		}
		if strings.IndexFunc(term, func(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }) < 0 {
			return
		}
		items = append(items, item{term: term, prefix: prefix})
	}
	rest := strings.ToValidUTF8(text, " ")
	for rest != "" {
		rest = strings.TrimLeftFunc(rest, unicode.IsSpace)
		switch {
		case rest == "":
		case rest[0] == '"':
			end := strings.IndexByte(rest[1:], '"')
			if end < 0 {
				end = len(rest) - 1 // an unclosed quote runs to the end
			}
			add(rest[1:1+end], true)
			rest = rest[min(len(rest), end+2):]
		default:
			end := strings.IndexFunc(rest, func(r rune) bool { return unicode.IsSpace(r) || r == '"' })
			if end < 0 {
				end = len(rest)
			}
			add(rest[:end], false)
			rest = rest[end:]
		}
	}
	var b strings.Builder
	for i, it := range items {
		if it.or {
			// An OR needs a term on both sides.
			if b.Len() > 0 && i+1 < len(items) && !items[i+1].or {
				b.WriteString(" OR")
			}
			continue
		}
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(`"` + strings.ReplaceAll(it.term, `"`, `""`) + `"`)
		if it.prefix {
			b.WriteByte('*')
		}
	}
	if b.Len() == 0 {
		return "", &store.QueryError{Query: text, Reason: "the query has no word to search for"}
	}
	return b.String(), nil
}

// snippetTokens is how many tokens an FTS5 snippet spans; the result is
// then cut to store.MaxSnippet code points.
const snippetTokens = 24

// match is one row of a query's first pass.
type match struct {
	rowid int64
	sid   string
}

// SearchEvents returns the matching events in q's scope, most recent
// (last stored) first.
func (s *Store) SearchEvents(ctx context.Context, q store.SearchQuery) ([]store.EventHit, error) {
	var hits []store.EventHit
	err := s.search(ctx, q, false, func(tx *sql.Tx, expr string, ms []match) error {
		var err error
		hits, err = snippets(ctx, tx, expr, ms)
		return err
	})
	return hits, err
}

// SearchSessions returns the sessions in q's scope with a matching event,
// the session whose latest match is the most recent first, each with
// that match.
func (s *Store) SearchSessions(ctx context.Context, q store.SearchQuery) ([]store.SessionHit, error) {
	var hits []store.EventHit
	err := s.search(ctx, q, true, func(tx *sql.Tx, expr string, ms []match) error {
		var err error
		hits, err = snippets(ctx, tx, expr, ms)
		return err
	})
	if err != nil || len(hits) == 0 {
		return nil, err
	}
	ids := make([]string, len(hits))
	for i, h := range hits {
		ids[i] = h.SessionID
	}
	entries, err := s.List(ctx, ListFilter{IDs: ids})
	if err != nil {
		return nil, fmt.Errorf("search sessions: %w", err)
	}
	byID := make(map[string]Entry, len(entries))
	for _, e := range entries {
		byID[e.Header.ID] = e
	}
	out := make([]store.SessionHit, 0, len(hits))
	for _, h := range hits {
		if e, ok := byID[h.SessionID]; ok {
			out = append(out, store.SessionHit{Entry: e, Hit: h})
		}
	}
	return out, nil
}

// search runs q's first pass in a read snapshot: the matching rowids in
// descending order, filtered in SQL by q's event filters and here by its
// scope, stopping at the limit (of sessions when perSession, keeping each
// one's first match); then done reads what the caller needs of them in
// the same snapshot. Descending rowid order lets a common word stop after
// the first few hundred matches instead of ranking all of them.
func (s *Store) search(ctx context.Context, q store.SearchQuery, perSession bool, done func(*sql.Tx, string, []match) error) error {
	expr, err := ftsQuery(q.Text)
	if err != nil {
		return err
	}
	// User terms search the text column only; the scope column narrows
	// the rows in the same match.
	expr = "text : (" + expr + ")"
	// A search that cannot catch up (another process holds the write
	// lock past the busy timeout, a read-only file) still answers from
	// the index: it lacks at most the last searchLagMax events of the
	// sessions that lag.
	_ = s.catchUpSearch(ctx)
	limit := q.Limit
	if limit <= 0 {
		limit = store.DefaultSearchLimit
	}
	limit = min(limit, store.MaxSearchLimit)
	var inScope map[string]bool // a scope too large for the match, checked here
	if q.SessionID != "" {
		expr += ` AND scope : "` + sessionToken(q.SessionID) + `"`
	}
	if sc := q.Scope; sc != nil {
		tokens := make([]string, 0, len(sc.Cwds)+len(sc.Sessions))
		for _, c := range sc.Cwds {
			tokens = append(tokens, `"`+dirToken(c)+`"`)
		}
		for _, id := range sc.Sessions {
			tokens = append(tokens, `"`+sessionToken(id)+`"`)
		}
		switch {
		case len(tokens) == 0:
			return nil
		case len(tokens) <= maxScopeTokens:
			expr += " AND scope : (" + strings.Join(tokens, " OR ") + ")"
		default:
			if inScope, err = s.scopeSet(ctx, sc); err != nil {
				return err
			}
		}
	}
	sqlq := `SELECT rowid, CAST(session_id AS TEXT) FROM search WHERE search MATCH ?`
	args := []any{expr}
	if q.SessionID != "" {
		sqlq += ` AND session_id = ?`
		args = append(args, q.SessionID)
	}
	if len(q.Types) > 0 {
		sqlq += ` AND type IN (?` + strings.Repeat(`, ?`, len(q.Types)-1) + `)`
		for _, t := range q.Types {
			args = append(args, t)
		}
	}
	if q.Since > 0 {
		sqlq += ` AND time >= ?`
		args = append(args, q.Since)
	}
	if q.Until > 0 {
		sqlq += ` AND time <= ?`
		args = append(args, q.Until)
	}
	if q.SeqFrom > 0 {
		sqlq += ` AND seq >= ?`
		args = append(args, q.SeqFrom)
	}
	if q.SeqTo != nil {
		sqlq += ` AND seq <= ?`
		args = append(args, *q.SeqTo)
	}
	sqlq += ` ORDER BY rowid DESC`

	tx, err := s.r.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return fmt.Errorf("search: %w", err)
	}
	defer tx.Rollback()
	rows, err := tx.QueryContext(ctx, sqlq, args...)
	if err != nil {
		return searchErr(q.Text, err)
	}
	var (
		ms   []match
		seen = map[string]bool{}
	)
	for len(ms) < limit && rows.Next() {
		var m match
		if err := rows.Scan(&m.rowid, &m.sid); err != nil {
			rows.Close()
			return fmt.Errorf("search: %w", err)
		}
		if inScope != nil && !inScope[m.sid] {
			continue
		}
		if perSession {
			if seen[m.sid] {
				continue
			}
			seen[m.sid] = true
		}
		ms = append(ms, m)
	}
	if err := rows.Err(); err != nil {
		rows.Close()
		return searchErr(q.Text, err)
	}
	rows.Close()
	if len(ms) == 0 {
		return nil
	}
	return done(tx, expr, ms)
}

// maxScopeTokens is the largest scope put into the match expression (a
// directory or two and a lineage of sessions); a larger one (a lineage
// of hundreds) is checked row by row.
const maxScopeTokens = 64

// scopeSet lists the sessions of sc.
func (s *Store) scopeSet(ctx context.Context, sc *store.SearchScope) (map[string]bool, error) {
	ids, err := s.SessionsIn(ctx, sc.Cwds)
	if err != nil {
		return nil, err
	}
	set := make(map[string]bool, len(ids)+len(sc.Sessions))
	for _, id := range ids {
		set[id] = true
	}
	for _, id := range sc.Sessions {
		set[id] = true
	}
	return set, nil
}

// searchErr classifies a query failure: an FTS5 syntax error (which
// ftsQuery should make impossible) is still the user's invalid query.
func searchErr(text string, err error) error {
	if strings.Contains(err.Error(), "fts5:") {
		return &store.QueryError{Query: text, Reason: err.Error()}
	}
	return fmt.Errorf("search: %w", err)
}

// snippets reads the hits of ms, in ms's order, with their snippets.
func snippets(ctx context.Context, tx *sql.Tx, expr string, ms []match) ([]store.EventHit, error) {
	args := []any{expr}
	for _, m := range ms {
		args = append(args, m.rowid)
	}
	rows, err := tx.QueryContext(ctx, fmt.Sprintf(`SELECT rowid, CAST(session_id AS TEXT), seq, CAST(type AS TEXT), time,
		snippet(search, 0, char(57344), char(57345), '…', %d)
		FROM search WHERE search MATCH ? AND rowid IN (?%s)`, snippetTokens, strings.Repeat(", ?", len(ms)-1)), args...)
	if err != nil {
		return nil, fmt.Errorf("search: %w", err)
	}
	defer rows.Close()
	byRow := make(map[int64]store.EventHit, len(ms))
	for rows.Next() {
		var (
			rid int64
			h   store.EventHit
		)
		if err := rows.Scan(&rid, &h.SessionID, &h.Seq, &h.Type, &h.Time, &h.Snippet); err != nil {
			return nil, fmt.Errorf("search: %w", err)
		}
		h.Snippet = cutSnippet(h.Snippet)
		byRow[rid] = h
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("search: %w", err)
	}
	out := make([]store.EventHit, 0, len(ms))
	for _, m := range ms {
		if h, ok := byRow[m.rowid]; ok {
			out = append(out, h)
		}
	}
	return out, nil
}

// cutSnippet collapses whitespace runs to one space and cuts the snippet
// to store.MaxSnippet code points (markers included): a window that
// starts a little before the first match, with "…" where it cut, and a
// match marker the cut left open closed.
func cutSnippet(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if utf8.RuneCountInString(s) <= store.MaxSnippet {
		return s
	}
	rs := []rune(s)
	open, closeR := []rune(store.SnippetOpen)[0], []rune(store.SnippetClose)[0]
	start := 0
	for i, r := range rs {
		if r == open {
			start = max(0, i-store.MaxSnippet/3)
			break
		}
	}
	var (
		b      strings.Builder
		n      int
		inside bool
	)
	if start > 0 {
		b.WriteString("…")
		n++
	}
	// Room for a closing marker and a final "…".
	for _, r := range rs[start:] {
		if n >= store.MaxSnippet-2 {
			break
		}
		switch r {
		case open:
			inside = true
		case closeR:
			inside = false
		}
		b.WriteRune(r)
		n++
	}
	if inside {
		b.WriteString(store.SnippetClose)
	}
	b.WriteString("…")
	return b.String()
}

// Children returns the ids of the sessions whose parent is id, in id
// order.
func (s *Store) Children(ctx context.Context, id string) ([]string, error) {
	return s.ids(ctx, `SELECT CAST(id AS TEXT) FROM sessions WHERE parent = ? ORDER BY id`, id)
}

// SessionsIn returns the ids of the sessions whose header cwd is one of
// cwds.
func (s *Store) SessionsIn(ctx context.Context, cwds []string) ([]string, error) {
	if len(cwds) == 0 {
		return nil, nil
	}
	args := make([]any, len(cwds))
	for i, c := range cwds {
		args[i] = c
	}
	return s.ids(ctx, `SELECT CAST(id AS TEXT) FROM sessions WHERE cwd IN (?`+strings.Repeat(", ?", len(cwds)-1)+`)`, args...)
}

// Cwds returns every distinct header cwd.
func (s *Store) Cwds(ctx context.Context) ([]string, error) {
	return s.ids(ctx, `SELECT DISTINCT CAST(cwd AS TEXT) FROM sessions`)
}

func (s *Store) ids(ctx context.Context, q string, args ...any) ([]string, error) {
	rows, err := s.r.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("sessions: %w", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("sessions: %w", err)
		}
		out = append(out, id)
	}
	return out, rows.Err()
}
