package skills

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/dsh-dev/dsh/internal/agent"
	"github.com/dsh-dev/dsh/internal/llm"
	"github.com/dsh-dev/dsh/internal/session"
	"github.com/dsh-dev/dsh/internal/tool"
)

// tree writes files (relative to a temp root; a "/" suffix makes a
// directory) and returns the real root.
func tree(t *testing.T, files map[string]string) string {
	t.Helper()
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for p, c := range files {
		write(t, filepath.Join(root, p), c)
	}
	return root
}

func write(t *testing.T, full, content string) {
	t.Helper()
	if strings.HasSuffix(full, "/") {
		if err := os.MkdirAll(full, 0o755); err != nil {
			t.Fatal(err)
		}
		return
	}
	if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func skill(name, desc, body string) string {
	return "---\nname: " + name + "\ndescription: " + desc + "\n---\n" + body
}

// layout is a project with skills in every kind of root.
func layout(t *testing.T) (root string, o Options) {
	root = tree(t, map[string]string{
		"repo/.git/":                       "",
		"repo/src/":                        "",
		"repo/.dsh/skills/deploy/SKILL.md": skill("deploy", "Deploy the app.", "Run make deploy.\nThen check scripts/verify.sh."),
		"repo/.dsh/skills/deploy/scripts/verify.sh": "#!/bin/sh",
		"repo/.dsh/skills/deploy/.secret":           "hidden",
		"repo/.dsh/skills/notes.md":                 skill("notes", "Take notes.", "Write notes."),
		"repo/.dsh/skills/README.md":                "not a skill",
		"repo/.dsh/skills/dupe.md":                  skill("deploy", "Another deploy.", ""),
		"repo/.dsh/skills/empty-dir/":               "",
		"repo/.agents/skills/notes/SKILL.md":        skill("notes", "Shadowed notes.", "old"),
		"repo/.agents/skills/bad-yaml.md":           "---\nname: [unclosed\n---\n",
		"repo/extra/review.md":                      skill("review", "Review code.", "Look carefully."),
		"home/skills/no-desc.md":                    "---\nname: no-desc\n---\nbody",
		"home/skills/Bad_Name.md":                   skill("Bad_Name", "x", ""),
		"home/skills/plain.md":                      "no front matter",
		"home/skills/unclosed.md":                   "---\nname: unclosed\ndescription: x\n",
		"home/skills/secret/SKILL.md":               "---\nname: secret\ndescription: Users only.\ndisable-model-invocation: true\nuser-invocable: true\n---\nshh",
		"agents/skills/crlf.md":                     "\xef\xbb\xbf---\r\nname: crlf\r\ndescription: Windows   line\r\n  ends.\r\nwhen_to_use: always\r\n...\r\nbody\r\n",
	})
	return root, Options{Home: filepath.Join(root, "home"), Dirs: []string{"extra", ""}, AgentsHome: filepath.Join(root, "agents")}
}

func TestRoots(t *testing.T) {
	root, o := layout(t)
	got := Roots(filepath.Join(root, "repo/src"), o)
	want := []string{
		filepath.Join(root, "repo/.dsh/skills"),
		filepath.Join(root, "repo/.agents/skills"),
		filepath.Join(root, "repo/extra"),
		filepath.Join(root, "home/skills"),
		filepath.Join(root, "agents/skills"),
	}
	if !slices.Equal(got, want) {
		t.Fatalf("roots\n%v\nwant\n%v", got, want)
	}
	o.AgentsHome = "-"
	o.Dirs = []string{filepath.Join(root, "repo/.dsh/skills")} // a duplicate root
	if got := Roots(filepath.Join(root, "repo"), o); len(got) != 3 {
		t.Fatalf("roots without agents home, deduplicated: %v", got)
	}
}

func TestDiscover(t *testing.T) {
	root, o := layout(t)
	skills, warns := Discover(filepath.Join(root, "repo/src"), o)
	type row struct{ name, desc, when, dir string }
	var got []row
	for _, s := range skills {
		got = append(got, row{s.Name, s.Description, s.WhenToUse, strings.TrimPrefix(s.Dir, root)})
	}
	want := []row{
		{"crlf", "Windows line ends.", "always", ""},
		{"deploy", "Deploy the app.", "", "/repo/.dsh/skills/deploy"},
		{"notes", "Take notes.", "", ""},
		{"review", "Review code.", "", ""},
		{"secret", "Users only.", "", "/home/skills/secret"},
	}
	if !slices.Equal(got, want) {
		t.Fatalf("skills\n%+v\nwant\n%+v", got, want)
	}
	if i := slices.IndexFunc(skills, func(s Skill) bool { return s.Name == "secret" }); !skills[i].DisableModelInvocation || !skills[i].UserInvocable {
		t.Fatalf("secret flags %+v", skills[i])
	}
	wantWarn := map[string]string{
		"repo/.dsh/skills/dupe.md":        "already defined",
		"repo/.agents/skills/bad-yaml.md": "invalid front matter",
		"home/skills/no-desc.md":          "no description",
		"home/skills/Bad_Name.md":         "kebab-case",
		"home/skills/plain.md":            "no YAML front matter",
		"home/skills/unclosed.md":         "not closed",
	}
	if len(warns) != len(wantWarn) {
		t.Errorf("%d warnings, want %d: %v", len(warns), len(wantWarn), warns)
	}
	for _, w := range warns {
		rel := strings.TrimPrefix(w.Path, root+"/")
		if sub, ok := wantWarn[rel]; !ok || !strings.Contains(w.Reason, sub) {
			t.Errorf("unexpected warning %s", w)
		}
	}
}

func TestSplitFrontMatter(t *testing.T) {
	tests := []struct {
		in, head, body string
		ok             bool
	}{
		{"---\na: 1\n---\nbody\n", "a: 1\n", "body\n", true},
		{"---\na: 1\n---", "a: 1\n", "", true},
		{"---\n---\n", "", "", true},
		{"---\na: 1\n...\nbody", "a: 1\n", "body", true},
		{"---\r\na: 1\r\n--- \r\nbody", "a: 1\n", "body", true},
		{"\xef\xbb\xbf---\na: 1\n---\n", "a: 1\n", "", true},
		{"a: 1\n---\n", "", "", false},
		{"---\na: 1\n", "", "", false},
		{"", "", "", false},
	}
	for _, tt := range tests {
		head, body, err := splitFrontMatter([]byte(tt.in))
		if (err == nil) != tt.ok || string(head) != tt.head || string(body) != tt.body {
			t.Errorf("split(%q) = %q, %q, %v", tt.in, head, body, err)
		}
	}
}

func runTool(t *testing.T, o Options, cwd string, args string) tool.Result {
	t.Helper()
	reg := tool.NewRegistry()
	if err := reg.Register("", New(o)); err != nil {
		t.Fatal(err)
	}
	return tool.NewPipeline(reg).Run(context.Background(), &tool.Call{ID: "c", Name: ToolName, RawArguments: args, Cwd: cwd})
}

func TestSkillTool(t *testing.T) {
	root, o := layout(t)
	cwd := filepath.Join(root, "repo/src")
	tests := []struct {
		name     string
		args     string
		code     string
		want     []string
		wantNot  []string
		wantMeta string
	}{
		{name: "folder skill", args: `{"name":"deploy"}`, want: []string{
			`<skill_content name="deploy">`,
			`<skill_resources base="` + filepath.Join(root, "repo/.dsh/skills/deploy") + `">`,
			"scripts/verify.sh",
			"<skill_instructions>\nRun make deploy.\nThen check scripts/verify.sh.\n</skill_instructions>",
		}, wantNot: []string{".secret", "SKILL.md", "name: deploy"}, wantMeta: filepath.Join(root, "repo/.dsh/skills/deploy/SKILL.md")},
		{name: "flat skill", args: `{"name":"notes"}`, want: []string{"<skill_instructions>\nWrite notes.\n</skill_instructions>"}, wantNot: []string{"skill_resources", "old"}},
		{name: "slash prefix tolerated", args: `{"name":"/review"}`, want: []string{"Look carefully."}},
		{name: "crlf body", args: `{"name":"crlf"}`, want: []string{"<skill_instructions>\nbody\n</skill_instructions>"}},
		{name: "unknown", args: `{"name":"nope"}`, code: tool.CodeInvalidArgs, want: []string{`unknown skill "nope"`, "Available skills: crlf, deploy, notes, review"}, wantNot: []string{"secret"}},
		{name: "model invocation disabled", args: `{"name":"secret"}`, code: tool.CodeInvalidArgs, want: []string{"unknown skill"}},
		{name: "missing name", args: `{}`, code: tool.CodeInvalidArgs, want: []string{"name is required"}},
		{name: "name not string", args: `{"name":3}`, code: tool.CodeInvalidArgs},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := runTool(t, o, cwd, tt.args)
			text := r.Content[0].Text
			if tt.code == "" && r.IsError || tt.code != "" && (r.Error == nil || r.Error.Code != tt.code) {
				t.Fatalf("result %+v: %s", r.Error, text)
			}
			for _, w := range tt.want {
				if !strings.Contains(text, w) {
					t.Errorf("result lacks %q:\n%s", w, text)
				}
			}
			for _, w := range tt.wantNot {
				if strings.Contains(text, w) {
					t.Errorf("result has %q:\n%s", w, text)
				}
			}
			if tt.wantMeta != "" {
				var m meta
				if err := json.Unmarshal(r.Meta, &m); err != nil || m.Path != tt.wantMeta {
					t.Errorf("meta %s", r.Meta)
				}
			}
		})
	}

	// Edits are read fresh; no skills at all says so.
	write(t, filepath.Join(root, "repo/.dsh/skills/notes.md"), skill("notes", "Take notes.", "Write better notes."))
	if r := runTool(t, o, cwd, `{"name":"notes"}`); !strings.Contains(r.Content[0].Text, "Write better notes.") {
		t.Fatalf("edit not picked up: %s", r.Content[0].Text)
	}
	empty := tree(t, map[string]string{"p/": ""})
	r := runTool(t, Options{AgentsHome: "-"}, filepath.Join(empty, "p"), `{"name":"x"}`)
	if !r.IsError || !strings.Contains(r.Content[0].Text, "no skills are available") {
		t.Fatalf("no skills: %s", r.Content[0].Text)
	}
}

// stepper runs pre-steps over a real log the way the agent does: the
// returned messages are logged as user/message before the model call.
type stepper struct {
	t   *testing.T
	log *session.Log
	r   *Reminder
}

func (s stepper) step(turn, step int, msgs ...llm.Message) []llm.Message {
	s.t.Helper()
	enter, reject, err := s.r.PreStep(context.Background(), agent.PreStep{Turn: turn, Step: step, Messages: msgs})
	if err != nil || reject {
		s.t.Fatal(reject, err)
	}
	for _, m := range enter {
		if _, err := s.log.Append(session.TypeUserMessage, m, session.Surface()); err != nil {
			s.t.Fatal(err)
		}
	}
	var out []llm.Message
	for _, m := range enter {
		if m.Source.Plugin == PluginName {
			out = append(out, m)
		}
	}
	return out
}

func newStepper(t *testing.T, cwd string, o Options, seed []session.Event) stepper {
	t.Helper()
	l, err := session.NewLog(session.Header{ID: "s", Cwd: cwd}, seed, nil)
	if err != nil {
		t.Fatal(err)
	}
	return stepper{t: t, log: l, r: NewReminder(ReminderOptions{Options: o, Log: l})}
}

func TestReminder(t *testing.T) {
	root := tree(t, map[string]string{
		"repo/.git/":                  "",
		"repo/.dsh/skills/a/SKILL.md": skill("alpha", "First skill. "+strings.Repeat("long ", 200), "A"),
		"repo/.dsh/skills/broken.md":  "nope",
		"repo/.dsh/skills/hidden.md":  "---\nname: hidden\ndescription: h\ndisable-model-invocation: true\n---\n",
	})
	repo := filepath.Join(root, "repo")
	o := Options{AgentsHome: "-"}
	s := newStepper(t, repo, o, nil)
	hi := agent.NewUserMessage("hi")

	if got := s.step(1, 1); len(got) != 0 {
		t.Fatal("an empty first step got a catalog")
	}
	got := s.step(1, 1, hi)
	if len(got) != 1 {
		t.Fatalf("%d catalogs, want 1", len(got))
	}
	text := got[0].Text()
	for _, w := range []string{"<system-reminder>", "<available_skills digest=", "- alpha: First skill.", "`skill` tool", "…"} {
		if !strings.Contains(text, w) {
			t.Errorf("catalog lacks %q:\n%s", w, text)
		}
	}
	if strings.Contains(text, "hidden") || strings.Count(text, "long") > 100 {
		t.Errorf("catalog shows a hidden skill or an untruncated description:\n%s", text)
	}
	if got[0].Role != llm.RoleUser || got[0].Source.Kind != "plugin" || got[0].Source.Form != "reminder" {
		t.Errorf("source %+v", got[0].Source)
	}
	if w := s.r.Warnings(); len(w) != 1 || !strings.HasSuffix(w[0].Path, "broken.md") {
		t.Errorf("warnings %v", w)
	}

	steps := []struct {
		name  string
		setup func()
		turn  int
		want  []string // nil: no catalog expected
	}{
		{name: "unchanged", turn: 1},
		{name: "unchanged next turn", turn: 2},
		{name: "added skill", turn: 2, setup: func() {
			write(t, filepath.Join(repo, ".dsh/skills/beta.md"), skill("beta", "Second skill.", "B"))
		}, want: []string{"- alpha:", "- beta: Second skill."}},
		{name: "unchanged after update", turn: 3},
		{name: "description changed", turn: 3, setup: func() {
			write(t, filepath.Join(repo, ".dsh/skills/beta.md"), skill("beta", "Better second skill.", "B"))
		}, want: []string{"- beta: Better second skill."}},
		{name: "all removed", turn: 4, setup: func() {
			os.RemoveAll(filepath.Join(repo, ".dsh"))
		}, want: []string{"No skills are available any more"}},
		{name: "still none", turn: 5},
	}
	for _, st := range steps {
		if st.setup != nil {
			st.setup()
		}
		got := s.step(st.turn, 2)
		if st.want == nil {
			if len(got) != 0 {
				t.Fatalf("%s: unexpected catalog:\n%s", st.name, got[0].Text())
			}
			continue
		}
		if len(got) != 1 {
			t.Fatalf("%s: %d catalogs, want 1", st.name, len(got))
		}
		for _, w := range st.want {
			if !strings.Contains(got[0].Text(), w) {
				t.Errorf("%s: catalog lacks %q:\n%s", st.name, w, got[0].Text())
			}
		}
	}
}

func TestReminderResumeAndCompaction(t *testing.T) {
	root := tree(t, map[string]string{"repo/.git/": "", "repo/.agents/skills/x.md": skill("x", "Do x.", "")})
	repo := filepath.Join(root, "repo")
	o := Options{AgentsHome: "-"}
	s := newStepper(t, repo, o, nil)
	if len(s.step(1, 1, agent.NewUserMessage("hi"))) != 1 {
		t.Fatal("no catalog")
	}
	resumed := newStepper(t, repo, o, s.log.Events())
	if got := resumed.step(2, 1, agent.NewUserMessage("again")); len(got) != 0 {
		t.Fatal("resumed session re-injected the catalog")
	}
	n := len(resumed.log.Messages())
	if _, err := resumed.log.Append(session.TypeUserMessage, agent.NewUserMessage("summary"), func(e *session.Event) {
		e.SurfaceOp = &session.SurfaceOp{Replace: true, Start: 0, End: n - 1}
	}); err != nil {
		t.Fatal(err)
	}
	if got := resumed.step(2, 2); len(got) != 1 {
		t.Fatal("catalog not restored after compaction dropped it")
	}
}

func TestReminderNoSkills(t *testing.T) {
	root := tree(t, map[string]string{"repo/": ""})
	s := newStepper(t, filepath.Join(root, "repo"), Options{AgentsHome: "-"}, nil)
	if got := s.step(1, 1, agent.NewUserMessage("hi")); len(got) != 0 {
		t.Fatal("catalog without skills")
	}
}
