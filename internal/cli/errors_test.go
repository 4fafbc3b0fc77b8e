package cli_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/dsh-dev/dsh/internal/llm/llmtest"
)

// goTypeName matches what a user must never see in a configuration
// error: Go type names and YAML tags.
var goTypeName = regexp.MustCompile(`\b(int|int64|float64|bool)\b|!!|\*?\b[a-z]+\.[A-Z]\w*|go-yaml|unmarshal`)

func (e *env) writeConfig(doc string) {
	e.t.Helper()
	if err := os.WriteFile(filepath.Join(e.home, "config.yaml"), []byte(doc), 0o600); err != nil {
		e.t.Fatal(err)
	}
}

// TestConfigErrorsInPlainWords: dsh run with a broken config.yaml names
// the file, line and key, suggests the key meant, shows no Go type, and
// exits 2 without a request.
func TestConfigErrorsInPlainWords(t *testing.T) {
	for _, tc := range []struct{ doc, want string }{
		{"modle: deepseek/x\n", `, line 1: unknown key "modle"; did you mean "model"?`},
		{"model: deepseek/x\nmax_tokens: lots\n", `, line 2: key "max_tokens" must be a whole number, not "lots"`},
		{"profile:\n  - id: compaction\n    module: compaction\n    config:\n      treshold: 0.5\n", `, line 5: profile row "compaction" (module compaction): unknown key "treshold"; did you mean "threshold"?`},
		{"profile:\n  - id: compaction\n    module: compaction\n    config:\n      threshold: high\n", `, line 5: profile row "compaction" (module compaction): key "threshold" must be a number, not "high"`},
		{"profile:\n  - id: x\n    module: compacton\n", `, line 2: profile row "x": unknown module "compacton"; did you mean "compaction"?`},
		{"model: [x\n", `, line 2: this is not valid YAML`},
	} {
		e := newEnv(t)
		e.writeConfig(tc.doc)
		_, stderr, code := e.dsh("", "run", "hi")
		want := "dsh: " + filepath.Join(e.home, "config.yaml") + tc.want
		if code != 2 || !strings.HasPrefix(stderr, want) {
			t.Errorf("%q: exit %d\n got %s\nwant %s", tc.doc, code, stderr, want)
		}
		if goTypeName.MatchString(stderr) {
			t.Errorf("%q: a Go type name in %s", tc.doc, stderr)
		}
		if e.srv.RequestCount() != 0 {
			t.Errorf("%q: a request was sent", tc.doc)
		}
	}
}

// TestBrokenConfigDoesNotStopReadOnlyCommands: the sessions commands,
// version and help warn about a broken config.yaml and go on; doctor
// reports it and fails; run refuses.
func TestBrokenConfigDoesNotStopReadOnlyCommands(t *testing.T) {
	e := newEnv(t)
	e.srv.Enqueue(llmtest.Response{Text: "done"})
	out, stderr, code := e.dsh("", "run", "--json", "hello")
	if code != 0 {
		t.Fatalf("run: %d %s", code, stderr)
	}
	_, res := parseJSONRun(t, out)
	e.writeConfig("modle: x\n")
	for _, args := range [][]string{
		{"sessions", "list"}, {"sessions", "list", "--all", "--json"}, {"sessions", "show", res.SessionID},
		{"sessions", "export", res.SessionID}, {"sessions", "tree", res.SessionID},
	} {
		out, stderr, code := e.dsh("", args...)
		// The table shows a unique prefix of the id (at least 8 characters).
		if code != 0 || !strings.Contains(out, res.SessionID[:8]) {
			t.Errorf("%v: exit %d, stdout %q, stderr %s", args, code, out, stderr)
		}
		if !strings.Contains(stderr, "dsh: warning: "+filepath.Join(e.home, "config.yaml")+`, line 1: unknown key "modle"`) {
			t.Errorf("%v: no warning: %s", args, stderr)
		}
	}
	for _, args := range [][]string{{"version"}, {"help"}, {"help", "run"}, {"sessions", "show", "-h"}} {
		if _, stderr, code := e.dsh("", args...); code != 0 {
			t.Errorf("%v: exit %d %s", args, code, stderr)
		}
	}
	// Recovering a delegation reads only its journal.
	if _, stderr, code := e.dsh("", "delegate", "recover", "no-such-delegation"); code != 2 || strings.Contains(stderr, "config.yaml") {
		t.Errorf("delegate recover: exit %d %s", code, stderr)
	}
	out, stderr, code = e.dsh("", "doctor")
	if code != 1 || !regexp.MustCompile(`configuration +error +.*unknown key "modle"`).MatchString(out) || !strings.Contains(stderr, "broken: configuration") {
		t.Errorf("doctor: exit %d\n%s\n%s", code, out, stderr)
	}
	if _, _, code := e.dsh("", "run", "hi"); code != 2 {
		t.Errorf("run with a broken config: exit %d", code)
	}
}

// TestDoctorFailsOnAMissingKey: the default model's key is something dsh
// needs; a key for another provider is not.
func TestDoctorFailsOnAMissingKey(t *testing.T) {
	e := newEnv(t)
	c := e.cmd(t.Context(), "doctor")
	c.Env = append(c.Env, "DEEPSEEK_API_KEY=")
	var o, s strings.Builder
	c.Stdout, c.Stderr = &o, &s
	err := c.Run()
	if err == nil || c.ProcessState.ExitCode() != 1 || !strings.Contains(s.String(), "broken: default model") || !strings.Contains(o.String(), "export DEEPSEEK_API_KEY=") {
		t.Errorf("doctor without the key: %v\n%s\n%s", err, o.String(), s.String())
	}
	out, stderr, code := e.dsh("", "doctor")
	if code != 0 || !strings.Contains(out, "default model") || stderr != "" {
		t.Errorf("healthy doctor: exit %d\n%s\n%s", code, out, stderr)
	}
}

// TestResumeUnknownIDIsAUsageError: exit 2, and the message says how to
// find ids.
func TestResumeUnknownIDIsAUsageError(t *testing.T) {
	e := newEnv(t)
	_, stderr, code := e.dsh("", "run", "--resume", "no-such-id", "hi")
	if code != 2 || !strings.Contains(stderr, `no session id starts with "no-such-id"`) || !strings.Contains(stderr, "dsh sessions list --all") {
		t.Errorf("exit %d: %s", code, stderr)
	}
	if _, stderr, code := e.dsh("", "compact", "no-such-id"); code != 2 || !strings.Contains(stderr, "dsh sessions list --all") {
		t.Errorf("compact: exit %d: %s", code, stderr)
	}
	if e.srv.RequestCount() != 0 {
		t.Error("a request was sent")
	}
}

// TestJSONEndsWithARunResult: --json ends with a run/result line (status
// error, with the message) also when the run fails before its first
// request.
func TestJSONEndsWithARunResult(t *testing.T) {
	for _, tc := range []struct {
		name   string
		args   []string
		env    []string
		config string
		code   int
		msg    string
	}{
		{"missing key", []string{"run", "--json", "hi"}, []string{"DEEPSEEK_API_KEY="}, "", 2, "DEEPSEEK_API_KEY"},
		{"bad config", []string{"run", "hi", "--json"}, nil, "modle: x\n", 2, `unknown key "modle"`},
		{"unknown resume id", []string{"run", "--json", "--resume", "nope", "hi"}, nil, "", 2, "dsh sessions list --all"},
		{"unknown provider", []string{"run", "--json", "--model", "nope/x", "hi"}, nil, "", 2, "unknown provider"},
		{"unknown preset", []string{"run", "--json", "--agent-preset", "nope", "hi"}, nil, "", 2, "unknown agent preset"},
		{"no prompt", []string{"run", "--json"}, nil, "", 2, "PROMPT"},
		{"empty prompt", []string{"run", "--json", " "}, nil, "", 2, "empty"},
		{"bad flag", []string{"run", "--bogus", "--json", "hi"}, nil, "", 2, "bogus"},
		{"model failure", []string{"run", "--json", "hi"}, nil, "", 1, "AUTH"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			if tc.config != "" {
				e.writeConfig(tc.config)
			}
			if tc.name == "model failure" {
				e.srv.Enqueue(llmtest.Response{Status: 401})
			}
			c := e.cmd(t.Context(), tc.args...)
			c.Env = append(c.Env, tc.env...)
			var o, s strings.Builder
			c.Stdout, c.Stderr = &o, &s
			_ = c.Run()
			if code := c.ProcessState.ExitCode(); code != tc.code {
				t.Errorf("exit %d, want %d: %s", code, tc.code, s.String())
			}
			_, res := parseJSONRun(t, o.String())
			if res.Status != "error" || !strings.Contains(res.Error, tc.msg) {
				t.Errorf("run/result %+v, want status error with %q", res, tc.msg)
			}
		})
	}
}
