package tui

import (
	"context"
	"net/url"
	"strings"

	tea "charm.land/bubbletea/v2"

	"github.com/dsh-dev/dsh/internal/host"
	"github.com/dsh-dev/dsh/internal/sessionquery"
	"github.com/dsh-dev/dsh/internal/store"
)

// SearchHit is a session the full-text search found, with the text
// around its most recent match.
type SearchHit struct {
	Info host.Info
	// Snippet is plain text, the matched words between « and ».
	Snippet string
}

// Searcher is the optional side of a [Backend] that searches stored
// sessions by full text (dsh sessions search); the session picker uses
// it when the backend has it, beside its filter on titles and ids.
type Searcher interface {
	// Search returns the sessions of cwd ("" for every directory) that
	// match query, the most recent match first.
	Search(ctx context.Context, cwd, query string) ([]SearchHit, error)
}

// pickerSearchLimit is how many full-text hits the picker shows.
const pickerSearchLimit = 20

func (b *hostBackend) Search(ctx context.Context, cwd, query string) ([]SearchHit, error) {
	svc := sessionquery.New(b.h.App().Store)
	scope := sessionquery.AllSessions()
	if cwd != "" {
		var err error
		if scope, err = svc.DirScope(ctx, cwd); err != nil {
			return nil, err
		}
	}
	hits, err := svc.SearchSessions(ctx, scope, query, pickerSearchLimit)
	if err != nil {
		return nil, err
	}
	out := make([]SearchHit, 0, len(hits))
	for _, h := range hits {
		e := h.Entry
		out = append(out, SearchHit{
			Info:    host.Info{Header: e.Header, Title: e.Title, UpdatedAt: e.UpdatedAt, Status: host.Status(e.Status)},
			Snippet: strings.NewReplacer(store.SnippetOpen, "«", store.SnippetClose, "»").Replace(h.Hit.Snippet),
		})
	}
	return out, nil
}

func (b *attachBackend) Search(ctx context.Context, cwd, query string) ([]SearchHit, error) {
	q := url.Values{"q": {query}, "limit": {"20"}}
	if cwd != "" {
		q.Set("cwd", cwd)
	}
	var out struct {
		Results []struct {
			ID        string `json:"id"`
			Title     string `json:"title"`
			Cwd       string `json:"cwd"`
			Parent    string `json:"parentSession"`
			Status    string `json:"status"`
			UpdatedAt int64  `json:"updatedAt"`
			Parts     []struct {
				Text  string `json:"text"`
				Match bool   `json:"match"`
			} `json:"parts"`
		} `json:"results"`
	}
	if err := b.call(ctx, "GET", "/api/sessions/search", q, nil, &out); err != nil {
		return nil, err
	}
	hits := make([]SearchHit, 0, len(out.Results))
	for _, r := range out.Results {
		var s strings.Builder
		for _, p := range r.Parts {
			if p.Match {
				s.WriteString("«" + p.Text + "»")
			} else {
				s.WriteString(p.Text)
			}
		}
		h := SearchHit{Info: host.Info{Title: r.Title, UpdatedAt: r.UpdatedAt, Status: host.Status(r.Status)}, Snippet: s.String()}
		h.Info.Header.ID, h.Info.Header.Cwd, h.Info.Header.ParentSession = r.ID, r.Cwd, r.Parent
		hits = append(hits, h)
	}
	return hits, nil
}

// searchMsg carries the full-text hits of one picker query.
type searchMsg struct {
	query string
	all   bool
	hits  []SearchHit
}

// searchSessions searches for the picker's query when the backend can;
// a failed search (a query without a word, an old server) shows no hits.
func (m *model) searchSessions() tea.Cmd {
	o := m.overlay
	s, ok := m.b.(Searcher)
	if !ok || o == nil || o.kind != ovSessions || strings.TrimSpace(o.query) == "" {
		return nil
	}
	ctx, query, all, cwd := m.ctx, o.query, o.all, m.o.Cwd
	if all {
		cwd = ""
	}
	return func() tea.Msg {
		hits, _ := s.Search(ctx, cwd, query)
		return searchMsg{query: query, all: all, hits: topLevel(hits)}
	}
}

// topLevel drops the hits in subagent children and forks: the picker
// lists top-level sessions, as "dsh sessions list" does.
func topLevel(hits []SearchHit) []SearchHit {
	out := hits[:0:0]
	for _, h := range hits {
		if h.Info.Header.ParentSession == "" {
			out = append(out, h)
		}
	}
	return out
}

// onSearch keeps hits that answer the picker's current query.
func (m *model) onSearch(msg searchMsg) {
	o := m.overlay
	if o == nil || o.kind != ovSessions || o.query != msg.query || o.all != msg.all {
		return
	}
	o.hits = msg.hits
}
