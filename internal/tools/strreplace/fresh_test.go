package strreplace

import (
	"strings"
	"testing"

	fstools "github.com/dsh-dev/dsh/internal/tools/fs"
)

// TestChangesNeedAFreshView: str_replace and insert refuse a file the
// session never viewed (NOT_READ) or that changed since its view
// (STALE_READ), as edit and write do, and leave it untouched.
func TestChangesNeedAFreshView(t *testing.T) {
	edits := map[string]map[string]any{
		"str_replace": {"command": "str_replace", "path": "f.txt", "old_str": "three", "new_str": "3"},
		"insert":      {"command": "insert", "path": "f.txt", "insert_line": 1, "new_str": "1.5"},
	}
	for name, args := range edits {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, Options{})
			h.write(t, "f.txt", five)
			r := h.run(t, Name, args)
			if code(r) != fstools.CodeNotRead || !strings.Contains(text(r), "has not been viewed") || !strings.Contains(text(r), "`view`") {
				t.Fatalf("never viewed: %s %q", code(r), text(r))
			}
			if h.content(t, "f.txt") != five {
				t.Fatal("a refused edit changed the file")
			}

			// A partial view is a view.
			if r := h.run(t, Name, map[string]any{"command": "view", "path": "f.txt", "view_range": []int{1, 2}}); r.IsError {
				t.Fatal(text(r))
			}
			h.write(t, "f.txt", five+"six\n") // changed behind the session's back
			r = h.run(t, Name, args)
			if code(r) != fstools.CodeStaleRead || !strings.Contains(text(r), "changed since it was last viewed") {
				t.Fatalf("stale: %s %q", code(r), text(r))
			}
			if h.content(t, "f.txt") != five+"six\n" {
				t.Fatal("a refused edit changed the file")
			}

			h.view(t, "f.txt")
			if r := h.run(t, Name, args); r.IsError {
				t.Fatalf("after a fresh view: %s", text(r))
			}
			// Its own edit keeps the view fresh: a second edit needs none.
			again := map[string]any{"command": "insert", "path": "f.txt", "insert_line": 0, "new_str": "top"}
			if r := h.run(t, Name, again); r.IsError {
				t.Fatalf("second edit: %s", text(r))
			}
			if got := h.content(t, "f.txt"); !strings.HasPrefix(got, "top\none\n") {
				t.Fatalf("content %q", got)
			}
		})
	}
}

// TestCreateNeedsNoView: create makes a new file without a view, that
// file may then be edited at once, and create never overwrites an
// existing file, viewed or not.
func TestCreateNeedsNoView(t *testing.T) {
	h := newHarness(t, Options{})
	if r := h.run(t, Name, map[string]any{"command": "create", "path": "n.txt", "file_text": "a\nb\n"}); r.IsError {
		t.Fatal(text(r))
	}
	if r := h.run(t, Name, map[string]any{"command": "str_replace", "path": "n.txt", "old_str": "b", "new_str": "B"}); r.IsError {
		t.Fatalf("edit of a created file: %s", text(r))
	}
	h.write(t, "f.txt", five)
	for _, viewed := range []bool{false, true} {
		if viewed {
			h.view(t, "f.txt")
		}
		r := h.run(t, Name, map[string]any{"command": "create", "path": "f.txt", "file_text": "x"})
		if code(r) != CodeFileExists || h.content(t, "f.txt") != five {
			t.Fatalf("create over an existing file (viewed %v): %s %q", viewed, code(r), text(r))
		}
	}
	// A view is per session.
	h.view(t, "f.txt")
	r := h.runAs(t, "other-session", Name, map[string]any{"command": "str_replace", "path": "f.txt", "old_str": "one", "new_str": "1"})
	if code(r) != fstools.CodeNotRead {
		t.Fatalf("another session's view counted: %s %q", code(r), text(r))
	}
	if got := h.content(t, "n.txt"); got != "a\nB\n" {
		t.Fatalf("n.txt %q", got)
	}
}
