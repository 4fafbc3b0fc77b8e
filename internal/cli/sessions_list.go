package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/dsh-dev/dsh/internal/session"
	"github.com/dsh-dev/dsh/internal/store"
)

// ListedSession is one element of dsh sessions list --json: the header's
// fields, then what the table shows.
type ListedSession struct {
	session.Header
	// ShortID is the shortest prefix of ID (at least minShortID
	// characters) that no other stored session shares; every command
	// taking an id accepts it.
	ShortID   string `json:"shortId"`
	Title     string `json:"title"`
	UpdatedAt int64  `json:"updatedAt"`
	Turns     int64  `json:"turns"`
	Events    int64  `json:"events"`
	Status    string `json:"status"`
}

// listedExtra is ListedSession without the header.
type listedExtra struct {
	ShortID   string `json:"shortId"`
	Title     string `json:"title"`
	UpdatedAt int64  `json:"updatedAt"`
	Turns     int64  `json:"turns"`
	Events    int64  `json:"events"`
	Status    string `json:"status"`
}

// MarshalJSON writes the header's fields (through session.Header's own
// encoding, which an embedded field would otherwise make the whole
// encoding), then the listing's.
func (l ListedSession) MarshalJSON() ([]byte, error) {
	hb, err := json.Marshal(l.Header)
	if err != nil {
		return nil, err
	}
	xb, err := json.Marshal(listedExtra{l.ShortID, l.Title, l.UpdatedAt, l.Turns, l.Events, l.Status})
	if err != nil {
		return nil, err
	}
	return append(append(hb[:len(hb)-1], ','), xb[1:]...), nil
}

// UnmarshalJSON reads what MarshalJSON writes.
func (l *ListedSession) UnmarshalJSON(b []byte) error {
	var x listedExtra
	if err := json.Unmarshal(b, &x); err != nil {
		return err
	}
	if err := json.Unmarshal(b, &l.Header); err != nil {
		return err
	}
	l.ShortID, l.Title, l.UpdatedAt, l.Turns, l.Events, l.Status = x.ShortID, x.Title, x.UpdatedAt, x.Turns, x.Events, x.Status
	return nil
}

// minShortID is the shortest id prefix the table prints: the first 8
// characters of a UUIDv7 change about once a minute.
const minShortID = 8

func sessionsList(ctx context.Context, args []string, stdio IO) int {
	fs := newFlags("sessions list", stdio)
	asJSON := fs.Bool("json", false, "print the sessions as a JSON array")
	all := fs.Bool("all", false, "list sessions of every directory")
	if _, err := parseInterspersed(fs, args); err != nil {
		return ExitUsage
	}
	a, code := openReadOnly(ctx, stdio)
	if a == nil {
		return code
	}
	defer a.Close()
	cwd, _ := os.Getwd()
	cwd, _ = filepath.Abs(cwd)
	filter := store.ListFilter{Cwd: cwd}
	if *all {
		filter = store.ListFilter{}
	}
	// The store filters by directory on an index, so listing one
	// directory stays fast however many sessions are stored.
	entries, err := a.Store.List(ctx, filter)
	if err != nil {
		return fail(stdio, err)
	}
	ids := make([]string, len(entries))
	for i, e := range entries {
		ids[i] = e.Header.ID
	}
	var short map[string]string
	if *all {
		short = shortIDs(ids, minShortID)
	} else if short, err = shortIDsOf(ctx, a.Store, ids, minShortID); err != nil {
		return fail(stdio, err)
	}
	listed := make([]ListedSession, 0, len(entries))
	for _, e := range entries {
		if e.Err != nil {
			fmt.Fprintf(stdio.Stderr, "dsh: session %s is unreadable: %v\n", e.Header.ID, e.Err)
			continue
		}
		listed = append(listed, ListedSession{Header: e.Header, ShortID: short[e.Header.ID], Title: e.Title,
			UpdatedAt: e.UpdatedAt, Turns: e.Turns, Events: e.Events, Status: e.Status})
	}
	if *asJSON {
		if err := writeListedJSON(stdio.Stdout, listed); err != nil {
			return fail(stdio, err)
		}
		return ExitOK
	}
	if len(listed) == 0 {
		where := "in " + cwd
		if *all {
			where = "stored"
		}
		hint := ""
		if !*all {
			hint = "; dsh sessions list --all shows every directory's"
		}
		fmt.Fprintf(stdio.Stderr, "no sessions %s%s\n", where, hint)
		return ExitOK
	}
	home, _ := os.UserHomeDir()
	// tabwriter writes cell by cell; unbuffered, a long listing is a
	// system call per cell.
	bw := bufio.NewWriterSize(stdio.Stdout, 64<<10)
	tw := tabwriter.NewWriter(bw, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tUPDATED\tTURNS\tSTATUS\tDIRECTORY\tTITLE")
	for _, l := range listed {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\n", l.ShortID, time.UnixMilli(l.UpdatedAt).Format("2006-01-02 15:04"),
			l.Turns, l.Status, tildePath(l.Cwd, home), listTitle(l, short))
	}
	_ = tw.Flush()
	if err := bw.Flush(); err != nil {
		return fail(stdio, err)
	}
	return ExitOK
}

// listTitle is the TITLE cell: the title ("-" before the first prompt),
// marked for a subagent's session with its parent's id.
func listTitle(l ListedSession, short map[string]string) string {
	t := l.Title
	if t == "" {
		t = "-"
	}
	// A title is one line already; a tab would break the table.
	t = strings.ReplaceAll(t, "\t", " ")
	if p := l.ParentSession; p != "" {
		if s, ok := short[p]; ok {
			p = s
		}
		t = "↳ " + t + " (child of " + p + ")"
	}
	return t
}

// tildePath shortens a path under the home directory to ~/….
func tildePath(p, home string) string {
	if home == "" || home == "/" {
		return p
	}
	if p == home {
		return "~"
	}
	if rest, ok := strings.CutPrefix(p, home+string(filepath.Separator)); ok {
		return "~" + string(filepath.Separator) + rest
	}
	return p
}

// shortIDs maps each id to its shortest prefix of at least least bytes that
// is not a prefix of any other id, which [store.Store.Resolve] resolves
// back to it (an id that prefixes another stays whole: the exact match
// wins).
func shortIDs(ids []string, least int) map[string]string {
	sorted := slices.Clone(ids)
	slices.Sort(sorted)
	out := make(map[string]string, len(ids))
	for i, id := range sorted {
		n := least
		// In sorted order the longest shared prefix is with a neighbour.
		if i > 0 {
			n = max(n, commonPrefix(id, sorted[i-1])+1)
		}
		if i+1 < len(sorted) {
			n = max(n, commonPrefix(id, sorted[i+1])+1)
		}
		out[id] = id[:min(n, len(id))]
	}
	return out
}

// maxResolvedShortIDs is how many short ids shortIDsOf finds with
// Resolve; for more, one read of every stored id is cheaper (Resolve
// takes several queries per id when ids share long prefixes, as UUIDv7s
// made in the same minute do).
const maxResolvedShortIDs = 16

// shortIDsOf is shortIDs for some of the stored ids, unique among all of
// them: each prefix is checked with the store's Resolve (an index range
// scan), lengthened past the ids an ambiguous one matched; or, for many
// ids, taken from shortIDs over every stored id.
func shortIDsOf(ctx context.Context, st store.Sessions, ids []string, least int) (map[string]string, error) {
	if len(ids) > maxResolvedShortIDs {
		all, err := st.IDs(ctx)
		if err != nil {
			return nil, err
		}
		short := shortIDs(all, least)
		out := make(map[string]string, len(ids))
		for _, id := range ids {
			out[id] = short[id]
		}
		return out, nil
	}
	out := make(map[string]string, len(ids))
	for _, id := range ids {
		n := least
		for n < len(id) {
			got, err := st.Resolve(ctx, id[:n])
			if err == nil && got == id {
				break
			}
			var ide *store.IDError
			if !errors.As(err, &ide) || len(ide.Candidates) == 0 {
				if err == nil {
					err = fmt.Errorf("id prefix %q resolves to %s, not %s", id[:n], got, id)
				}
				return nil, err
			}
			next := n
			for _, c := range ide.Candidates {
				if c.ID != id {
					next = max(next, commonPrefix(id, c.ID)+1)
				}
			}
			// Every candidate may sort before id and share less: the
			// listed ones are only the first few.
			n = max(next, n+1)
		}
		out[id] = id[:min(n, len(id))]
	}
	return out, nil
}

func commonPrefix(a, b string) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}

// idHint is what a person should do with an id that matched nothing.
const idHint = `run "dsh sessions list --all" to see the sessions and their ids`

// printIDError explains an unknown or ambiguous session id, listing the
// sessions an ambiguous prefix matches.
func printIDError(stdio IO, e *store.IDError) {
	if len(e.Candidates) == 0 {
		fmt.Fprintf(stdio.Stderr, "dsh: %v; %s\n", e, idHint)
		return
	}
	fmt.Fprintf(stdio.Stderr, "dsh: %v:\n", e)
	tw := tabwriter.NewWriter(stdio.Stderr, 0, 4, 2, ' ', 0)
	for _, c := range e.Candidates {
		title := c.Title
		if title == "" {
			title = "-"
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", c.ID, time.UnixMilli(c.UpdatedAt).Format("2006-01-02 15:04"), title)
	}
	if e.More {
		fmt.Fprintln(tw, "  …")
	}
	_ = tw.Flush()
	fmt.Fprintln(stdio.Stderr, "give more characters of the id")
}
