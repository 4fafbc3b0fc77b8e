package cli_test

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dsh-dev/dsh/internal/cli"
	"github.com/dsh-dev/dsh/internal/llm/llmtest"
	"github.com/dsh-dev/dsh/internal/session"
)

// listSessions runs dsh sessions list --json (with extra args).
func listSessions(t *testing.T, e *env, args ...string) []cli.ListedSession {
	t.Helper()
	out, stderr, code := e.dsh("", append([]string{"sessions", "list", "--json"}, args...)...)
	var listed []cli.ListedSession
	if code != 0 || json.Unmarshal([]byte(out), &listed) != nil {
		t.Fatalf("sessions list: %d %s %s", code, out, stderr)
	}
	return listed
}

// runPrompts runs one session per prompt, in order.
func runPrompts(t *testing.T, e *env, prompts ...string) {
	t.Helper()
	for _, p := range prompts {
		if _, stderr, code := e.dsh("", "run", p); code != 0 {
			t.Fatalf("run %q: %d %s", p, code, stderr)
		}
	}
}

// TestSessionsListShowsTitleTurnsStatus: the table and --json show each
// session's title (from its first prompt), time, directory, turns and
// status.
func TestSessionsListShowsTitleTurnsStatus(t *testing.T) {
	e := newEnv(t)
	e.srv.Enqueue(llmtest.Response{Text: "fixed"}, llmtest.Response{Status: 401}, llmtest.Response{Text: "again"})
	runPrompts(t, e, "  Fix   the failing parser test\nThe test is in parser_test.go and fails since yesterday's change.")
	if _, _, code := e.dsh("", "run", "Explain why the build cache is invalidated on every run of the integration tests here"); code != 1 {
		t.Fatalf("the failing run exited %d", code)
	}
	listed := listSessions(t, e)
	if len(listed) != 2 {
		t.Fatalf("listed %+v", listed)
	}
	failed, done := listed[0], listed[1] // newest first
	if done.Title != "Fix the failing parser test" || done.Turns != 1 || done.Status != "completed" || done.Cwd != e.cwd {
		t.Errorf("completed session %+v", done)
	}
	if failed.Title != "Explain why the build cache is invalidated on every run of…" || failed.Status != "error" {
		t.Errorf("failed session %+v", failed)
	}
	for _, l := range listed {
		if !strings.HasPrefix(l.ID, l.ShortID) || len(l.ShortID) < 8 || l.UpdatedAt == 0 || l.Events == 0 {
			t.Errorf("entry %+v", l)
		}
	}
	// A resumed session counts its turns.
	if _, stderr, code := e.dsh("", "run", "--resume", done.ID, "and the other test"); code != 0 {
		t.Fatalf("resume: %s", stderr)
	}
	listed = listSessions(t, e)
	if listed[0].ID != done.ID || listed[0].Turns != 2 || listed[0].Title != "Fix the failing parser test" {
		t.Errorf("after resume %+v", listed[0])
	}

	out, _, code := e.dsh("", "sessions", "list")
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if code != 0 || len(lines) != 3 {
		t.Fatalf("table: %d\n%s", code, out)
	}
	for _, col := range []string{"ID", "UPDATED", "TURNS", "STATUS", "DIRECTORY", "TITLE"} {
		if !strings.Contains(lines[0], col) {
			t.Errorf("header %q lacks %s", lines[0], col)
		}
	}
	if f := strings.Fields(lines[1]); len(f) < 7 || f[0] != listed[0].ShortID || f[3] != "2" || f[4] != "completed" || f[5] != e.cwd ||
		!strings.HasSuffix(lines[1], "Fix the failing parser test") {
		t.Errorf("row %q", lines[1])
	}
	if !strings.Contains(lines[2], "error") || !strings.Contains(lines[2], "Explain why the build cache") {
		t.Errorf("row %q", lines[2])
	}
	// Another directory has none, and says how to see them.
	other := *e
	other.cwd = t.TempDir()
	if out, stderr, code := other.dsh("", "sessions", "list"); code != 0 || out != "" || !strings.Contains(stderr, "--all") {
		t.Errorf("empty list: %d %q %q", code, out, stderr)
	}
	if shown, _, _ := e.dsh("", "sessions", "show", done.ID); !strings.Contains(shown, "title Fix the failing parser test\n") {
		t.Errorf("transcript lacks the title:\n%s", shown)
	}
}

// TestSessionIDPrefixes: every command taking a session id accepts a
// unique prefix; an ambiguous or unknown one is a usage error that lists
// the candidates or says how to find ids.
func TestSessionIDPrefixes(t *testing.T) {
	e := newEnv(t)
	e.srv.Enqueue(llmtest.Response{Text: "one"}, llmtest.Response{Text: "two"})
	runPrompts(t, e, "first task", "second task")
	listed := listSessions(t, e)
	a, b := listed[1], listed[0]
	short := a.ShortID

	if shown, stderr, code := e.dsh("", "sessions", "show", short); code != 0 || !strings.Contains(shown, "session "+a.ID) {
		t.Errorf("show %s: %d %s", short, code, stderr)
	}
	if out, stderr, code := e.dsh("", "sessions", "export", short); code != 0 || !strings.Contains(out, `"id":"`+a.ID+`"`) {
		t.Errorf("export %s: %d %s", short, code, stderr)
	}
	if out, stderr, code := e.dsh("", "sessions", "tree", short); code != 0 || !strings.HasPrefix(out, a.ID+"\n") {
		t.Errorf("tree %s: %d %q %s", short, code, out, stderr)
	}
	e.srv.Enqueue(llmtest.Response{Text: "resumed"})
	out, stderr, code := e.dsh("", "run", "--json", "--resume", short, "go on")
	if code != 0 {
		t.Fatalf("resume %s: %d %s", short, code, stderr)
	}
	if _, res := parseJSONRun(t, out); res.SessionID != a.ID {
		t.Errorf("resumed %s, want %s", res.SessionID, a.ID)
	}

	// Two sessions made within the same second share a long prefix.
	n := 0
	for n < len(a.ID) && n < len(b.ID) && a.ID[n] == b.ID[n] {
		n++
	}
	common := a.ID[:n]
	for _, args := range [][]string{
		{"sessions", "show", common}, {"sessions", "export", common}, {"sessions", "tree", common},
		{"run", "--resume", common, "hi"}, {"compact", common},
	} {
		_, stderr, code := e.dsh("", args...)
		if code != 2 || !strings.Contains(stderr, "ambiguous") || !strings.Contains(stderr, a.ID) || !strings.Contains(stderr, b.ID) ||
			!strings.Contains(stderr, "first task") || !strings.Contains(stderr, "second task") {
			t.Errorf("%v: exit %d\n%s", args, code, stderr)
		}
	}
	for _, args := range [][]string{
		{"sessions", "show", "zz"}, {"sessions", "export", "zz"}, {"sessions", "tree", "zz"},
		{"run", "--resume", "zz", "hi"}, {"compact", "zz"},
	} {
		_, stderr, code := e.dsh("", args...)
		if code != 2 || !strings.Contains(stderr, `no session id starts with "zz"`) || !strings.Contains(stderr, "dsh sessions list --all") {
			t.Errorf("%v: exit %d\n%s", args, code, stderr)
		}
	}
	if got := e.srv.RequestCount(); got != 3 {
		t.Errorf("%d model requests; a bad id must not reach the model", got)
	}
}

// TestSessionsImportSeveral: import takes files and directories, reports
// each file, and a bad file fails alone.
func TestSessionsImportSeveral(t *testing.T) {
	e := newEnv(t)
	e.srv.Enqueue(llmtest.Response{Text: "a"}, llmtest.Response{Text: "b"}, llmtest.Response{Text: "c"})
	runPrompts(t, e, "alpha task", "beta task", "gamma task")
	listed := listSessions(t, e)
	dir := t.TempDir()
	for i, l := range listed {
		_, _, exported := exportEvents(t, e, l.ID)
		writeFile(t, filepath.Join(dir, fmt.Sprintf("%d.jsonl", i)), exported, 0o600)
	}
	// gamma (0.jsonl) is also given as a file on its own, after the
	// directory: the second import of it fails as a duplicate.
	writeFile(t, filepath.Join(dir, "3-bad.jsonl"), "{\"type\":\"session\",\"version\":0,\"id\":\"bad\"}\nnot json\n", 0o600)
	writeFile(t, filepath.Join(dir, "notes.txt"), "not a session", 0o600)
	empty := t.TempDir()

	fresh := *e
	fresh.home = t.TempDir()
	out, stderr, code := fresh.dsh("", "sessions", "import", dir, filepath.Join(dir, "0.jsonl"), empty, filepath.Join(dir, "missing.jsonl"))
	if code != 1 {
		t.Fatalf("import exit %d\n%s\n%s", code, out, stderr)
	}
	for _, l := range listed {
		if !strings.Contains(out, "imported session "+l.ID) {
			t.Errorf("stdout lacks %s:\n%s", l.ID, out)
		}
	}
	if !strings.Contains(out, `"alpha task"`) || strings.Count(out, "imported session") != 3 {
		t.Errorf("stdout:\n%s", out)
	}
	for _, want := range []string{
		"3-bad.jsonl: ", "line 2",
		"0.jsonl: import: session " + listed[0].ID + ": session already exists",
		empty + ": the directory holds no *.jsonl files",
		"missing.jsonl: ",
		"imported 3 of 7 sessions",
	} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
	if strings.Contains(stderr+out, "notes.txt") {
		t.Errorf("a non-JSONL file was read:\n%s%s", out, stderr)
	}
	got := listSessions(t, &fresh, "--all")
	if len(got) != 3 {
		t.Fatalf("after import: %+v", got)
	}
	for _, l := range got {
		if l.Title == "" || l.Turns != 1 || l.Status != "completed" {
			t.Errorf("imported entry %+v", l)
		}
	}

	// Stdin, once.
	_, _, exported := exportEvents(t, e, listed[0].ID)
	other := *e
	other.home = t.TempDir()
	if out, stderr, code := other.dsh(exported, "sessions", "import", "-"); code != 0 || !strings.Contains(out, "imported session "+listed[0].ID) {
		t.Errorf("import -: %d %s %s", code, out, stderr)
	}
	if _, stderr, code := other.dsh("", "sessions", "import", "-", "-"); code != 2 || !strings.Contains(stderr, "only once") {
		t.Errorf("import - -: %d %s", code, stderr)
	}
	if _, stderr, code := other.dsh("", "sessions", "import"); code != 2 || !strings.Contains(stderr, "FILE") {
		t.Errorf("import without args: %d %s", code, stderr)
	}
}

// titleEnv is an env whose config names a second fake server as the
// session-title model.
func titleEnv(t *testing.T) (*env, *llmtest.Server) {
	e := newEnv(t)
	titles := llmtest.New()
	t.Cleanup(titles.Close)
	writeFile(t, filepath.Join(e.home, "config.yaml"), fmt.Sprintf(`
providers:
  - id: titler
    base_url: %s
    models:
      - id: mini
profile:
  - id: session-title
    module: session-title
    config:
      model: titler/mini
`, titles.URL()), 0o600)
	return e, titles
}

// TestModelTitle: with a title model configured, the first prompt is
// sent to it once, the call is logged as session/title (streamed with
// --json) and its title is listed; a failed call keeps the prompt title.
func TestModelTitle(t *testing.T) {
	e, titles := titleEnv(t)
	titles.Enqueue(llmtest.Response{Text: "\"Parser test repair\"", Usage: &llmtest.Usage{Input: 30, Output: 4}})
	e.srv.Enqueue(llmtest.Response{Text: "done"}, llmtest.Response{Text: "more"})
	out, stderr, code := e.dsh("", "run", "--json", "fix the failing parser test please")
	if code != 0 {
		t.Fatalf("run: %d %s", code, stderr)
	}
	events, res := parseJSONRun(t, out)
	var p session.Title
	n := 0
	for _, ev := range events {
		if ev.Type == session.TypeTitle {
			n++
			if err := ev.Decode(&p); err != nil {
				t.Fatal(err)
			}
		}
	}
	if n != 1 || p.Title != "Parser test repair" || p.Provider != "titler" || p.Model != "mini" || p.Error != nil ||
		p.Request.Messages[0].Text() != "fix the failing parser test please" || p.Usage == nil {
		t.Fatalf("%d session/title events; last %+v", n, p)
	}
	reqs := titles.Requests()
	if len(reqs) != 1 || reqs[0].Model() != "mini" || !strings.Contains(string(reqs[0].Body), "fix the failing parser test please") {
		t.Fatalf("title requests %v", len(reqs))
	}
	if l := listSessions(t, e); len(l) != 1 || l[0].Title != "Parser test repair" {
		t.Errorf("listed %+v", l)
	}
	// A resumed session keeps its title and makes no second call.
	if _, stderr, code := e.dsh("", "run", "--resume", res.SessionID, "and another thing"); code != 0 {
		t.Fatalf("resume: %s", stderr)
	}
	if titles.RequestCount() != 1 {
		t.Errorf("%d title calls", titles.RequestCount())
	}

	// A failing title model: the run succeeds, the failure is logged and
	// the session keeps its prompt title.
	titles.Enqueue(llmtest.Response{Status: 500})
	e.srv.Enqueue(llmtest.Response{Text: "ok"})
	out, stderr, code = e.dsh("", "run", "--json", "second session about caching")
	if code != 0 {
		t.Fatalf("run: %d %s", code, stderr)
	}
	_, res = parseJSONRun(t, out)
	_, stored, _ := exportEvents(t, e, res.SessionID)
	var failed *session.Title
	for _, ev := range stored {
		if ev.Type == session.TypeTitle {
			failed = &session.Title{}
			_ = ev.Decode(failed)
		}
	}
	if failed == nil || failed.Error == nil || failed.Title != "" {
		t.Fatalf("failed title call logged as %+v", failed)
	}
	if l := listSessions(t, e); l[0].ID != res.SessionID || l[0].Title != "second session about caching" {
		t.Errorf("listed %+v", l[0])
	}
}

func TestModelTitleUnknownProviderIsAConfigError(t *testing.T) {
	e := newEnv(t)
	writeFile(t, filepath.Join(e.home, "config.yaml"), `
profile:
  - id: session-title
    module: session-title
    config:
      model: nosuch/mini
`, 0o600)
	_, stderr, code := e.dsh("", "run", "hi")
	if code != 2 || !strings.Contains(stderr, "session-title") || !strings.Contains(stderr, "nosuch") {
		t.Errorf("exit %d: %s", code, stderr)
	}
	if e.srv.RequestCount() != 0 {
		t.Error("a configuration error still sent a request")
	}
}
