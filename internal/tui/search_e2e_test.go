package tui_test

import (
	"bufio"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/dsh-dev/dsh/internal/llm/llmtest"
)

// TestPickerFullTextSearch: typing in the session picker finds a session
// by a word said in it (not in its title), with the text around the
// match, and Enter opens it; in process and attached to dsh serve.
func TestPickerFullTextSearch(t *testing.T) {
	for _, attach := range []bool{false, true} {
		name := "in-process"
		if attach {
			name = "attached"
		}
		t.Run(name, func(t *testing.T) { pickerSearch(t, attach) })
	}
}

func pickerSearch(t *testing.T, attach bool) {
	tm := newTerm(t)
	env := append(os.Environ(), "DSH_HOME="+tm.home, "DEEPSEEK_API_KEY=test-key", "DEEPSEEK_BASE_URL="+tm.srv.URL())
	for _, r := range []struct{ prompt, answer string }{
		{"fix the wombat parser", "The armadillo cache held a stale token table; cleared it."},
		{"tidy the readme", "Done."},
	} {
		tm.srv.Enqueue(llmtest.Response{Text: r.answer})
		c := exec.Command(dshBin, "run", r.prompt)
		c.Dir, c.Env = tm.cwd, env
		if out, err := c.CombinedOutput(); err != nil {
			t.Fatalf("dsh run: %v: %s", err, out)
		}
	}
	args := []string{"tui"}
	if attach {
		serve := exec.Command(dshBin, "serve", "--listen", "127.0.0.1:0")
		serve.Dir, serve.Env = tm.cwd, env
		out, err := serve.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := serve.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = serve.Process.Signal(os.Interrupt)
			_ = serve.Wait()
		})
		line, err := bufio.NewReader(out).ReadString('\n')
		if err != nil {
			t.Fatalf("dsh serve: %v", err)
		}
		go func() { _, _ = io.Copy(io.Discard, out) }() // the server ends it when it exits
		args = append(args, "--attach", strings.TrimSpace(line[strings.LastIndex(line, " ")+1:]))
	}
	tm.start(100, 30, args...)
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
