package cli

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dsh-dev/dsh/internal/app"
	"github.com/dsh-dev/dsh/internal/session"
	"github.com/dsh-dev/dsh/internal/store/sqlite"
)

// TestShortIDsOf: the prefixes of some ids, checked against the store,
// are those shortIDs computes over every stored id, also when more than
// MaxCandidates ids share a prefix.
func TestShortIDsOf(t *testing.T) {
	st, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "dsh.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ids := []string{"01a231a7-792b", "01a231a7-c22f", "01a231a7-c266", "01b00000-0000", "abc", "abcd-1"}
	for i := range 15 {
		ids = append(ids, fmt.Sprintf("01a231a7-c2%02d", i))
	}
	for _, id := range ids {
		if err := st.Create(t.Context(), session.Header{Version: session.FormatVersion, ID: id, Cwd: "/w"}); err != nil {
			t.Fatal(err)
		}
	}
	want := shortIDs(ids, 8)
	some := []string{"01a231a7-792b", "01a231a7-c266", "01a231a7-c214", "01b00000-0000", "abc", "abcd-1"}
	got, err := shortIDsOf(t.Context(), st, some, 8)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range some {
		if got[id] != want[id] {
			t.Errorf("short(%s) = %q, want %q", id, got[id], want[id])
		}
	}
}

func TestShortIDs(t *testing.T) {
	ids := []string{"01a231a7-792b", "01a231a7-c22f", "01a231a7-c266", "01b00000-0000", "abc", "abcd-1"}
	got := shortIDs(ids, 8)
	want := map[string]string{
		"01a231a7-792b": "01a231a7-7",
		"01a231a7-c22f": "01a231a7-c22",
		"01a231a7-c266": "01a231a7-c26",
		"01b00000-0000": "01b00000",
		"abc":           "abc", // shorter than the minimum: whole
		"abcd-1":        "abcd-1",
	}
	for id, w := range want {
		if got[id] != w {
			t.Errorf("short(%s) = %q, want %q", id, got[id], w)
		}
	}
}

func TestTildePath(t *testing.T) {
	for _, tc := range []struct{ p, home, want string }{
		{"/home/u/src/x", "/home/u", "~/src/x"},
		{"/home/u", "/home/u", "~"},
		{"/home/user2/x", "/home/u", "/home/user2/x"},
		{"/srv/x", "", "/srv/x"},
		{"/x", "/", "/x"},
	} {
		if got := tildePath(tc.p, tc.home); got != tc.want {
			t.Errorf("tildePath(%q, %q) = %q, want %q", tc.p, tc.home, got, tc.want)
		}
	}
}

func TestListTitle(t *testing.T) {
	short := map[string]string{"parent-full-id": "parent-f"}
	l := ListedSession{Title: "review\tthe diff"}
	l.ParentSession = "parent-full-id"
	if got := listTitle(l, short); got != "↳ review the diff (child of parent-f)" {
		t.Errorf("child title %q", got)
	}
	if got := listTitle(ListedSession{}, short); got != "-" {
		t.Errorf("untitled %q", got)
	}
}

func TestResolveDelegation(t *testing.T) {
	dir := t.TempDir()
	for _, id := range []string{"d-20261201-125000-aaaaaaaa", "d-20261201-125000-bbbbbbbb", "d-20261201-130000-cccccccc"} {
		if err := os.Mkdir(filepath.Join(dir, id), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct{ prefix, want, err string }{
		{"d-20261201-125000-aaaaaaaa", "d-20261201-125000-aaaaaaaa", ""},
		{"d-20261201-13", "d-20261201-130000-cccccccc", ""},
		{"d-20261201-125000-b", "d-20261201-125000-bbbbbbbb", ""},
		{"d-20261201-1250", "", "ambiguous: it matches\n  d-20261201-125000-aaaaaaaa\n  d-20261201-125000-bbbbbbbb\n"},
		{"d-2027", "", `no delegation id starts with "d-2027"`},
		{"", "", "no delegation id"},
		{"../x", "", "no delegation id"},
	} {
		got, err := resolveDelegation(dir, tc.prefix)
		var ce *app.ConfigError
		if got != tc.want || (tc.err == "") != (err == nil) || (err != nil && (!strings.Contains(err.Error(), tc.err) || !errors.As(err, &ce))) {
			t.Errorf("resolveDelegation(%q) = %q, %v", tc.prefix, got, err)
		}
	}
	if _, err := resolveDelegation(filepath.Join(dir, "none"), "d-"); err == nil || !strings.Contains(err.Error(), "no delegation id") {
		t.Errorf("missing directory: %v", err)
	}
}
