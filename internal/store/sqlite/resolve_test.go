package sqlite

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestResolve(t *testing.T) {
	ctx := context.Background()
	s, _ := newStore(t)
	for _, id := range []string{"019a-aaaa-1", "019a-aaaa-2", "019a-bbbb", "019b", "019b-long", "other"} {
		mustCreate(t, s, id)
	}
	mustAppend(t, s, "019a-aaaa-2", userMsg(t, 0, "user", "second one"))
	for _, tc := range []struct {
		prefix, want string
		candidates   []string
	}{
		{"019a-bbbb", "019a-bbbb", nil}, // a whole id
		{"019a-b", "019a-bbbb", nil},    // a unique prefix
		{"o", "other", nil},
		{"019b", "019b", nil}, // an exact id wins over the longer one it prefixes
		{"019b-", "019b-long", nil},
		{"019a-aaaa", "", []string{"019a-aaaa-1", "019a-aaaa-2"}},
		{"019", "", []string{"019a-aaaa-1", "019a-aaaa-2", "019a-bbbb", "019b", "019b-long"}},
		{"019c", "", nil},
		{"x", "", nil},
		{"", "", nil},
	} {
		got, err := s.Resolve(ctx, tc.prefix)
		if tc.want != "" {
			if err != nil || got != tc.want {
				t.Errorf("Resolve(%q) = %q, %v; want %q", tc.prefix, got, err, tc.want)
			}
			continue
		}
		var ide *IDError
		if !errors.As(err, &ide) {
			t.Fatalf("Resolve(%q) = %q, %v; want an *IDError", tc.prefix, got, err)
		}
		var ids []string
		for _, c := range ide.Candidates {
			ids = append(ids, c.ID)
		}
		if strings.Join(ids, " ") != strings.Join(tc.candidates, " ") || ide.More {
			t.Errorf("Resolve(%q) candidates %v (more %v), want %v", tc.prefix, ids, ide.More, tc.candidates)
		}
		if len(tc.candidates) == 0 {
			if !errors.Is(err, ErrNotFound) || ide.Code() != CodeSessionNotFound || !strings.Contains(err.Error(), "no session id starts with") {
				t.Errorf("Resolve(%q): %v (code %s)", tc.prefix, err, ide.Code())
			}
		} else if !errors.Is(err, ErrAmbiguous) || ide.Code() != CodeSessionAmbiguous || !strings.Contains(err.Error(), "ambiguous") {
			t.Errorf("Resolve(%q): %v (code %s)", tc.prefix, err, ide.Code())
		}
	}
	// Candidates carry the title, so that a person can tell them apart.
	_, err := s.Resolve(ctx, "019a-aaaa")
	var ide *IDError
	if !errors.As(err, &ide) || ide.Candidates[1].Title != "second one" || ide.Candidates[1].UpdatedAt == 0 {
		t.Errorf("candidates %+v", ide)
	}
}

func TestResolveBoundsCandidates(t *testing.T) {
	s, _ := newStore(t)
	for i := range MaxCandidates + 3 {
		mustCreate(t, s, fmt.Sprintf("s%02d", i))
	}
	_, err := s.Resolve(context.Background(), "s")
	var ide *IDError
	if !errors.As(err, &ide) || len(ide.Candidates) != MaxCandidates || !ide.More || ide.Candidates[0].ID != "s00" {
		t.Fatalf("Resolve = %v %+v", err, ide)
	}
	if !strings.Contains(err.Error(), "more than 10") {
		t.Errorf("message %q", err)
	}
}

// TestResolveUsesIndex: a prefix lookup is a range search of the
// primary-key index, not a scan of every session.
func TestResolveUsesIndex(t *testing.T) {
	s, _ := newStore(t)
	q, args := prefixQuery("019a")
	rows, err := s.r.Query("EXPLAIN QUERY PLAN "+q, args...)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var id, parent, notused int
		var detail string
		if err := rows.Scan(&id, &parent, &notused, &detail); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, detail)
	}
	p := strings.Join(plan, "; ")
	if !strings.Contains(p, "SEARCH sessions USING INDEX") || !strings.Contains(p, "id>? AND id<?") {
		t.Fatalf("query plan %q", p)
	}
}

func TestSuccessor(t *testing.T) {
	for _, tc := range []struct {
		in, want string
		ok       bool
	}{
		{"ab", "ac", true},
		{"a\xff", "b", true},
		{"019a-", "019a.", true},
		{"\xff\xff", "", false},
	} {
		got, ok := successor(tc.in)
		if got != tc.want || ok != tc.ok {
			t.Errorf("successor(%q) = %q, %v", tc.in, got, ok)
		}
	}
}
