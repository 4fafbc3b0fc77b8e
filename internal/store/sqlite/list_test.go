package sqlite

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/dsh-dev/dsh/internal/session"
	"github.com/dsh-dev/dsh/internal/store"
)

// storePaged stores 40 sessions in two directories, every fifth a child,
// with update times that repeat (four sessions per millisecond) so that
// the id tie-break decides much of the order.
func storePaged(t *testing.T, s *Store) {
	t.Helper()
	ctx := context.Background()
	for i := range 40 {
		h := session.Header{Version: session.FormatVersion, ID: fmt.Sprintf("s-%02d", (i*17)%40),
			CreatedAt: 1_700_000_000_000, Cwd: fmt.Sprintf("/work/p%d", i%2)}
		if i%5 == 4 {
			h.ParentSession = "s-00"
		}
		if err := s.Create(ctx, h); err != nil {
			t.Fatal(err)
		}
		rawExec(t, s, `UPDATE sessions SET updated_at = ? WHERE id = ?`, 1_700_000_000_000+int64(i/4), h.ID)
	}
}

func listIDs(es []Entry) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = e.Header.ID
	}
	return out
}

// TestListPages: walking any filter's listing page by page with the
// cursor of each page's last entry yields the whole listing, in (update
// time, id) descending order, each session once.
func TestListPages(t *testing.T) {
	ctx := context.Background()
	s, _ := newStore(t)
	storePaged(t, s)
	for _, f := range []ListFilter{{}, {TopLevelOnly: true}, {Cwd: "/work/p1"}, {Cwd: "/work/p0", TopLevelOnly: true}} {
		t.Run(fmt.Sprintf("%+v", f), func(t *testing.T) {
			whole, err := s.List(ctx, f)
			if err != nil || len(whole) == 0 {
				t.Fatalf("%d entries: %v", len(whole), err)
			}
			if !slices.IsSortedFunc(whole, func(a, b Entry) int {
				if a.UpdatedAt != b.UpdatedAt {
					return int(b.UpdatedAt - a.UpdatedAt)
				}
				return strings.Compare(b.Header.ID, a.Header.ID)
			}) {
				t.Fatalf("not in (updatedAt, id) descending order: %v", listIDs(whole))
			}
			for _, size := range []int{1, 3, 7, len(whole), len(whole) + 1} {
				var walked []Entry
				p := f
				p.Limit = size
				for range len(whole) + 2 {
					page, err := s.List(ctx, p)
					if err != nil {
						t.Fatal(err)
					}
					if len(page) > size {
						t.Fatalf("page of %d entries, limit %d", len(page), size)
					}
					walked = append(walked, page...)
					if len(page) < size {
						break
					}
					c := store.CursorOf(page[len(page)-1])
					p.Before = &c
				}
				if got, want := listIDs(walked), listIDs(whole); !slices.Equal(got, want) {
					t.Fatalf("pages of %d: %v, want %v", size, got, want)
				}
			}
		})
	}
}

// TestListIDs: an id filter lists those sessions (the unknown ones are
// absent) in listing order, with the other filters still applied.
func TestListIDs(t *testing.T) {
	ctx := context.Background()
	s, _ := newStore(t)
	storePaged(t, s)
	whole, err := s.List(ctx, ListFilter{})
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, e := range whole {
		if strings.HasSuffix(e.Header.ID, "3") || e.Header.ID == "s-04" {
			want = append(want, e.Header.ID)
		}
	}
	got, err := s.List(ctx, ListFilter{IDs: []string{"s-13", "s-03", "nope", "s-33", "s-23", "s-04"}})
	if err != nil || !slices.Equal(listIDs(got), want) {
		t.Fatalf("%v, want %v: %v", listIDs(got), want, err)
	}
	if got, err := s.List(ctx, ListFilter{IDs: []string{}}); err != nil || len(got) != 0 {
		t.Fatalf("no ids: %v, %v", listIDs(got), err)
	}
	got, err = s.List(ctx, ListFilter{IDs: want, Cwd: "/work/p1", Limit: 2})
	if err != nil || len(got) > 2 {
		t.Fatalf("%v: %v", listIDs(got), err)
	}
	for _, e := range got {
		if e.Header.Cwd != "/work/p1" {
			t.Fatalf("%+v outside the cwd", e.Header)
		}
	}
}

// TestListPlan: every listing filter, with and without a cursor, reads
// its own index in order: no full scan of the table, no sort.
func TestListPlan(t *testing.T) {
	s, _ := newStore(t)
	storePaged(t, s)
	c := &store.Cursor{UpdatedAt: 1_700_000_000_005, ID: "s-20"}
	for _, f := range []ListFilter{
		{}, {TopLevelOnly: true}, {Cwd: "/work/p1"}, {Cwd: "/work/p0", TopLevelOnly: true},
		{Before: c, Limit: 5}, {TopLevelOnly: true, Before: c, Limit: 5},
		{Cwd: "/work/p1", Before: c, Limit: 5}, {Cwd: "/work/p0", TopLevelOnly: true, Before: c, Limit: 5},
	} {
		q, args := listQuery(f)
		rows, err := s.r.Query("EXPLAIN QUERY PLAN "+q, args...)
		if err != nil {
			t.Fatal(err)
		}
		var plan []string
		for rows.Next() {
			var id, parent, notused int
			var detail string
			if err := rows.Scan(&id, &parent, &notused, &detail); err != nil {
				t.Fatal(err)
			}
			plan = append(plan, detail)
		}
		rows.Close()
		text := strings.Join(plan, "; ")
		if len(plan) != 1 || !strings.Contains(text, "USING INDEX sessions_list") || strings.Contains(text, "TEMP B-TREE") {
			t.Errorf("%+v: plan %q", f, text)
		}
		// A cursor or a directory is a range of the index, not a scan.
		if (f.Before != nil || f.Cwd != "") && !strings.HasPrefix(text, "SEARCH") {
			t.Errorf("%+v: plan %q, want an index search", f, text)
		}
		t.Logf("%+v: %s", f, text)
	}
}

// TestParseCursor: a cursor round-trips; anything else is ErrBadCursor.
func TestParseCursor(t *testing.T) {
	c := store.Cursor{UpdatedAt: 1_700_000_000_123, ID: "019a:odd id"}
	got, err := store.ParseCursor(c.String())
	if err != nil || got != c {
		t.Fatalf("%+v, %v", got, err)
	}
	for _, bad := range []string{"", "!!", "bm8tY29sb24", "eDpzLTE", "MTI6"} {
		if _, err := store.ParseCursor(bad); !errors.Is(err, store.ErrBadCursor) {
			t.Errorf("ParseCursor(%q) = %v, want ErrBadCursor", bad, err)
		}
	}
}
