package tui_test

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/dsh-dev/dsh/internal/llm/llmtest"
)

// TestPickerFullTextSearch: typing in the session picker finds a session
// by a word said in it (not in its title), with the text around the
// match, and Enter opens it.
func TestPickerFullTextSearch(t *testing.T) {
	tm := newTerm(t)
	for _, r := range []struct{ prompt, answer string }{
		{"fix the wombat parser", "The armadillo cache held a stale token table; cleared it."},
		{"tidy the readme", "Done."},
	} {
		tm.srv.Enqueue(llmtest.Response{Text: r.answer})
		c := exec.Command(dshBin, "run", r.prompt)
		c.Dir = tm.cwd
		c.Env = append(os.Environ(), "DSH_HOME="+tm.home, "DEEPSEEK_API_KEY=test-key", "DEEPSEEK_BASE_URL="+tm.srv.URL())
		if out, err := c.CombinedOutput(); err != nil {
			t.Fatalf("dsh run: %v: %s", err, out)
		}
	}
	tm.start(100, 30, "tui")
	tm.waitFor("/help for commands")
	tm.typeLine("/sessions")
	tm.waitFor("type to search")
	if err := tm.tmux("send-keys", "-t", "m", "-l", "armadillo"); err != nil {
		t.Fatal(err)
	}
	s := tm.waitFor("«armadillo»")
	if !strings.Contains(s, "fix the wombat parser") || strings.Contains(s, "tidy the readme") {
		t.Errorf("the picker does not show just the matching session:\n%s", s)
	}
	tm.keys("Enter")
	s = tm.waitScreen("the session to open", func(s string) bool {
		return !strings.Contains(s, "type to search") && strings.Contains(s, "armadillo cache")
	})
	if !strings.Contains(s, "fix the wombat parser") {
		t.Errorf("the opened session's prompt is not shown:\n%s", s)
	}
	tm.keys("C-d")
	tm.exitStatus()
}
