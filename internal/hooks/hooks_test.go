package hooks

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dsh-dev/dsh/internal/leakcheck"
)

func TestMain(m *testing.M) { leakcheck.Run(m) }

func parse(t *testing.T, doc string, d Dialect) []Hook {
	t.Helper()
	hs, _, err := Parse("test.json", []byte(doc), d)
	if err != nil {
		t.Fatal(err)
	}
	return hs
}

func TestMatchers(t *testing.T) {
	hs := parse(t, `{"hooks":{"PreToolUse":[
		{"matcher":"Write|Edit","hooks":[{"type":"command","command":"a"}]},
		{"matcher":"Bash(.*)","hooks":[{"type":"command","command":"b"}]},
		{"matcher":"mcp__.*","hooks":[{"type":"command","command":"c"}]},
		{"matcher":"","hooks":[{"type":"command","command":"d"}]},
		{"matcher":"*","hooks":[{"type":"command","command":"e"}]}]}}`, DialectClaude)
	set := &Set{Hooks: hs}
	cmds := func(subject string) string {
		var out []string
		for _, h := range set.For(PreToolUse, subject) {
			out = append(out, h.Command)
		}
		return strings.Join(out, "")
	}
	for subject, want := range map[string]string{
		"Write": "ade", "Edit": "ade", "WriteX": "de", "Writ": "de",
		"Bash": "bde", "BashX": "bde", "mcp__fs__read": "cde",
		// dsh's own names match Claude Code's matchers through the alias.
		"write": "ade", "str_replace_based_edit_tool": "ade", "bash": "bde",
	} {
		if got := cmds(subject); got != want {
			t.Errorf("%s: ran %q, want %q", subject, got, want)
		}
	}
	// Codex: always a regex, so "Write|Edit" still alternates and "Bash"
	// is anchored.
	cx := &Set{Hooks: parse(t, `{"hooks":{"PreToolUse":[{"matcher":"Ba.h","hooks":[{"type":"command","command":"x"}]}]}}`, DialectCodex)}
	if len(cx.For(PreToolUse, "Bash")) != 1 || len(cx.For(PreToolUse, "Bashful")) != 0 {
		t.Error("codex regex matcher")
	}
	// An invalid pattern is an error at load, naming the file and group.
	if _, _, err := Parse("bad.json", []byte(`{"hooks":{"PreToolUse":[{"matcher":"Bash(","hooks":[{"type":"command","command":"x"}]}]}}`), DialectClaude); err == nil || !strings.Contains(err.Error(), "bad.json: PreToolUse[0]") {
		t.Errorf("invalid matcher: %v", err)
	}
	// Unknown events and non-command hooks are skipped with a warning.
	hs2, warns, err := Parse("w.json", []byte(`{"hooks":{"Nope":[],"Stop":[{"hooks":[{"type":"prompt","prompt":"x"},{"type":"command","command":"y","timeout":3}]}]}}`), DialectClaude)
	if err != nil || len(hs2) != 1 || hs2[0].Timeout != 3*time.Second || len(warns) != 2 {
		t.Errorf("hooks %+v warnings %q err %v", hs2, warns, err)
	}
}

func runner(t *testing.T, doc string) *Runner {
	t.Helper()
	return &Runner{Set: &Set{Hooks: parse(t, doc, DialectClaude)}, SessionID: "s", Cwd: t.TempDir()}
}

func TestDecisionsMerge(t *testing.T) {
	r := runner(t, `{"hooks":{"PreToolUse":[{"hooks":[
		{"type":"command","command":"echo '{\"hookSpecificOutput\":{\"permissionDecision\":\"allow\"}}'"},
		{"type":"command","command":"echo '{\"decision\":\"approve\",\"hookSpecificOutput\":{\"permissionDecision\":\"ask\",\"permissionDecisionReason\":\"check\"}}'"},
		{"type":"command","command":"echo no >&2; exit 2"},
		{"type":"command","command":"echo '{\"permissionDecision\":\"deny\",\"reason\":\"r2\"}'"},
		{"type":"command","command":"exit 1"}]}]}}`)
	out := r.Fire(t.Context(), PreToolUse, "bash", map[string]any{"tool_name": "bash"})
	if out.Ran != 5 || out.Decision != DecisionDeny || out.Reason != "no\n\nr2" {
		t.Fatalf("outcome %+v", out)
	}
	if out.Results[1].Decision != DecisionAsk || out.Results[4].Error == "" || out.Results[4].Decision != "" {
		t.Errorf("results %+v", out.Results)
	}
	// continue:false is sticky; plain stdout is context for prompts.
	r = runner(t, `{"hooks":{"UserPromptSubmit":[{"hooks":[
		{"type":"command","command":"echo extra-context"},
		{"type":"command","command":"echo '{\"continue\":false,\"stopReason\":\"halt\"}'"},
		{"type":"command","command":"echo '{\"continue\":true}'"}]}]}}`)
	out = r.Fire(t.Context(), UserPromptSubmit, "", map[string]any{"prompt": "p"})
	if !out.Stop || out.StopReason != "halt" || len(out.Context) != 1 || out.Context[0] != "extra-context" {
		t.Fatalf("outcome %+v", out)
	}
}

// A hook past its timeout is killed with its whole process group: a
// grandchild it left in the background dies too.
func TestTimeoutKillsProcessGroup(t *testing.T) {
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "pid")
	x := Exec(t.Context(), "sleep 300 & echo $! > "+pidFile+"; wait", dir, nil, nil, 300*time.Millisecond)
	if !x.TimedOut || x.ExitCode == 0 {
		t.Fatalf("result %+v", x)
	}
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	if alive(pid) {
		t.Errorf("background child %d outlived the hook", pid)
	}
	// Cancelling the turn (ctx) kills it the same way; the FIFO says the
	// hook has started.
	fifo := filepath.Join(dir, "fifo")
	must(t, syscall.Mkfifo(fifo, 0o600))
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan ExecResult, 1)
	go func() { done <- Exec(ctx, "echo started > "+fifo+"; exec sleep 300", dir, nil, nil, time.Minute) }()
	if _, err := os.ReadFile(fifo); err != nil {
		t.Fatal(err)
	}
	cancel()
	if x := <-done; !x.Cancelled {
		t.Errorf("cancelled hook: %+v", x)
	}
}

func TestOutputBounded(t *testing.T) {
	// 10 MB on stdout and stderr: read to the end, kept bounded.
	x := Exec(t.Context(), "head -c 10000000 /dev/zero | tr '\\0' x; head -c 10000000 /dev/zero | tr '\\0' y >&2", t.TempDir(), nil, nil, time.Minute)
	if x.ExitCode != 0 || x.StdoutBytes != 10_000_000 || len(x.Stdout) != MaxStdout || len(x.Stderr) > MaxStderr+200 {
		t.Fatalf("exit %d stdout %d/%d stderr %d", x.ExitCode, len(x.Stdout), x.StdoutBytes, len(x.Stderr))
	}
	r := runner(t, `{"hooks":{"Stop":[{"hooks":[{"type":"command","command":"head -c 10000000 /dev/zero | tr '\\0' y >&2; exit 2"}]}]}}`)
	out := r.Fire(t.Context(), Stop, "", nil)
	if out.Decision != DecisionBlock || len(out.Results[0].Stderr) > stderrExcerpt+4 {
		t.Errorf("decision %q, stderr excerpt %d bytes", out.Decision, len(out.Results[0].Stderr))
	}
}

func TestUntrustedProjectHooksNotRun(t *testing.T) {
	home, proj := t.TempDir(), t.TempDir()
	marker := filepath.Join(t.TempDir(), "ran")
	must(t, os.MkdirAll(filepath.Join(proj, ".dsh"), 0o700))
	file := filepath.Join(proj, ".dsh", "hooks.json")
	doc := `{"hooks":{"SessionStart":[{"hooks":[{"type":"command","command":"touch ` + marker + `"}]}]}}`
	must(t, os.WriteFile(file, []byte(doc), 0o600))
	load := func() *Set {
		set, err := Load(LoadOptions{Home: home, ProjectDir: proj})
		if err != nil {
			t.Fatal(err)
		}
		return set
	}
	set := load()
	if len(set.Hooks) != 0 || len(set.Warnings) != 1 || !strings.Contains(set.Warnings[0], "ignored until trusted") {
		t.Fatalf("untrusted: %+v", set)
	}
	(&Runner{Set: set, Cwd: proj}).Fire(t.Context(), SessionStart, "startup", nil)
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("an untrusted project hook ran")
	}
	tr, err := LoadTrust(home)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tr.Add(file, proj, proj); err != nil {
		t.Fatal(err)
	}
	set = load()
	(&Runner{Set: set, Cwd: proj}).Fire(t.Context(), SessionStart, "startup", nil)
	if _, err := os.Stat(marker); err != nil {
		t.Fatal("a trusted project hook did not run")
	}
	// A changed file needs trusting again.
	must(t, os.WriteFile(file, []byte(doc+" "), 0o600))
	if set = load(); len(set.Hooks) != 0 {
		t.Fatal("a changed project file stayed trusted")
	}
}

// alive reports whether pid is a live process (a zombie is dead).
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// The opt-in imports: Codex's hooks.json (regex matchers) and Claude
// Code's settings files (the user's directly, the project's once trusted).
func TestImports(t *testing.T) {
	home, user, proj := t.TempDir(), t.TempDir(), t.TempDir()
	for path, doc := range map[string]string{
		filepath.Join(user, ".codex", "hooks.json"):     `{"hooks":{"PreToolUse":[{"matcher":"ba.h","hooks":[{"type":"command","command":"codex-hook"}]}]}}`,
		filepath.Join(user, ".claude", "settings.json"): `{"model":"x","hooks":{"Stop":[{"hooks":[{"type":"command","command":"claude-user-hook"}]}]}}`,
		filepath.Join(proj, ".claude", "settings.json"): `{"hooks":{"Stop":[{"hooks":[{"type":"command","command":"claude-project-hook"}]}]}}`,
	} {
		must(t, os.MkdirAll(filepath.Dir(path), 0o700))
		must(t, os.WriteFile(path, []byte(doc), 0o600))
	}
	set, err := Load(LoadOptions{Home: home, ProjectDir: proj, UserHome: user, Import: []string{ImportClaude, ImportCodex}})
	if err != nil {
		t.Fatal(err)
	}
	var cmds []string
	for _, h := range set.Hooks {
		cmds = append(cmds, h.Command)
	}
	if strings.Join(cmds, ",") != "claude-user-hook,codex-hook" || len(set.Warnings) != 1 {
		t.Fatalf("hooks %q warnings %q", cmds, set.Warnings)
	}
	if len(set.For(PreToolUse, "bash")) != 1 {
		t.Error("codex regex matcher did not match bash")
	}
	if _, err := Load(LoadOptions{Home: home, Import: []string{"vim"}}); err == nil {
		t.Error("an unknown import was accepted")
	}
}
