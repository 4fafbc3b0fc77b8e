//go:build linux

package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/dsh-dev/dsh/internal/proc/proctest"

	"github.com/dsh-dev/dsh/internal/llm/llmtest"
)

// editTask scripts a multi-step edit: think, read the file, edit it,
// run a failing check, answer.
func editTask(e *env) {
	if err := os.WriteFile(filepath.Join(e.cwd, "main.go"), []byte("package main\n\nfunc main() {\n\tprintln(\"helo\")\n}\n"), 0o644); err != nil {
		e.t.Fatal(err)
	}
	args := func(v map[string]string) string { b, _ := json.Marshal(v); return string(b) }
	e.srv.Enqueue(
		llmtest.Response{Reasoning: "The greeting is misspelt; read the file first.", Text: "Reading main.go.",
			ToolCalls: []llmtest.ToolCall{{Name: "read", Arguments: args(map[string]string{"file_path": "main.go"})}},
			Usage:     &llmtest.Usage{Input: 1200, CacheRead: 800, Output: 40}},
		llmtest.Response{Text: "Fixing the typo.",
			ToolCalls: []llmtest.ToolCall{{Name: "edit", Arguments: args(map[string]string{"file_path": "main.go", "old_string": "helo", "new_string": "hello"})}},
			Usage:     &llmtest.Usage{Input: 300, CacheRead: 1800, Output: 30}},
		llmtest.Response{ToolCalls: []llmtest.ToolCall{bashCall("grep -c hello main.go && exit 3")},
			Usage: &llmtest.Usage{Input: 100, CacheRead: 2100, Output: 20}},
		llmtest.Response{Text: "main.go now prints hello.", Usage: &llmtest.Usage{Input: 50, CacheRead: 2300, Output: 12}},
	)
}

// runOnPTY runs dsh with its stderr on a pseudo-terminal and returns
// stdout, everything the terminal received, and the exit code.
func runOnPTY(t *testing.T, e *env, env []string, args ...string) (stdout, term string, code int) {
	t.Helper()
	master, slave := proctest.OpenPTY(t, 100)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	c := e.cmd(ctx, args...)
	c.Env = append(c.Env, env...)
	var o bytes.Buffer
	c.Stdin, c.Stdout, c.Stderr = strings.NewReader(""), &o, slave
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	// Only the child holds the slave now, so the master reads EIO once
	// dsh has exited.
	slave.Close()
	got := make(chan []byte, 1)
	go func() {
		b, _ := io.ReadAll(master)
		got <- b
	}()
	err := c.Wait()
	var ee interface{ ExitCode() int }
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	b := <-got
	// The terminal turns \n into \r\n.
	return o.String(), strings.ReplaceAll(string(b), "\r\n", "\n"), code
}

var sgr = regexp.MustCompile("\x1b\\[[0-9;]*[mK]")

// plainScreen drops colours and resolves erased transient lines, leaving
// the lines a person reads.
func plainScreen(s string) string {
	var lines []string
	for l := range strings.SplitSeq(sgr.ReplaceAllString(s, ""), "\n") {
		if i := strings.LastIndexByte(l, '\r'); i >= 0 {
			l = l[i+1:]
		}
		lines = append(lines, l)
	}
	return strings.Join(lines, "\n")
}

// TestRunProgressOnTerminal: dsh run on a terminal streams the answer,
// one line per tool call with its outcome, the edit's diff, and a
// closing usage line to stderr, in colour; stdout is still only the final
// text, and the edit happened.
func TestRunProgressOnTerminal(t *testing.T) {
	e := newEnv(t)
	editTask(e)
	stdout, term, code := runOnPTY(t, e, []string{"TERM=xterm-256color", "NO_COLOR="}, "run", "--permission", "full-access", "fix the greeting")
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, term)
	}
	if stdout != "main.go now prints hello.\n" {
		t.Fatalf("stdout = %q", stdout)
	}
	if !strings.Contains(term, "\x1b[") {
		t.Errorf("no colour on a terminal:\n%q", term)
	}
	screen := plainScreen(term)
	for _, want := range []string{
		"The greeting is misspelt; read the file first.\nReading main.go.\n",
		"✓ read main.go — lines 1-5 of 5\n",
		"Fixing the typo.\n✓ edit main.go — +1 -1 lines\n",
		"    -    println(\"helo\")\n    +    println(\"hello\")\n",
		"✗ bash grep -c hello main.go && exit 3 — exit 3 · ",
		"main.go now prints hello.\n",
		"── 4 steps · 3 tool calls · 8.7k tokens in (7.0k cached, 80%), 102 out",
		"\nsession ",
	} {
		if !strings.Contains(screen, want) {
			t.Errorf("terminal is missing %q:\n%s", want, screen)
		}
	}
	if !strings.Contains(term, "waiting for") {
		t.Errorf("no waiting line while the request was pending:\n%q", term)
	}
	b, err := os.ReadFile(filepath.Join(e.cwd, "main.go"))
	if err != nil || !strings.Contains(string(b), "hello") {
		t.Fatalf("main.go = %q, %v", b, err)
	}
}

// TestRunProgressNoColor: NO_COLOR keeps the stream but drops colours,
// and summarises reasoning instead of dimming it.
func TestRunProgressNoColor(t *testing.T) {
	e := newEnv(t)
	editTask(e)
	_, term, code := runOnPTY(t, e, []string{"NO_COLOR=1"}, "run", "--permission", "full-access", "fix the greeting")
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, term)
	}
	if strings.Contains(term, "\x1b[3") || strings.Contains(term, "\x1b[2m") {
		t.Errorf("colour despite NO_COLOR:\n%q", term)
	}
	if screen := plainScreen(term); !strings.Contains(screen, "· thinking: The greeting is misspelt") || !strings.Contains(screen, "✓ edit main.go") {
		t.Errorf("stream missing:\n%s", screen)
	}
}

// TestRunQuietOnTerminal: --quiet silences the stream on a terminal.
func TestRunQuietOnTerminal(t *testing.T) {
	e := newEnv(t)
	editTask(e)
	stdout, term, code := runOnPTY(t, e, nil, "run", "--quiet", "--permission", "full-access", "fix the greeting")
	if code != 0 || stdout != "main.go now prints hello.\n" {
		t.Fatalf("exit %d, stdout %q", code, stdout)
	}
	if !regexp.MustCompile(`^session [0-9a-f-]+\n$`).MatchString(term) {
		t.Fatalf("--quiet terminal got more than the session line:\n%q", term)
	}
}

// TestRunWithoutTerminalIsQuiet: off a terminal stderr carries only the
// session line, stdout only the answer; --progress forces the stream
// on, plainly (no colour, no transient lines).
func TestRunWithoutTerminalIsQuiet(t *testing.T) {
	e := newEnv(t)
	editTask(e)
	stdout, stderr, code := e.dsh("", "run", "--permission", "full-access", "fix the greeting")
	if code != 0 || stdout != "main.go now prints hello.\n" {
		t.Fatalf("exit %d, stdout %q\n%s", code, stdout, stderr)
	}
	if !regexp.MustCompile(`^session [0-9a-f-]+\n$`).MatchString(stderr) {
		t.Fatalf("stderr off a terminal is not quiet:\n%q", stderr)
	}

	e2 := newEnv(t)
	editTask(e2)
	_, stderr, code = e2.dsh("", "run", "--progress", "--permission", "full-access", "fix the greeting")
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	if strings.ContainsAny(stderr, "\x1b\r") {
		t.Errorf("control bytes off a terminal:\n%q", stderr)
	}
	for _, want := range []string{"· thinking: The greeting", "✓ edit main.go — +1 -1 lines", "── 4 steps · 3 tool calls"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("--progress stderr is missing %q:\n%s", want, stderr)
		}
	}
}

// TestRunProgressShowsRetries: a provider error that dsh retries is
// shown with its reason and wait, then the answer.
func TestRunProgressShowsRetries(t *testing.T) {
	e := newEnv(t)
	e.srv.Enqueue(llmtest.Response{Status: 503}, llmtest.Response{Text: "second time lucky"})
	stdout, stderr, code := e.dsh("", "run", "--progress", "say hi")
	if code != 0 || stdout != "second time lucky\n" {
		t.Fatalf("exit %d, stdout %q\n%s", code, stdout, stderr)
	}
	if !regexp.MustCompile(`(?m)^↻ retry 1/\d+ in [0-9.]+s: \S+: .*\(HTTP 503\).*\nsecond time lucky\n── 1 step`).MatchString(stderr) {
		t.Fatalf("no retry notice:\n%s", stderr)
	}
}
