package sessionquery

import "github.com/dsh-dev/dsh/internal/store"

// SessionMatch is one session a full-text search found, with its latest
// matching event: an element of `dsh sessions search --json` and of
// GET /api/sessions/search's results, which report the same fields.
type SessionMatch struct {
	ID string `json:"id"`
	// ShortID is the shortest unambiguous prefix of ID, set by the
	// surfaces that show one (the CLI).
	ShortID   string `json:"shortId,omitempty"`
	Title     string `json:"title"`
	Cwd       string `json:"cwd"`
	Parent    string `json:"parentSession,omitempty"`
	Status    string `json:"status"`
	UpdatedAt int64  `json:"updatedAt"`
	// Seq, Type and Time are the session's latest matching event.
	Seq  int64  `json:"seq"`
	Type string `json:"type"`
	Time int64  `json:"time"`
	// Snippet is at most 240 code points around the match, rendered by
	// the surface (the store marks matched words with
	// [store.SnippetOpen] and [store.SnippetClose]).
	Snippet string `json:"snippet"`
}

// MatchOf is the SessionMatch of h with snippet as its Snippet.
func MatchOf(h store.SessionHit, snippet string) SessionMatch {
	e := h.Entry
	return SessionMatch{ID: e.Header.ID, Title: e.Title, Cwd: e.Header.Cwd, Parent: e.Header.ParentSession,
		Status: e.Status, UpdatedAt: e.UpdatedAt, Seq: h.Hit.Seq, Type: h.Hit.Type, Time: h.Hit.Time, Snippet: snippet}
}
