package store

import (
	"context"
	"errors"
)

// Search is the full-text index seam of a store: a store that keeps a
// searchable index of its session logs implements it beside [Store]
// (callers type-assert), so another store can provide search or leave it
// out. The index holds the text of the events people and models look for
// (prompts, replies and reasoning, tool calls and results, titles,
// compaction summaries; see the implementation for the exact set and
// per-event bound), each row keyed by session id and seq.
type Search interface {
	// SearchSessions returns the sessions in scope whose indexed events
	// match q, each with its best (most recent) matching event, most
	// recent match first.
	SearchSessions(ctx context.Context, q SearchQuery) ([]SessionHit, error)
	// SearchEvents returns matching events in scope, most recent first.
	SearchEvents(ctx context.Context, q SearchQuery) ([]EventHit, error)
	// Reindex rebuilds the index of session id from its stored log, or of
	// every session when id is "", and returns how many sessions and
	// indexed events it wrote.
	Reindex(ctx context.Context, id string) (sessions, events int64, err error)
	// Children returns the ids of the sessions whose header names id as
	// their parent (subagent children and forks), in id order.
	Children(ctx context.Context, id string) ([]string, error)
	// SessionsIn returns the ids of the sessions whose header cwd is one
	// of cwds.
	SessionsIn(ctx context.Context, cwds []string) ([]string, error)
	// Cwds returns every distinct header cwd in the store.
	Cwds(ctx context.Context) ([]string, error)
	// IndexPending returns how many stored sessions the index does not
	// cover yet (sessions stored before the index existed, still being
	// indexed in the background).
	IndexPending(ctx context.Context) (int64, error)
}

// SearchQuery is one full-text query. Text is a user's query: the store
// quotes every term, so no input is a syntax error: words must all match,
// "a phrase" matches as written, word* is a prefix and OR between two
// terms matches either.
type SearchQuery struct {
	// Text is the query as typed.
	Text string
	// Scope, when not nil, keeps only the sessions it names (the
	// caller's authorised set); nil searches every session.
	Scope *SearchScope
	// SessionID keeps only events of this session.
	SessionID string
	// Types keeps only events of these types.
	Types []string
	// Since and Until bound the event time (Unix ms, inclusive; 0: open).
	Since, Until int64
	// SeqFrom and SeqTo bound the seq (inclusive; SeqTo nil: open).
	SeqFrom int64
	SeqTo   *int64
	// Limit is the most hits returned (0: [DefaultSearchLimit]).
	Limit int
}

// SearchScope names the sessions a query may find: those whose header
// cwd is one of Cwds (exact strings), and Sessions. The empty scope finds
// nothing.
type SearchScope struct {
	Cwds     []string
	Sessions []string
}

// Search bounds.
const (
	// DefaultSearchLimit is the hit count of a query without a limit.
	DefaultSearchLimit = 20
	// MaxSearchLimit caps any query's limit.
	MaxSearchLimit = 200
	// MaxSnippet is the longest snippet, in code points.
	MaxSnippet = 240
	// MaxQueryLen is the longest query text, in bytes.
	MaxQueryLen = 1000
)

// EventHit is one matching event.
type EventHit struct {
	SessionID string
	Seq       int64
	Type      string
	// Time is the event's append time, Unix ms.
	Time int64
	// Snippet is at most [MaxSnippet] code points of the event's indexed
	// text around the match; the matched terms are enclosed in
	// [SnippetOpen] and [SnippetClose].
	Snippet string
}

// SessionHit is one matching session with its most recent matching
// event.
type SessionHit struct {
	Entry Entry
	Hit   EventHit
}

// Markers around matched terms in a snippet: private-use code points,
// removed from indexed text, so they cannot occur in it otherwise.
const (
	SnippetOpen  = "\uE000"
	SnippetClose = "\uE001"
)

// CodeSearchInvalidQuery is the code of a query that has no searchable
// term or is too long.
const CodeSearchInvalidQuery = "SEARCH_INVALID_QUERY"

// ErrInvalidQuery reports a query with nothing to search for; see
// [QueryError].
var ErrInvalidQuery = errors.New("invalid search query")

// QueryError reports a query that cannot be searched. It wraps
// [ErrInvalidQuery].
type QueryError struct {
	Query  string
	Reason string
}

// Error implements error.
func (e *QueryError) Error() string { return "invalid search query: " + e.Reason }

// Code returns [CodeSearchInvalidQuery].
func (e *QueryError) Code() string { return CodeSearchInvalidQuery }

// Unwrap makes errors.Is(err, ErrInvalidQuery) hold.
func (e *QueryError) Unwrap() error { return ErrInvalidQuery }
