package cli_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/dsh-dev/dsh/internal/cli"
	"github.com/dsh-dev/dsh/internal/llm/llmtest"
)

// TestSessionsSearchAndReindex: dsh sessions search finds this
// directory's sessions by what was said in them (another directory's only
// with --all), prints JSON with snippets, refuses a query without a word
// with exit 2, and dsh sessions reindex rebuilds the index.
func TestSessionsSearchAndReindex(t *testing.T) {
	e := newEnv(t)
	e.srv.Enqueue(llmtest.Response{Text: "The quokka parser is fixed."})
	if _, stderr, code := e.dsh("", "run", "fix the quokka parser"); code != 0 {
		t.Fatalf("run: exit %d: %s", code, stderr)
	}
	here := e.cwd
	e.cwd = t.TempDir()
	e.srv.Enqueue(llmtest.Response{Text: "Elsewhere, the quokka sleeps."})
	if _, stderr, code := e.dsh("", "run", "a quokka in another directory"); code != 0 {
		t.Fatalf("run: exit %d: %s", code, stderr)
	}
	e.cwd = here

	out, stderr, code := e.dsh("", "sessions", "search", "--json", "quokka")
	if code != 0 {
		t.Fatalf("search: exit %d: %s", code, stderr)
	}
	var found []cli.SearchedSession
	if err := json.Unmarshal([]byte(out), &found); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if len(found) != 1 || found[0].Title != "fix the quokka parser" || found[0].Cwd != here ||
		found[0].Type != "assistant/message" || !strings.Contains(found[0].Snippet, "«quokka»") {
		t.Fatalf("search in this directory: %+v", found)
	}
	out, _, code = e.dsh("", "sessions", "search", "--json", "--all", "quokka")
	if err := json.Unmarshal([]byte(out), &found); code != 0 || err != nil || len(found) != 2 {
		t.Fatalf("search --all: exit %d, %d found (%v): %s", code, len(found), err, out)
	}
	out, _, code = e.dsh("", "sessions", "search", "--all", "--limit", "1", "parser", "quokka")
	if code != 0 || !strings.Contains(out, "fix the quokka parser") || !strings.Contains(out, "«parser»") || strings.Contains(out, "another directory") {
		t.Errorf("human search: exit %d:\n%s", code, out)
	}
	_, stderr, code = e.dsh("", "sessions", "search", "nothingmatchesthis")
	if code != 0 || !strings.Contains(stderr, "no session in") {
		t.Errorf("no match: exit %d: %s", code, stderr)
	}
	_, stderr, code = e.dsh("", "sessions", "search", `"()"`)
	if code != 2 || !strings.Contains(stderr, "SEARCH_INVALID_QUERY") {
		t.Errorf("invalid query: exit %d: %s", code, stderr)
	}
	if _, _, code = e.dsh("", "sessions", "search"); code != 2 {
		t.Errorf("no query: exit %d", code)
	}

	out, stderr, code = e.dsh("", "sessions", "reindex")
	if code != 0 || !strings.HasPrefix(out, "reindexed 2 session(s), 4 event(s)") {
		t.Errorf("reindex: exit %d: %s%s", code, out, stderr)
	}
	out, stderr, code = e.dsh("", "sessions", "reindex", "--session", found[0].ShortID)
	if code != 0 || !strings.HasPrefix(out, "reindexed 1 session(s), 2 event(s)") {
		t.Errorf("reindex --session: exit %d: %s%s", code, out, stderr)
	}
	if _, _, code = e.dsh("", "sessions", "reindex", "--session", "zzzz"); code != 2 {
		t.Errorf("reindex of an unknown session: exit %d", code)
	}
	out, _, _ = e.dsh("", "sessions", "search", "--json", "quokka")
	if err := json.Unmarshal([]byte(out), &found); err != nil || len(found) != 1 {
		t.Errorf("search after reindex: %s", out)
	}
}
