package cli_test

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dsh-dev/dsh/internal/llm/llmtest"
	"github.com/dsh-dev/dsh/internal/session"
)

// TestPromptLargerThanWindow: `dsh run` refuses a prompt larger than the
// model's context window before any request, names both sizes and the
// stable code, exits 1 and still ends --json with run/result.
func TestPromptLargerThanWindow(t *testing.T) {
	e := newEnv(t)
	writeFile(t, filepath.Join(e.home, "config.yaml"), fmt.Sprintf(`
model: tiny/small
providers:
  - id: tiny
    base_url: %s
    models:
      - id: small
        context_window: 2000
`, e.srv.URL()), 0o600)
	prompt := strings.Repeat("word ", 2000) // 2,500 tokens
	out, stderr, code := e.dsh("", "run", "--json", prompt)
	if code != 1 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	events, res := parseJSONRun(t, out)
	if res.Status != "error" || !strings.Contains(res.Error, "PROMPT_TOO_LARGE") ||
		!strings.Contains(res.Error, "about 2500 tokens") || !strings.Contains(res.Error, "window of 2000 tokens") {
		t.Errorf("run/result %+v", res)
	}
	if !strings.Contains(stderr, "PROMPT_TOO_LARGE") {
		t.Errorf("stderr lacks the code: %s", stderr)
	}
	if n := e.srv.RequestCount(); n != 0 {
		t.Errorf("%d requests for a refused prompt", n)
	}
	if c := countTypes(events); c[session.TypeUserMessage] != 0 {
		t.Errorf("the refused prompt entered the history: %v", c)
	}
}

// TestPromptStoredOnce: the prompt's text is stored once (in the inbox
// splice that queued it; its user/message is stored as a reference), and
// every reader sees it whole: `sessions show`, a resumed run's request,
// and a session imported from the export.
func TestPromptStoredOnce(t *testing.T) {
	const prompt = "count-me-once: list the files"
	e := newEnv(t)
	e.srv.Enqueue(llmtest.Response{Text: "first answer"}, llmtest.Response{Text: "second answer"})
	out, stderr, code := e.dsh("", "run", "--json", prompt)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	_, res := parseJSONRun(t, out)
	_, events, exported := exportEvents(t, e, res.SessionID)
	n := 0
	for _, ev := range events {
		n += strings.Count(string(ev.Data), prompt)
	}
	if n != 1 {
		t.Errorf("the prompt is stored %d times, want once:\n%s", n, exported)
	}
	refs := 0
	for _, ev := range events {
		if ev.Type == session.TypeUserMessage && strings.Contains(string(ev.Data), `"inboxRef"`) {
			refs++
		}
	}
	if refs == 0 {
		t.Error("no user/message is stored as an inbox reference")
	}
	if shown, _, _ := e.dsh("", "sessions", "show", res.SessionID); !strings.Contains(shown, "[user] "+prompt) {
		t.Errorf("sessions show lacks the prompt:\n%s", shown)
	}
	if _, stderr, code := e.dsh("", "run", "--resume", res.SessionID, "and then?"); code != 0 {
		t.Fatalf("resume: exit %d: %s", code, stderr)
	}
	reqs := e.srv.Requests()
	if len(reqs) != 2 || !strings.Contains(string(reqs[1].Body), prompt) {
		t.Errorf("the resumed request lacks the first prompt")
	}

	other := newEnv(t)
	if _, stderr, code := other.dsh(exported, "sessions", "import", "-"); code != 0 {
		t.Fatalf("import: exit %d: %s", code, stderr)
	}
	if shown, _, _ := other.dsh("", "sessions", "show", res.SessionID); !strings.Contains(shown, "[user] "+prompt) {
		t.Errorf("the imported session lacks the prompt:\n%s", shown)
	}
}
