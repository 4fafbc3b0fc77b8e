// Package sessionquery answers questions about stored sessions on behalf
// of a caller: full-text search over sessions and events (through the
// store's [store.Search] seam), exact reads by seq, session lineage and
// the relations between events of one log.
//
// Every question is asked from a [Scope]: the sessions a caller may see.
// A session (the model's tools) sees the sessions of its own workspace
// (the same canonical directory as its header cwd) and its own lineage
// (ancestors, and descendants: subagent children and forks); a person at
// the CLI sees a directory's sessions or, with --all, every one. A
// session outside the scope is reported exactly like one that does not
// exist (SESSION_NOT_FOUND), so a scope never leaks another workspace's
// session ids.
package sessionquery

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/dsh-dev/dsh/internal/session"
	"github.com/dsh-dev/dsh/internal/store"
	"github.com/dsh-dev/dsh/internal/workspace"
)

// Stable error codes.
const (
	// CodeSessionNotFound: no such session in the caller's scope.
	CodeSessionNotFound = store.CodeSessionNotFound
	// CodeInvalidQuery: a search query without a word, or too long.
	CodeInvalidQuery = store.CodeSearchInvalidQuery
	// CodeSearchUnavailable: the store keeps no full-text index.
	CodeSearchUnavailable = "SESSION_SEARCH_UNAVAILABLE"
	// CodeEventNotFound: no event at that seq.
	CodeEventNotFound = "SESSION_EVENT_NOT_FOUND"
	// CodeInvalidArgument: a malformed request (a bad seq range…).
	CodeInvalidArgument = "INVALID_ARGUMENT"
)

// Error is a failure with a stable code.
type Error struct {
	Code    string
	Message string
	Err     error
}

// Error implements error.
func (e *Error) Error() string { return e.Message }

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

func errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// notFound is the answer for a session that does not exist and for one
// outside the scope alike.
func notFound(id string) *Error {
	return &Error{Code: CodeSessionNotFound, Message: fmt.Sprintf("no session %s in this workspace or lineage", id), Err: store.ErrNotFound}
}

// Service answers queries over a store.
type Service struct {
	st     store.Sessions
	search store.Search // nil: the store keeps no index
}

// New returns a service over st; search is enabled when st implements
// [store.Search].
func New(st store.Sessions) *Service {
	s := &Service{st: st}
	s.search, _ = st.(store.Search)
	return s
}

// Scope is the set of sessions a caller may see: the sessions whose
// header cwd is Dir (after canonicalisation) and the caller's lineage.
// [AllSessions] sees every session. Membership is decided when asked (a
// search hands the scope to the index as a filter and never lists it).
type Scope struct {
	// all sees every session.
	all bool
	// Caller is the calling session ("" for a person).
	Caller string
	// Dir is the canonical directory the scope covers ("" with all).
	Dir string
	// cwds are the header cwds (every spelling) of Dir when the scope
	// was made, and lineage the caller's lineage (itself included).
	cwds    []string
	lineage map[string]bool
	svc     *Service

	mu   sync.Mutex
	seen map[string]bool // guarded by mu: answers of Sees
}

// AllSessions is the scope of a person searching every session.
func AllSessions() *Scope { return &Scope{all: true} }

// Sees reports whether session id is in the scope; a session that
// cannot be read is not.
func (sc *Scope) Sees(ctx context.Context, id string) bool {
	if sc.all || sc.lineage[id] {
		return true
	}
	if sc.svc == nil {
		return false
	}
	sc.mu.Lock()
	ok, known := sc.seen[id]
	sc.mu.Unlock()
	if known {
		return ok
	}
	h, err := sc.svc.st.Header(ctx, id)
	ok = err == nil && (slices.Contains(sc.cwds, h.Cwd) || canonical(h.Cwd) == sc.Dir)
	if err == nil || errors.Is(err, store.ErrNotFound) {
		sc.mu.Lock()
		if sc.seen == nil {
			sc.seen = map[string]bool{}
		}
		sc.seen[id] = ok
		sc.mu.Unlock()
	}
	return ok
}

// storeScope is the scope as a store filter (nil: everything).
func (sc *Scope) storeScope() *store.SearchScope {
	if sc.all {
		return nil
	}
	f := &store.SearchScope{Cwds: sc.cwds}
	for id := range sc.lineage {
		f.Sessions = append(f.Sessions, id)
	}
	slices.Sort(f.Sessions)
	return f
}

// canonical is dir's canonical form (symlinks resolved), or the cleaned
// path when it no longer exists: a stored session may name a directory
// that was removed, and still belongs with its siblings.
func canonical(dir string) string {
	if c, err := workspace.Canonical(dir); err == nil {
		return c
	}
	return filepath.Clean(dir)
}

// DirScope is the scope of the sessions whose header cwd is dir (after
// canonicalisation), for a person's search in a directory.
func (s *Service) DirScope(ctx context.Context, dir string) (*Scope, error) {
	sc := &Scope{Dir: canonical(dir), svc: s, lineage: map[string]bool{}}
	if err := s.addDir(ctx, sc); err != nil {
		return nil, err
	}
	return sc, nil
}

// addDir finds the spellings of sc.Dir among the stored sessions' cwds.
func (s *Service) addDir(ctx context.Context, sc *Scope) error {
	if s.search == nil {
		return nil
	}
	cwds, err := s.search.Cwds(ctx)
	if err != nil {
		return err
	}
	for _, c := range cwds {
		if c != "" && (c == sc.Dir || canonical(c) == sc.Dir) {
			sc.cwds = append(sc.cwds, c)
		}
	}
	return nil
}

// maxLineage bounds the descendants a scope or trace walks.
const maxLineage = 10_000

// SessionScope is the scope of session caller: its workspace's sessions
// and its lineage.
func (s *Service) SessionScope(ctx context.Context, caller string) (*Scope, error) {
	h, err := s.st.Header(ctx, caller)
	if err != nil {
		return nil, fmt.Errorf("session scope: %w", err)
	}
	sc := &Scope{Caller: caller, Dir: canonical(h.Cwd), svc: s, lineage: map[string]bool{caller: true}}
	if err := s.addDir(ctx, sc); err != nil {
		return nil, fmt.Errorf("session scope: %w", err)
	}
	anc, err := s.ancestors(ctx, h)
	if err != nil {
		return nil, fmt.Errorf("session scope: %w", err)
	}
	for _, a := range anc {
		sc.lineage[a.ID] = true
	}
	desc, err := s.descendants(ctx, caller)
	if err != nil {
		return nil, fmt.Errorf("session scope: %w", err)
	}
	for _, d := range desc {
		sc.lineage[d.id] = true
	}
	return sc, nil
}

// ancestors returns h's parent chain, nearest first. A parent that is not
// stored ends the chain; a cycle (a damaged store) is cut.
func (s *Service) ancestors(ctx context.Context, h session.Header) ([]session.Header, error) {
	var out []session.Header
	seen := map[string]bool{h.ID: true}
	for p := h.ParentSession; p != "" && !seen[p]; {
		seen[p] = true
		ph, err := s.st.Header(ctx, p)
		if errors.Is(err, store.ErrNotFound) {
			break
		}
		if err != nil {
			return nil, err
		}
		out = append(out, ph)
		p = ph.ParentSession
	}
	return out, nil
}

// node is one descendant: its id, its parent and its depth below the
// root (1: a child).
type node struct {
	id, parent string
	depth      int
}

// descendants returns id's descendants in pre-order, at most maxLineage.
func (s *Service) descendants(ctx context.Context, id string) ([]node, error) {
	if s.search == nil {
		return nil, nil
	}
	var out []node
	seen := map[string]bool{id: true}
	var walk func(id string, depth int) error
	walk = func(id string, depth int) error {
		kids, err := s.search.Children(ctx, id)
		if err != nil {
			return err
		}
		for _, k := range kids {
			if seen[k] || len(out) >= maxLineage {
				continue
			}
			seen[k] = true
			out = append(out, node{id: k, parent: id, depth: depth})
			if err := walk(k, depth+1); err != nil {
				return err
			}
		}
		return nil
	}
	return out, walk(id, 1)
}

// resolve checks that id names a session in sc (a unique prefix of one
// is accepted) and returns its full id.
func (s *Service) resolve(ctx context.Context, sc *Scope, id string) (string, error) {
	if id == "" {
		return "", errorf(CodeInvalidArgument, "session_id is required")
	}
	if sc.all {
		return s.st.Resolve(ctx, id)
	}
	if sc.Sees(ctx, id) {
		return id, nil
	}
	// A prefix must be unique among the visible sessions: resolving it
	// against the whole store would tell an ambiguity with a hidden
	// session apart from no match.
	full := ""
	if len(id) >= 4 && s.search != nil {
		cands, err := s.search.SessionsIn(ctx, sc.cwds)
		if err != nil {
			return "", err
		}
		for v := range sc.lineage {
			cands = append(cands, v)
		}
		for _, v := range cands {
			if strings.HasPrefix(v, id) && v != full {
				if full != "" {
					return "", errorf(store.CodeSessionAmbiguous, "session id prefix %q matches several sessions; give more of it", id)
				}
				full = v
			}
		}
	}
	if full == "" || !sc.Sees(ctx, full) {
		return "", notFound(id)
	}
	return full, nil
}

// searchable returns the store's index or SESSION_SEARCH_UNAVAILABLE.
func (s *Service) searchable() (store.Search, error) {
	if s.search == nil {
		return nil, errorf(CodeSearchUnavailable, "this session store keeps no full-text index")
	}
	return s.search, nil
}

// classify turns a store's query error into the service's.
func classify(err error) error {
	var qe *store.QueryError
	if errors.As(err, &qe) {
		return &Error{Code: CodeInvalidQuery, Message: qe.Error(), Err: err}
	}
	return err
}

// SearchSessions returns the sessions in sc matching text, the most
// recent match first (limit 0: [store.DefaultSearchLimit]).
func (s *Service) SearchSessions(ctx context.Context, sc *Scope, text string, limit int) ([]store.SessionHit, error) {
	se, err := s.searchable()
	if err != nil {
		return nil, err
	}
	hits, err := se.SearchSessions(ctx, store.SearchQuery{Text: text, Scope: sc.storeScope(), Limit: limit})
	return hits, classify(err)
}

// Pending returns how many stored sessions the index does not cover
// yet (0 without an index, or when the count cannot be read).
func (s *Service) Pending(ctx context.Context) int64 {
	if s.search == nil {
		return 0
	}
	n, _ := s.search.IndexPending(ctx)
	return n
}

// EventQuery filters an event search; SessionID may be a unique prefix.
type EventQuery = store.SearchQuery

// SearchEvents returns the events in sc matching q, most recent first.
func (s *Service) SearchEvents(ctx context.Context, sc *Scope, q EventQuery) ([]store.EventHit, error) {
	se, err := s.searchable()
	if err != nil {
		return nil, err
	}
	if q.SessionID != "" {
		if q.SessionID, err = s.resolve(ctx, sc, q.SessionID); err != nil {
			return nil, err
		}
	}
	q.Scope = sc.storeScope()
	hits, err := se.SearchEvents(ctx, q)
	return hits, classify(err)
}
