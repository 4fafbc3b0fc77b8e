package cli_test

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

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
