package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/dsh-dev/dsh/internal/sessionquery"
	"github.com/dsh-dev/dsh/internal/store"
)

// SearchedSession is one element of dsh sessions search --json: the
// snippet's matched words are between « and ».
type SearchedSession = sessionquery.SessionMatch

func sessionsSearch(ctx context.Context, args []string, stdio IO) int {
	fs := newFlags("sessions search", stdio)
	asJSON := fs.Bool("json", false, "print the matches as a JSON array")
	all := fs.Bool("all", false, "search the sessions of every directory")
	limit := fs.Int("limit", store.DefaultSearchLimit, "most sessions to show")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return ExitUsage
	}
	if len(pos) == 0 {
		fmt.Fprintln(stdio.Stderr, "dsh sessions search: a query is required")
		return ExitUsage
	}
	if *limit < 1 || *limit > store.MaxSearchLimit {
		fmt.Fprintf(stdio.Stderr, "dsh sessions search: --limit must be between 1 and %d\n", store.MaxSearchLimit)
		return ExitUsage
	}
	query := strings.Join(pos, " ")
	a, code := openReadOnly(ctx, stdio)
	if a == nil {
		return code
	}
	defer a.Close()
	svc := sessionquery.New(a.Store)
	cwd, _ := os.Getwd()
	cwd, _ = filepath.Abs(cwd)
	scope := sessionquery.AllSessions()
	if !*all {
		if scope, err = svc.DirScope(ctx, cwd); err != nil {
			return fail(stdio, err)
		}
	}
	hits, err := svc.SearchSessions(ctx, scope, query, *limit)
	if err != nil {
		return failSearch(stdio, err)
	}
	if n := svc.Pending(ctx); n > 0 {
		fmt.Fprintf(stdio.Stderr, "dsh: the search index is still being built: %d older session(s) are not searched yet\n", n)
	}
	ids := make([]string, len(hits))
	for i, h := range hits {
		ids[i] = h.Entry.Header.ID
	}
	short, err := shortIDsOf(ctx, a.Store, ids, minShortID)
	if err != nil {
		return fail(stdio, err)
	}
	out := make([]SearchedSession, 0, len(hits))
	for _, h := range hits {
		m := sessionquery.MatchOf(h, markSnippet(h.Hit.Snippet, "«", "»"))
		m.ShortID = short[m.ID]
		out = append(out, m)
	}
	if *asJSON {
		return writeJSON(stdio, out)
	}
	if len(out) == 0 {
		where := "in " + cwd
		if *all {
			where = "stored"
		}
		hint := ""
		if !*all {
			hint = "; --all searches every directory"
		}
		fmt.Fprintf(stdio.Stderr, "no session %s matches %q%s\n", where, query, hint)
		return ExitOK
	}
	open, closeM := "«", "»"
	if _, tty := termWidth(stdio.Stdout); tty {
		open, closeM = "\x1b[1m", "\x1b[22m"
	}
	home, _ := os.UserHomeDir()
	for i, s := range out {
		if i > 0 {
			fmt.Fprintln(stdio.Stdout)
		}
		title := s.Title
		if title == "" {
			title = "-"
		}
		fmt.Fprintf(stdio.Stdout, "%s  %s  %s  %s\n", s.ShortID, time.UnixMilli(s.UpdatedAt).Format("2006-01-02 15:04"), s.Status, title)
		if *all {
			fmt.Fprintf(stdio.Stdout, "    %s\n", tildePath(s.Cwd, home))
		}
		fmt.Fprintf(stdio.Stdout, "    seq %d %s: %s\n", s.Seq, s.Type, markSnippet(hits[i].Hit.Snippet, open, closeM))
	}
	return ExitOK
}

// markSnippet replaces the store's match markers (and drops any control
// character a logged text held, so a snippet cannot drive the terminal).
func markSnippet(s, open, closeM string) string {
	s = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return -1
		}
		return r
	}, s)
	return strings.NewReplacer(store.SnippetOpen, open, store.SnippetClose, closeM).Replace(s)
}

// failSearch reports a search failure; a query without a word is a usage
// error.
func failSearch(stdio IO, err error) int {
	var se *sessionquery.Error
	if errors.As(err, &se) {
		fmt.Fprintf(stdio.Stderr, "dsh: %s (%s)\n", se.Message, se.Code)
		if se.Code == sessionquery.CodeInvalidQuery {
			return ExitUsage
		}
		return ExitFailed
	}
	return fail(stdio, err)
}

func sessionsReindex(ctx context.Context, args []string, stdio IO) int {
	fs := newFlags("sessions reindex", stdio)
	one := fs.String("session", "", "rebuild the index of this session only")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return ExitUsage
	}
	if len(pos) != 0 {
		fmt.Fprintln(stdio.Stderr, "dsh sessions reindex: no arguments expected (use --session ID for one session)")
		return ExitUsage
	}
	a, code := openReadOnly(ctx, stdio)
	if a == nil {
		return code
	}
	defer a.Close()
	se, ok := a.Store.(store.Search)
	if !ok {
		fmt.Fprintf(stdio.Stderr, "dsh: this session store keeps no full-text index (%s)\n", sessionquery.CodeSearchUnavailable)
		return ExitFailed
	}
	id := ""
	if *one != "" {
		if id, err = a.Store.Resolve(ctx, *one); err != nil {
			return fail(stdio, err)
		}
	}
	start := time.Now()
	n, m, err := se.Reindex(ctx, id)
	if err != nil {
		return fail(stdio, err)
	}
	fmt.Fprintf(stdio.Stdout, "reindexed %d session(s), %d event(s) in %s\n", n, m, time.Since(start).Round(time.Millisecond))
	return ExitOK
}
