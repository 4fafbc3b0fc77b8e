package hooks

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// trustRig is a project with a .dsh/hooks.json whose PreToolUse hook
// runs a command, a $DSH_HOME, and the runner a session would have.
type trustRig struct {
	t          *testing.T
	home, proj string
	out        string // a directory outside the project for markers
	mu         sync.Mutex
	warned     []string
	logged     []Result
}

func newTrustRig(t *testing.T, command string) *trustRig {
	t.Helper()
	r := &trustRig{t: t, home: t.TempDir(), proj: t.TempDir(), out: t.TempDir()}
	doc, err := json.Marshal(map[string]any{"hooks": map[string]any{"PreToolUse": []any{
		map[string]any{"matcher": "Bash", "hooks": []any{map[string]any{"type": "command", "command": command}}}}}})
	must(t, err)
	r.write(".dsh/hooks.json", string(doc))
	return r
}

func (r *trustRig) path(rel string) string { return filepath.Join(r.proj, rel) }

func (r *trustRig) write(rel, content string) {
	r.t.Helper()
	must(r.t, os.MkdirAll(filepath.Dir(r.path(rel)), 0o700))
	must(r.t, os.WriteFile(r.path(rel), []byte(content), 0o700))
}

// script writes an executable shell script that appends word to the
// marker file name in r.out.
func (r *trustRig) script(rel, marker string) {
	r.write(rel, "#!/bin/sh\necho ran >> '"+filepath.Join(r.out, marker)+"'\n")
}

func (r *trustRig) ran(marker string) int {
	b, err := os.ReadFile(filepath.Join(r.out, marker))
	if err != nil {
		return 0
	}
	return strings.Count(string(b), "ran")
}

func (r *trustRig) trust(cwd string) (Trusted, error) {
	tr, err := LoadTrust(r.home)
	must(r.t, err)
	return tr.Add(r.path(".dsh/hooks.json"), r.proj, cwd)
}

func (r *trustRig) mustTrust() Trusted {
	r.t.Helper()
	tr, err := r.trust(r.proj)
	if err != nil {
		r.t.Fatal(err)
	}
	return tr
}

func (r *trustRig) runner(cwd string) *Runner {
	r.t.Helper()
	set, err := Load(LoadOptions{Home: r.home, ProjectDir: r.proj, Cwd: cwd})
	if err != nil {
		r.t.Fatal(err)
	}
	return &Runner{Set: set, Cwd: cwd,
		Warn: func(msg string) { r.mu.Lock(); r.warned = append(r.warned, msg); r.mu.Unlock() },
		Log: func(typ string, data any) error {
			if res, ok := data.(Result); ok && typ == TypeResult {
				r.mu.Lock()
				r.logged = append(r.logged, res)
				r.mu.Unlock()
			}
			return nil
		}}
}

// toolCall fires PreToolUse as a bash call does.
func (r *trustRig) toolCall(run *Runner) Outcome {
	return run.Fire(r.t.Context(), PreToolUse, "bash", map[string]any{"tool_name": "bash"})
}

func (r *trustRig) lastWarning() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.warned) == 0 {
		return ""
	}
	return r.warned[len(r.warned)-1]
}

// TestTrustedHookScriptRewritten is the finding as it was made: a
// trusted hooks.json runs .dsh/check.sh; the agent rewrites the script
// mid-session; on the next tool call the rewritten script does not run
// (its marker never appears), the warning and the logged hook/result name
// .dsh/check.sh; after "dsh hooks trust" it runs again.
func TestTrustedHookScriptRewritten(t *testing.T) {
	r := newTrustRig(t, ".dsh/check.sh")
	r.script(".dsh/check.sh", "good")
	tr := r.mustTrust()
	if len(tr.Refs) != 1 || tr.Refs[0].Path != r.path(".dsh/check.sh") {
		t.Fatalf("trusted refs %+v, want .dsh/check.sh", tr.Refs)
	}
	run := r.runner(r.proj)
	if out := r.toolCall(run); out.Ran != 1 || r.ran("good") != 1 {
		t.Fatalf("the trusted script did not run: %+v", out)
	}
	// The agent's rewrite (the sandbox refusing it is tested with the
	// sandbox; here the file is written directly).
	r.script(".dsh/check.sh", "evil")
	out := r.toolCall(run)
	if r.ran("evil") != 0 {
		t.Fatal("the rewritten script ran")
	}
	if out.Ran != 0 || len(out.Results) != 1 || !out.Results[0].Suspended {
		t.Fatalf("outcome %+v, want one suspended result", out)
	}
	// The call the hook guards is refused, not let through unchecked.
	if out.Decision != DecisionDeny || !strings.Contains(out.Reason, ".dsh/check.sh") {
		t.Fatalf("decision %q (%s), want deny naming .dsh/check.sh", out.Decision, out.Reason)
	}
	if w := r.lastWarning(); !strings.Contains(w, ".dsh/check.sh changed since it was trusted") || !strings.Contains(w, "dsh hooks trust") {
		t.Fatalf("warning %q does not name .dsh/check.sh", w)
	}
	if len(r.logged) == 0 || !strings.Contains(r.logged[len(r.logged)-1].Error, ".dsh/check.sh") ||
		len(r.logged[len(r.logged)-1].Changed) != 1 || r.logged[len(r.logged)-1].Changed[0].Path != r.path(".dsh/check.sh") {
		t.Fatalf("logged %+v", r.logged)
	}
	// Said once, not at every call.
	r.toolCall(run)
	if n := len(r.warned); n != 1 {
		t.Fatalf("%d warnings, want 1: %q", n, r.warned)
	}
	// A fresh session says it at load.
	set, err := Load(LoadOptions{Home: r.home, ProjectDir: r.proj})
	must(t, err)
	if len(set.Warnings) != 1 || !strings.Contains(set.Warnings[0], ".dsh/check.sh") {
		t.Fatalf("load warnings %q", set.Warnings)
	}
	// The user reviews and trusts again: the same session runs it.
	r.mustTrust()
	if out := r.toolCall(run); out.Ran != 1 || r.ran("evil") != 1 {
		t.Fatalf("after trust: %+v", out)
	}
	if w := r.lastWarning(); !strings.Contains(w, "trusted again") {
		t.Fatalf("warning %q", w)
	}
}

// TestTrustCoversReferencedFiles: with hooks.json unchanged, a referenced
// file deleted, a named file that appears, and the ways a command names a
// script (bash x.sh, an interpreter, the project variable, sh -c with
// nested quotes, an option's value) each suspend the hooks, naming the
// file.
func TestTrustCoversReferencedFiles(t *testing.T) {
	cases := []struct {
		name, command string
		setup         func(r *trustRig) // before trust
		change        func(r *trustRig) // after
		want          string            // in the warning
	}{
		{"deleted", ".dsh/check.sh",
			func(r *trustRig) { r.script(".dsh/check.sh", "good") },
			func(r *trustRig) { must(t, os.Remove(r.path(".dsh/check.sh"))) },
			".dsh/check.sh was deleted"},
		{"new file", "bash scripts/lint.sh || true",
			func(r *trustRig) {},
			func(r *trustRig) { r.script("scripts/lint.sh", "evil") },
			"scripts/lint.sh is run by a hook but was not trusted"},
		{"bash x.sh", "bash x.sh",
			func(r *trustRig) { r.script("x.sh", "good") },
			func(r *trustRig) { r.script("x.sh", "evil") },
			"x.sh changed"},
		{"interpreter", "python3 tools/y.py 2>/dev/null; sh ./tools/z.sh",
			func(r *trustRig) { r.write("tools/y.py", "print(1)\n"); r.script("tools/z.sh", "good") },
			func(r *trustRig) { r.script("tools/z.sh", "evil") },
			"tools/z.sh changed"},
		{"project variable", `"$CLAUDE_PROJECT_DIR"/.dsh/check.sh`,
			func(r *trustRig) { r.script(".dsh/check.sh", "good") },
			func(r *trustRig) { r.script(".dsh/check.sh", "evil") },
			".dsh/check.sh changed"},
		{"braced variable", `${DSH_PROJECT_DIR}/hooks/a.sh`,
			func(r *trustRig) { r.script("hooks/a.sh", "good") },
			func(r *trustRig) { r.script("hooks/a.sh", "evil") },
			"hooks/a.sh changed"},
		{"nested quotes", `sh -c "bash 'deep/run.sh'"`,
			func(r *trustRig) { r.script("deep/run.sh", "good") },
			func(r *trustRig) { r.script("deep/run.sh", "evil") },
			"deep/run.sh changed"},
		{"option value", `sh lint.sh --config=.dsh/rules.conf`,
			func(r *trustRig) { r.script("lint.sh", "good"); r.write(".dsh/rules.conf", "a") },
			func(r *trustRig) { r.write(".dsh/rules.conf", "b") },
			".dsh/rules.conf changed"},
		{"source", `. ./env.sh && true`,
			func(r *trustRig) { r.write("env.sh", "true\n") },
			func(r *trustRig) { r.script("env.sh", "evil") },
			"env.sh changed"},
		{"cd first", `cd tools && ./x.sh`,
			func(r *trustRig) { r.script("tools/x.sh", "good") },
			func(r *trustRig) { r.script("tools/x.sh", "evil") },
			"tools/x.sh changed"},
		{"pattern, a new match", `for f in .dsh/checks/*.sh; do sh "$f"; done`,
			func(r *trustRig) { r.script(".dsh/checks/a.sh", "good") },
			func(r *trustRig) { r.script(".dsh/checks/b.sh", "evil") },
			".dsh/checks/b.sh is run by a hook but was not trusted"},
		{"pattern, a changed match", `sh tools/?.sh`,
			func(r *trustRig) { r.script("tools/a.sh", "good") },
			func(r *trustRig) { r.script("tools/a.sh", "evil") },
			"tools/a.sh changed"},
		{"hard link", ".dsh/check.sh",
			func(r *trustRig) { r.script(".dsh/check.sh", "good") },
			func(r *trustRig) { must(t, os.Link(r.path(".dsh/check.sh"), filepath.Join(r.out, "alias.sh"))) },
			".dsh/check.sh cannot be verified"},
		{"fifo in place", ".dsh/check.sh",
			func(r *trustRig) { r.script(".dsh/check.sh", "good") },
			func(r *trustRig) {
				must(t, os.Remove(r.path(".dsh/check.sh")))
				must(t, syscall.Mkfifo(r.path(".dsh/check.sh"), 0o600))
			},
			".dsh/check.sh cannot be verified"},
		{"replaced by a link", ".dsh/check.sh",
			func(r *trustRig) { r.script(".dsh/check.sh", "good") },
			func(r *trustRig) {
				evil := filepath.Join(r.out, "evil.sh")
				must(t, os.WriteFile(evil, []byte("#!/bin/sh\necho ran >> '"+filepath.Join(r.out, "evil")+"'\n"), 0o700))
				must(t, os.Remove(r.path(".dsh/check.sh")))
				must(t, os.Symlink(evil, r.path(".dsh/check.sh")))
			},
			".dsh/check.sh leads to"},
		{"directory replaced by a link", ".dsh/bin/check.sh",
			func(r *trustRig) { r.script(".dsh/bin/check.sh", "good") },
			func(r *trustRig) {
				dir := filepath.Join(r.out, "bin")
				must(t, os.MkdirAll(dir, 0o700))
				must(t, os.WriteFile(filepath.Join(dir, "check.sh"), []byte("#!/bin/sh\necho ran >> '"+filepath.Join(r.out, "evil")+"'\n"), 0o700))
				must(t, os.RemoveAll(r.path(".dsh/bin")))
				must(t, os.Symlink(dir, r.path(".dsh/bin")))
			},
			"outside the repository"},
		{"hooks file rewritten", ".dsh/check.sh",
			func(r *trustRig) { r.script(".dsh/check.sh", "good") },
			func(r *trustRig) {
				doc := `{"hooks":{"PreToolUse":[{"hooks":[{"type":"command","command":"echo ran >> '` + filepath.Join(r.out, "evil") + `'"}]}]}}`
				r.write(".dsh/hooks.json", doc)
			},
			".dsh/hooks.json changed"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := newTrustRig(t, c.command)
			c.setup(r)
			r.mustTrust()
			run := r.runner(r.proj)
			r.toolCall(run)
			c.change(r)
			out := r.toolCall(run)
			if r.ran("evil") != 0 {
				t.Fatal("a changed script ran")
			}
			if out.Ran != 0 || len(out.Results) != 1 || !out.Results[0].Suspended || out.Decision != DecisionDeny {
				t.Fatalf("outcome %+v, want the hook suspended and the call denied", out)
			}
			if w := r.lastWarning(); !strings.Contains(w, c.want) {
				t.Fatalf("warning %q, want %q", w, c.want)
			}
		})
	}
}

// A link inside the repository is hashed by its target's content; a link
// out of it cannot be trusted at all.
func TestTrustSymlinks(t *testing.T) {
	r := newTrustRig(t, "scripts/check")
	r.script("scripts/real.sh", "good")
	must(t, os.Symlink("real.sh", r.path("scripts/check")))
	tr := r.mustTrust()
	if len(tr.Refs) != 1 || tr.Refs[0].Path != r.path("scripts/check") {
		t.Fatalf("refs %+v", tr.Refs)
	}
	run := r.runner(r.proj)
	if r.toolCall(run); r.ran("good") != 1 {
		t.Fatal("the trusted link did not run")
	}
	if got := ProtectedFiles(LoadOptions{Home: r.home, ProjectDir: r.proj}); !slices.Contains(got, r.path("scripts/check")) ||
		!slices.Contains(got, r.path("scripts/real.sh")) || !slices.Contains(got, r.path(".dsh/hooks.json")) {
		t.Fatalf("protected %q, want the link, its target and hooks.json", got)
	}
	r.script("scripts/real.sh", "evil")
	if r.toolCall(run); r.ran("evil") != 0 || !strings.Contains(r.lastWarning(), "scripts/check changed") {
		t.Fatalf("a changed link target ran or was not named: %q", r.lastWarning())
	}

	out := newTrustRig(t, ".dsh/check.sh")
	evil := filepath.Join(out.out, "x.sh")
	must(t, os.WriteFile(evil, []byte("true\n"), 0o700))
	must(t, os.Symlink(evil, out.path(".dsh/check.sh")))
	_, err := out.trust(out.proj)
	var se *SuspendedError
	if !errors.As(err, &se) || se.Code() != CodeSuspended || !strings.Contains(err.Error(), "cannot be trusted") || !strings.Contains(err.Error(), ".dsh/check.sh leads to") {
		t.Fatalf("trusting a link out of the repository: %v", err)
	}
	if tr, err := LoadTrust(out.home); err != nil || len(tr.Files) != 0 {
		t.Fatalf("something was trusted: %+v %v", tr, err)
	}
}

// A record written before trust covered scripts trusts the hooks file
// only: its hooks stay suspended until trusted again.
func TestTrustOldRecordSuspends(t *testing.T) {
	r := newTrustRig(t, ".dsh/check.sh")
	r.script(".dsh/check.sh", "evil")
	data, err := os.ReadFile(r.path(".dsh/hooks.json"))
	must(t, err)
	old, _ := json.Marshal(map[string]any{"files": map[string]string{r.path(".dsh/hooks.json"): Digest(data)}})
	must(t, os.WriteFile(filepath.Join(r.home, "hooks-trust.json"), old, 0o600))
	run := r.runner(r.proj)
	if r.toolCall(run); r.ran("evil") != 0 {
		t.Fatal("a script never trusted ran")
	}
	if w := run.Set.Warnings; len(w) != 1 || !strings.Contains(w[0], ".dsh/check.sh is run by a hook but was not trusted") {
		t.Fatalf("warnings %q", w)
	}
	if len(r.warned) != 0 {
		t.Fatalf("the runner repeated the load's warning: %q", r.warned)
	}
}

// Hooks run in the session directory: a relative script there is named
// by the command too, and trusting from the project root does not cover
// it.
func TestTrustSessionSubdirectory(t *testing.T) {
	r := newTrustRig(t, "./check.sh")
	sub := r.path("sub")
	r.script("sub/check.sh", "sub")
	r.mustTrust() // from the root: sub/check.sh is not named from there
	run := r.runner(sub)
	if out := r.toolCall(run); r.ran("sub") != 0 || len(out.Results) != 1 || !strings.Contains(out.Results[0].Error, "sub/check.sh is run by a hook but was not trusted") {
		t.Fatalf("an untrusted script in the session directory ran, or was not named: %+v", out)
	}
	if _, err := r.trust(sub); err != nil {
		t.Fatal(err)
	}
	if r.toolCall(run); r.ran("sub") != 1 {
		t.Fatal("trusted from the session directory, the script did not run")
	}
	// Trusting again from the root keeps what was trusted from sub.
	if tr := r.mustTrust(); len(tr.Refs) != 1 || tr.Refs[0].Path != r.path("sub/check.sh") {
		t.Fatalf("trusted again from the root: %+v", tr.Refs)
	}
	if r.toolCall(run); r.ran("sub") != 2 {
		t.Fatal("trusting from the root undid the trust from sub")
	}
}

func TestCommandWords(t *testing.T) {
	for cmd, want := range map[string][]string{
		`bash scripts/lint.sh`:                  {"bash", "scripts/lint.sh"},
		`python3 "tools/my tool.py" --x=a/b:c`:  {"python3", "tools/my tool.py", "tools/my", "tool.py", "--x=a/b:c", "--x", "a/b", "c"},
		`sh -c 'bash x.sh'`:                     {"sh", "-c", "bash x.sh", "bash", "x.sh"},
		`a.sh|b.sh&&c.sh;d.sh>e.log<f.in`:       {"a.sh", "b.sh", "c.sh", "d.sh", "e.log", "f.in"},
		`$(cat list) ` + "`x.sh`":               {"$", "cat", "list", "x.sh"},
		`"$CLAUDE_PROJECT_DIR"/.dsh/check.sh`:   {"$CLAUDE_PROJECT_DIR/.dsh/check.sh"},
		`esc\ aped.sh 'unterminated`:            {"esc aped.sh", "esc", "aped.sh", "unterminated"},
		`"${DSH_PROJECT_DIR}/a.sh" "q\"uote.sh`: {"${DSH_PROJECT_DIR}/a.sh", `q"uote.sh`, "quote.sh"},
	} {
		if got := commandWords(cmd); !slices.Equal(got, want) {
			t.Errorf("commandWords(%q) = %q, want %q", cmd, got, want)
		}
	}
}

// The user's own hooks need no trust, but the repository files they run
// are protected too; what lies outside the repository is not listed.
func TestProtectedFilesUserHooks(t *testing.T) {
	r := newTrustRig(t, ".dsh/check.sh")
	r.script(".dsh/check.sh", "good")
	r.script("scripts/fmt.sh", "fmt")
	user := `{"hooks":{"PostToolUse":[{"hooks":[{"type":"command","command":"\"$CLAUDE_PROJECT_DIR\"/scripts/fmt.sh; /bin/sh -c true"}]}]}}`
	must(t, os.WriteFile(filepath.Join(r.home, "hooks.json"), []byte(user), 0o600))
	o := LoadOptions{Home: r.home, ProjectDir: r.proj}
	if got := ProtectedFiles(o); !slices.Equal(got, []string{r.path("scripts/fmt.sh")}) {
		t.Fatalf("before trust: protected %q, want the user hook's script only", got)
	}
	r.mustTrust()
	want := []string{r.path(".dsh/check.sh"), r.path(".dsh/hooks.json"), r.path("scripts/fmt.sh")}
	if got := ProtectedFiles(o); !slices.Equal(got, want) {
		t.Fatalf("protected %q, want %q", got, want)
	}
}
