package cli_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/dsh-dev/dsh/internal/cli"
)

func goldenName(path string) string {
	if path == "" {
		return filepath.Join("testdata", "help", "dsh.golden")
	}
	return filepath.Join("testdata", "help", strings.ReplaceAll(path, " ", "_")+".golden")
}

// TestHelpGolden: "dsh help CMD" prints the text kept under
// testdata/help (go test -run HelpGolden -update rewrites it).
func TestHelpGolden(t *testing.T) {
	e := newEnv(t)
	for _, path := range append([]string{""}, cli.Commands()...) {
		args := append([]string{"help"}, strings.Fields(path)...)
		out, stderr, code := e.dsh("", args...)
		if code != 0 || stderr != "" {
			t.Fatalf("dsh %s: exit %d, stderr %q", strings.Join(args, " "), code, stderr)
		}
		name := goldenName(path)
		if *update {
			if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(name, []byte(out), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(name)
		if err != nil {
			t.Fatalf("%v (run with -update to create it)", err)
		}
		if out != string(want) {
			t.Errorf("dsh %s differs from %s:\n%s", strings.Join(args, " "), name, out)
		}
	}
}

// TestEveryCommandHasHelp walks every registered command: "help CMD",
// "CMD -h", "CMD --help" and "CMD -help" all exit 0 with the command's own
// usage and an example, before the command looks at its other arguments
// (so "sessions export -h" is never taken for an id). A stray argument
// before the flag changes nothing.
func TestEveryCommandHasHelp(t *testing.T) {
	e := newEnv(t)
	// A config.yaml that does not parse must not get in the way of help.
	if err := os.WriteFile(filepath.Join(e.home, "config.yaml"), []byte("modle: [x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, path := range cli.Commands() {
		words := strings.Fields(path)
		want, _, _ := e.dsh("", append([]string{"help"}, words...)...)
		if !strings.HasPrefix(want, "dsh "+path+" — ") || !strings.Contains(want, "\nUsage:\n  dsh "+words[0]) || !strings.Contains(want, "\nExamples:\n  dsh ") {
			t.Errorf("help %s lacks its title, usage or an example:\n%s", path, want)
		}
		variants := [][]string{
			append(words[:len(words):len(words)], "-h"),
			append(words[:len(words):len(words)], "--help"),
			append(words[:len(words):len(words)], "-help"),
		}
		if path != "help" {
			variants = append(variants, append(words[:len(words):len(words)], "some-id", "--help"))
		}
		for _, args := range variants {
			out, stderr, code := e.dsh("", args...)
			if code != 0 || out != want || stderr != "" {
				t.Errorf("dsh %s: exit %d, stderr %q, stdout:\n%s", strings.Join(args, " "), code, stderr, out)
			}
		}
	}
	// A group's "help" word is the same as "dsh help GROUP SUB".
	out, _, code := e.dsh("", "sessions", "help", "export")
	if want, _, _ := e.dsh("", "help", "sessions", "export"); code != 0 || out != want {
		t.Errorf("sessions help export: %d\n%s", code, out)
	}
	// After "--" a -h is the prompt's, not a help request: the run goes
	// on and fails on the broken configuration instead.
	if _, stderr, code := e.dsh("", "run", "--", "-h"); code != 2 || !strings.Contains(stderr, "config.yaml") {
		t.Errorf("run -- -h: exit %d, %s", code, stderr)
	}
	if _, stderr, code := e.dsh("", "help", "frobnicate"); code != 2 || !strings.Contains(stderr, `no command "frobnicate"`) {
		t.Errorf("help of an unknown command: %d %s", code, stderr)
	}
}

// TestBareDshPrintsUsage: without a command (and without a terminal)
// dsh prints the overview on stderr and exits 2.
func TestBareDshPrintsUsage(t *testing.T) {
	e := newEnv(t)
	out, stderr, code := e.dsh("")
	want, _, _ := e.dsh("", "help")
	if code != 2 || out != "" || stderr != want || !strings.Contains(stderr, "dsh sessions export ID") {
		t.Errorf("bare dsh: exit %d, stdout %q, stderr:\n%s", code, out, stderr)
	}
}

var flagLine = regexp.MustCompile(`(?m)^  -([a-z][a-z0-9-]*)`)

// TestHelpListsEveryFlag: the flags a command really parses (as the flag
// package lists them after an unknown flag) all appear in its help, and
// its help lists no flag it does not parse.
func TestHelpListsEveryFlag(t *testing.T) {
	e := newEnv(t)
	for _, path := range cli.Commands() {
		words := strings.Fields(path)
		help, _, _ := e.dsh("", append([]string{"help"}, words...)...)
		documented := map[string]bool{}
		for _, m := range regexp.MustCompile(`(?m)^  --([a-z][a-z0-9-]*)`).FindAllStringSubmatch(help, -1) {
			documented[m[1]] = true
		}
		_, stderr, code := e.dsh("", append(words[:len(words):len(words)], "--no-such-flag")...)
		parsed := strings.Contains(stderr, "flag provided but not defined")
		if len(documented) == 0 && !parsed {
			continue // a command that takes no flags
		}
		if code != 2 || !parsed {
			t.Errorf("%s --no-such-flag: exit %d, %s", path, code, stderr)
		}
		real := map[string]bool{}
		for _, m := range flagLine.FindAllStringSubmatch(stderr, -1) {
			real[m[1]] = true
		}
		for f := range real {
			if !documented[f] {
				t.Errorf("dsh %s parses --%s, which its help does not list", path, f)
			}
		}
		for f := range documented {
			if !real[f] {
				t.Errorf("dsh %s help lists --%s, which it does not parse", path, f)
			}
		}
	}
}
