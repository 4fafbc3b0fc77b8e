package server

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/dsh-dev/dsh/internal/sessionquery"
	"github.com/dsh-dev/dsh/internal/store"
)

// searchResult is one session of GET /api/sessions/search: Snippet is
// the text around the match; Parts is the same text cut at the matched
// words.
type searchResult struct {
	sessionquery.SessionMatch
	Parts []snippetPart `json:"parts"`
}

// snippetPart is a run of a snippet, matched or not.
type snippetPart struct {
	Text  string `json:"text"`
	Match bool   `json:"match,omitempty"`
}

// defaultSearchLimit is the web sidebar's page: 20 sessions.
const defaultSearchLimit = store.DefaultSearchLimit

// searchSessions answers GET /api/sessions/search?q=…: the sessions
// matching q, the most recent match first, each with a snippet. cwd or
// workspace narrows the search to one directory; without either, every
// session is searched (the listing shows every session too).
func (s *Server) searchSessions(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	text := q.Get("q")
	limit := defaultSearchLimit
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > store.MaxSearchLimit {
			writeError(w, newError(CodeInvalidArgument, fmt.Sprintf("limit must be between 1 and %d", store.MaxSearchLimit)))
			return
		}
		limit = n
	}
	svc := sessionquery.New(s.host.App().Store)
	scope := sessionquery.AllSessions()
	dir := q.Get("cwd")
	if wsID := q.Get("workspace"); wsID != "" {
		ws, err := s.reg.Get(r.Context(), wsID)
		if err != nil {
			writeError(w, err)
			return
		}
		if dir != "" && dir != ws.Path {
			writeError(w, newError(CodeInvalidArgument, "cwd and workspace name different directories"))
			return
		}
		dir = ws.Path
	}
	if dir != "" {
		var err error
		if scope, err = svc.DirScope(r.Context(), dir); err != nil {
			writeError(w, err)
			return
		}
	}
	hits, err := svc.SearchSessions(r.Context(), scope, text, limit)
	if err != nil {
		writeError(w, err)
		return
	}
	out := make([]searchResult, 0, len(hits))
	for _, h := range hits {
		parts := splitSnippet(h.Hit.Snippet)
		var plain strings.Builder
		for _, p := range parts {
			plain.WriteString(p.Text)
		}
		out = append(out, searchResult{SessionMatch: sessionquery.MatchOf(h, plain.String()), Parts: parts})
	}
	resp := map[string]any{"query": text, "results": out}
	if n := svc.Pending(r.Context()); n > 0 {
		resp["pending"] = n
	}
	writeJSON(w, http.StatusOK, resp)
}

// splitSnippet cuts a store snippet at its match markers.
func splitSnippet(s string) []snippetPart {
	var parts []snippetPart
	match := false
	for s != "" {
		marker := store.SnippetOpen
		if match {
			marker = store.SnippetClose
		}
		i := strings.Index(s, marker)
		if i < 0 {
			i = len(s)
		}
		if i > 0 {
			parts = append(parts, snippetPart{Text: s[:i], Match: match})
		}
		s = s[min(len(s), i+len(marker)):]
		match = !match
	}
	if parts == nil {
		parts = []snippetPart{}
	}
	return parts
}
