package question

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/dsh-dev/dsh/internal/agent"
	"github.com/dsh-dev/dsh/internal/session"
	"github.com/dsh-dev/dsh/internal/tool"
)

func TestParseAskArgsErrors(t *testing.T) {
	opt := `"options":[{"label":"a"}]`
	for _, tc := range []struct{ args, want string }{
		{`[]`, "must be a JSON object"},
		{`{}`, "questions is required"},
		{`{"questions":[]}`, "questions is required"},
		{`{"questions":[{"id":"","question":"q",` + opt + `}]}`, "questions[0].id is required"},
		{`{"questions":[{"id":"a","question":"q",` + opt + `},{"id":"a","question":"r",` + opt + `}]}`, `questions[1].id "a" is used twice`},
		{`{"questions":[{"id":"a","question":" ",` + opt + `}]}`, "questions[0].question is required"},
		{`{"questions":[{"id":"a","question":"q","options":[]}]}`, "at least one option"},
		{`{"questions":[{"id":"a","question":"q"}]}`, "at least one option"},
		{`{"questions":[{"id":"a","question":"q","options":[{"label":""}]}]}`, "options[0].label is required"},
		{`{"questions":[{"id":"a","question":"q","options":[{"label":"x"},{"label":"X"}]}]}`, "used twice in that question"},
		{`{"questions":[{"id":"a","question":"q",` + opt + `,"extra":1}]}`, `unknown field "extra"`},
		{`{"questions":[{"id":1,"question":"q",` + opt + `}]}`, "must be a string"},
		{`{"questions":[{"id":"a","question":"q",` + opt + `,"multi_select":"yes"}]}`, "must be a boolean"},
		{`{"questions":[` + strings.Repeat(`{"id":"x","question":"q",`+opt+`},`, 8) + `{"id":"y","question":"q",` + opt + `}]}`, "at most 8"},
	} {
		_, err := ParseAskArgs(json.RawMessage(tc.args))
		var te *tool.Error
		if !errors.As(err, &te) || te.Code != tool.CodeInvalidArgs || !strings.Contains(te.Message, tc.want) {
			t.Errorf("%s: %v, want INVALID_ARGS with %q", tc.args, err, tc.want)
		}
	}
	items, err := ParseAskArgs(json.RawMessage(`{"questions":[{"id":" a ","question":"q?","header":"H","options":[{"label":" x ","description":"d"}],"multi_select":true}]}`))
	if err != nil {
		t.Fatal(err)
	}
	want := []Item{{ID: "a", Question: "q?", Header: "H", Options: []Option{{Label: "x", Description: "d"}}, MultiSelect: true}}
	if !reflect.DeepEqual(items, want) {
		t.Fatalf("items %+v", items)
	}
}

func TestCheckAnswers(t *testing.T) {
	r := Request{Kind: KindQuestion, Items: []Item{
		{ID: "one", Options: []Option{{Label: "Red"}, {Label: "Blue"}}},
		{ID: "many", MultiSelect: true, Options: []Option{{Label: "A"}, {Label: "B"}}},
	}}
	got, err := r.Check(Answer{Answers: map[string][]string{"one": {" red "}, "many": {"b", "A"}}})
	if err != nil || !reflect.DeepEqual(got.Answers, map[string][]string{"one": {"Red"}, "many": {"B", "A"}}) {
		t.Fatalf("good answer: %+v %v", got, err)
	}
	got, err = r.Check(Answer{Answers: map[string][]string{"one": {"green please"}, "many": {"neither"}}})
	if err != nil || got.Answers["one"][0] != "green please" {
		t.Fatalf("free text: %+v %v", got, err)
	}
	yes := true
	for _, bad := range []Answer{
		{},
		{Answers: map[string][]string{"one": {"Red"}}},
		{Answers: map[string][]string{"one": {"Red", "Blue"}, "many": {"A"}}},
		{Answers: map[string][]string{"one": {"Red"}, "many": {"A", "free"}}},
		{Answers: map[string][]string{"one": {"Red"}, "many": {"A"}, "other": {"A"}}},
		{Answers: map[string][]string{"one": {"Red"}, "many": {"A"}}, Approve: &yes},
		{Answers: map[string][]string{"one": {strings.Repeat("x", MaxFreeText+1)}, "many": {"A"}}},
	} {
		var ae *AnswerError
		if _, err := r.Check(bad); !errors.As(err, &ae) || ae.Code() != CodeInvalidAnswer {
			t.Errorf("%+v: %v", bad, err)
		}
	}
	plan := Request{Kind: KindPlan, Plan: "# p"}
	if _, err := plan.Check(Answer{Feedback: "x"}); err == nil {
		t.Error("plan without approve accepted")
	}
	if _, err := plan.Check(Answer{Approve: &yes, Answers: map[string][]string{"a": {"b"}}}); err == nil {
		t.Error("plan with answers accepted")
	}
	if got, err := plan.Check(Answer{Approve: &yes, Feedback: " fine "}); err != nil || got.Feedback != "fine" {
		t.Errorf("plan approve: %+v %v", got, err)
	}
}

// fakeTerm answers reads from a list of lines, recording the prompts.
type fakeTerm struct {
	lines   []string
	prompts []string
}

func (f *fakeTerm) Converse(ctx context.Context, fn func(read func(string) (string, error)) error) error {
	return fn(func(p string) (string, error) {
		f.prompts = append(f.prompts, p)
		if len(f.lines) == 0 {
			return "", errors.New("input closed")
		}
		l := f.lines[0]
		f.lines = f.lines[1:]
		return l, nil
	})
}

func TestTerminalAsker(t *testing.T) {
	items := []Item{
		{ID: "one", Question: "Colour?\x1b[2J", Options: []Option{{Label: "Red", Description: "warm"}, {Label: "Blue"}}},
		{ID: "many", Question: "Letters?", MultiSelect: true, Options: []Option{{Label: "A"}, {Label: "B"}, {Label: "C"}}},
	}
	ft := &fakeTerm{lines: []string{"", "1 2", "blue\n", "3,1\n"}}
	a, err := Terminal{Term: ft}.Ask(t.Context(), Request{Kind: KindQuestion, Items: items})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(a.Answers, map[string][]string{"one": {"Blue"}, "many": {"C", "A"}}) {
		t.Fatalf("answers %+v", a.Answers)
	}
	all := strings.Join(ft.prompts, "")
	if strings.Contains(all, "\x1b") || !strings.Contains(all, "1. Red — warm") || !strings.Contains(all, "Choose one option.") ||
		!strings.Contains(all, "(1 of 2)") || !strings.Contains(all, "one or more numbers") {
		t.Fatalf("prompts:\n%s", all)
	}
	a, err = Terminal{Term: &fakeTerm{lines: []string{"Purple, obviously", "2"}}}.Ask(t.Context(), Request{Kind: KindQuestion, Items: items})
	if err != nil || a.Answers["one"][0] != "Purple, obviously" || a.Answers["many"][0] != "B" {
		t.Fatalf("free text: %+v %v", a, err)
	}
	for line, want := range map[string]Answer{"y": {Approve: ptr(true)}, "no": {Approve: ptr(false)}, "add tests first": {Approve: ptr(false), Feedback: "add tests first"}} {
		a, err := Terminal{Term: &fakeTerm{lines: []string{line}}}.Ask(t.Context(), Request{Kind: KindPlan, Plan: "# P"})
		if err != nil || *a.Approve != *want.Approve || a.Feedback != want.Feedback {
			t.Errorf("plan %q: %+v %v", line, a, err)
		}
	}
	if _, err := (Terminal{Term: &fakeTerm{}}).Ask(t.Context(), Request{Kind: KindQuestion, Items: items}); err == nil {
		t.Error("closed input gave an answer")
	}
	stuck := &fakeTerm{lines: []string{"9", "9", "9", "9", "9", "9", "9"}}
	if _, err := (Terminal{Term: stuck}).Ask(t.Context(), Request{Kind: KindQuestion, Items: items}); err == nil || len(stuck.prompts) != maxRetries+1 {
		t.Errorf("stuck input: %v after %d prompts", err, len(stuck.prompts))
	}
}

func ptr[T any](v T) *T { return &v }

func newLog(t *testing.T) *session.Log {
	t.Helper()
	l, err := session.NewLog(session.Header{Version: session.FormatVersion, ID: "s", Cwd: "/tmp"}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func decide(m *Mode, name, args string) tool.Decision {
	c := &tool.Call{Name: name, Arguments: json.RawMessage(args)}
	return m.PreExecute(context.Background(), c, func(context.Context) tool.Decision { return tool.Decision{Kind: tool.Allow} })
}

func TestPlanModeRefusals(t *testing.T) {
	log := newLog(t)
	m := NewMode(log, []string{"my_reader"})
	if d := decide(m, "write", `{}`); d.Kind != tool.Allow {
		t.Fatalf("plan mode off refused: %+v", d)
	}
	if m.RuntimeSection().Render() != "" {
		t.Fatal("a session without plan mode renders the section")
	}
	if err := m.Set(true, SourceUser); err != nil || !m.Active() {
		t.Fatalf("set: %v", err)
	}
	if err := m.Set(true, SourceUser); err != nil || len(log.Events()) != 1 {
		t.Fatalf("setting the same mode logged again: %d events", len(log.Events()))
	}
	for _, tc := range []struct {
		name, args string
		refused    bool
	}{
		{"write", `{"file_path":"x"}`, true},
		{"edit", `{}`, true},
		{"subagent", `{}`, true},
		{"mcp__srv__tool", `{}`, true},
		{"str_replace_based_edit_tool", `{"command":"str_replace"}`, true},
		{"str_replace_based_edit_tool", `{"command":"view","path":"x"}`, false},
		{"bash", `{"command":"ls"}`, false},
		{"bash", `{"command":"rm x","sandbox_permissions":"workspace-write","justification":"j"}`, true},
		{"read", `{}`, false},
		{"my_reader", `{}`, false},
		{AskName, `{}`, false},
		{ExitName, `{}`, false},
	} {
		d := decide(m, tc.name, tc.args)
		if refused := d.Kind == tool.Deny; refused != tc.refused || refused && (d.Info == nil || d.Info.Code != CodePlanModeActive) {
			t.Errorf("%s %s: %+v", tc.name, tc.args, d)
		}
	}
	if !strings.Contains(m.RuntimeSection().Render(), "Plan mode is on") {
		t.Fatal("policy not rendered")
	}
	// A change asked while a turn runs waits for the step boundary.
	busy := true
	m.SetBusy(func() bool { return busy })
	if err := m.Set(false, SourcePlanApproved); err != nil || !m.Active() {
		t.Fatalf("changed mid-turn: %v", err)
	}
	if _, _, err := m.PreStep(t.Context(), agent.PreStep{}); err != nil || m.Active() {
		t.Fatalf("not applied at the step boundary: %v", err)
	}
	if !strings.Contains(m.RuntimeSection().Render(), "Plan mode is off") {
		t.Fatal("off text not rendered")
	}
	if d := decide(m, "write", `{}`); d.Kind != tool.Allow {
		t.Fatalf("refused after plan mode: %+v", d)
	}
}
