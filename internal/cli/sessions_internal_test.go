package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
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
	// More ids than are resolved one by one: read from every stored id.
	if len(ids) <= maxResolvedShortIDs {
		t.Fatalf("only %d ids", len(ids))
	}
	got, err = shortIDsOf(t.Context(), st, ids, 8)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		if got[id] != want[id] {
			t.Errorf("many: short(%s) = %q, want %q", id, got[id], want[id])
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

// TestWriteListedJSON: the hand-written array is what an indenting
// Encoder writes, byte for byte: escapes, omitted empty fields, and a
// value with every field set (found by reflection, so a new field that
// writeListedJSON does not know fails here).
func TestWriteListedJSON(t *testing.T) {
	seed := int64(3)
	var full ListedSession
	fillAll(reflect.ValueOf(&full).Elem())
	lists := [][]ListedSession{{}, {{Title: "one"}}, {full}, {
		{Header: session.Header{ID: "a", Cwd: "/w <&> \u2028\u2029 \x00\x1f\b\f\t\r\n \xff\xfe ünï", SeedLength: &seed}, Title: "t\n\"q\"\\", ShortID: "a"},
		{Header: session.Header{ID: "b", ParentSession: "a", CreatedAt: -1}, Status: "completed", Turns: 2},
		{Header: session.Header{ID: "c", Origin: "schedule", OriginInfo: &session.OriginInfo{ID: "s1", FireTime: "2026 <&>"}}},
		{Header: session.Header{ID: "d", Origin: "github", OriginInfo: &session.OriginInfo{Delivery: "d", Repo: "o/r", PR: 2}}},
	}}
	for _, list := range lists {
		checkListedJSON(t, list)
	}
}

// fillAll sets every field of v to a non-zero value.
func fillAll(v reflect.Value) {
	switch v.Kind() {
	case reflect.Struct:
		for i := range v.NumField() {
			fillAll(v.Field(i))
		}
	case reflect.String:
		v.SetString("x" + v.Type().Name())
	case reflect.Int, reflect.Int64:
		v.SetInt(7)
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fillAll(v.Elem())
	}
}

func checkListedJSON(t *testing.T, list []ListedSession) {
	t.Helper()
	var want, got strings.Builder
	enc := json.NewEncoder(&want)
	enc.SetIndent("", "  ")
	if err := enc.Encode(list); err != nil {
		t.Fatal(err)
	}
	if err := writeListedJSON(&got, list); err != nil {
		t.Fatal(err)
	}
	if got.String() != want.String() {
		t.Fatalf("got\n%s\nwant\n%s", got.String(), want.String())
	}
}

func FuzzWriteListedJSON(f *testing.F) {
	f.Add("/w <&>", "title \u2028", "\xff", int64(-3))
	f.Fuzz(func(t *testing.T, cwd, title, origin string, n int64) {
		checkListedJSON(t, []ListedSession{{Header: session.Header{ID: title, Cwd: cwd, Origin: origin, CreatedAt: n, SeedLength: &n}, Title: title, Status: origin}})
	})
}
