package cli

import "testing"

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
