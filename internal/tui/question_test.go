package tui

import (
	"reflect"
	"strings"
	"testing"

	"github.com/dsh-dev/dsh/internal/host"
	"github.com/dsh-dev/dsh/internal/session"
)

func dbQuestion() host.Question {
	return host.Question{ID: "q-1", SessionID: "sess-1", CallID: "call-1", Kind: "question", Questions: []host.QuestionItem{
		{ID: "db", Header: "Database", Question: "Which database should the service use?", Options: []host.QuestionOption{
			{Label: "Postgres", Description: "relational, runs as its own server"}, {Label: "SQLite", Description: "embedded in the binary"}}},
		{ID: "checks", Header: "Checks", Question: "Which checks should run in CI?", MultiSelect: true, Options: []host.QuestionOption{
			{Label: "unit tests"}, {Label: "race detector"}, {Label: "linters"}}},
	}}
}

func TestQuestionPanelSingleAndMultiSelect(t *testing.T) {
	h := newHarness(t, 100, 30)
	h.send(questionsMsg{list: []host.Question{dbQuestion()}})
	v := h.live()
	for _, want := range []string{"dsh asks", "Database", "Which database should the service use?", "○ 1. Postgres",
		"relational, runs as its own server", "Other: type your own answer", "answer the question above"} {
		if !strings.Contains(v, want) {
			t.Errorf("panel lacks %q:\n%s", want, v)
		}
	}
	// A digit picks an option of a single-select item and goes on.
	h.key("2")
	v = h.live()
	if !strings.Contains(v, "Which checks should run in CI?") || !strings.Contains(v, "✓ Database") {
		t.Fatalf("the panel did not go on to the second item:\n%s", v)
	}
	// Space toggles; a second toggle takes a choice back.
	h.key(" ")
	h.key("down")
	h.key(" ")
	h.key("down")
	h.key(" ")
	h.key(" ")
	if v := h.live(); !strings.Contains(v, "[x] 1. unit tests") || !strings.Contains(v, "[x] 2. race detector") || !strings.Contains(v, "[ ] 3. linters") {
		t.Errorf("toggles:\n%s", v)
	}
	h.key("enter")
	if len(h.b.qanswers) != 1 {
		t.Fatalf("%d answers sent", len(h.b.qanswers))
	}
	got := h.b.qanswers[0]
	want := map[string][]string{"db": {"SQLite"}, "checks": {"unit tests", "race detector"}}
	if got.id != "q-1" || !reflect.DeepEqual(got.a.Answers, want) {
		t.Errorf("answer %s %v, want %v", got.id, got.a.Answers, want)
	}
	if h.m.asking != nil || strings.Contains(h.live(), "dsh asks") {
		t.Error("the panel stayed after the answer")
	}
}

func TestQuestionOtherAnswerAndFeedResolution(t *testing.T) {
	h := newHarness(t, 80, 30)
	q := dbQuestion()
	q.Questions = q.Questions[:1]
	h.send(questionsMsg{list: []host.Question{q}})
	h.key("up") // wraps to "Other"
	h.typeText("CockroachDB 2")
	if v := h.live(); !strings.Contains(v, "› Other: CockroachDB 2▏") {
		t.Fatalf("typing on Other:\n%s", v)
	}
	h.key("enter")
	if len(h.b.qanswers) != 1 || !reflect.DeepEqual(h.b.qanswers[0].a.Answers, map[string][]string{"db": {"CockroachDB 2"}}) {
		t.Fatalf("answers %+v", h.b.qanswers)
	}
	// A question another client answered leaves through the feed.
	h.send(questionsMsg{list: []host.Question{{ID: "q-2", SessionID: "sess-1", Kind: "question", Questions: q.Questions}}})
	if h.m.asking == nil {
		t.Fatal("no panel for the second question")
	}
	h.m.onFeed(feedMsg{events: []host.FeedEvent{{Type: host.FeedQuestionResolved, SessionID: "sess-1", ID: "q-2"}}})
	if h.m.asking != nil {
		t.Error("a resolved question kept its panel")
	}
	// Another session's question is not this UI's to answer.
	h.send(questionsMsg{list: []host.Question{{ID: "q-3", SessionID: "other", Kind: "question", Questions: q.Questions}}})
	if h.m.asking != nil {
		t.Error("the UI shows a question of a session it does not drive")
	}
}

func TestPlanReviewApproveAndKeepPlanning(t *testing.T) {
	h := newHarness(t, 90, 30)
	plan := "# Plan\n\n1. add the `--plan` flag\n2. refuse writes while planning\n3. test it"
	h.send(questionsMsg{list: []host.Question{{ID: "p-1", SessionID: "sess-1", Kind: "plan", Plan: plan}}})
	v := h.live()
	for _, want := range []string{"Plan ready for review", "1. add the --plan flag", "› Approve", "Keep planning", "y approve"} {
		if !strings.Contains(v, want) {
			t.Errorf("plan panel lacks %q:\n%s", want, v)
		}
	}
	h.key("n")
	h.typeText("also cover the web UI")
	h.key("enter")
	if len(h.b.qanswers) != 1 {
		t.Fatalf("%d answers", len(h.b.qanswers))
	}
	a := h.b.qanswers[0].a
	if a.Approve == nil || *a.Approve || a.Feedback != "also cover the web UI" {
		t.Errorf("keep planning sent %+v", a)
	}
	h.send(questionsMsg{list: []host.Question{{ID: "p-2", SessionID: "sess-1", Kind: "plan", Plan: plan}}})
	h.key("enter") // Approve is focused
	if a := h.b.qanswers[1].a; a.Approve == nil || !*a.Approve || a.Feedback != "" {
		t.Errorf("approve sent %+v", a)
	}
}

func TestPlanModeCommandAndStatusLine(t *testing.T) {
	h := newHarness(t, 100, 24)
	h.typeText("/plan")
	h.key("enter")
	if !reflect.DeepEqual(h.b.plans, []bool{true}) {
		t.Fatalf("/plan asked for %v", h.b.plans)
	}
	if strings.Contains(h.live(), "PLAN") {
		t.Error("PLAN shows before the log says so")
	}
	h.ev(typePlanMode, planModeChanged{Active: true, Source: "user"})
	if v := h.live(); !strings.Contains(v, " PLAN  ") {
		t.Errorf("the status line does not show PLAN:\n%s", v)
	}
	if tr := h.transcript(); !strings.Contains(tr, "◇ plan mode on") {
		t.Errorf("no plan-mode notice:\n%s", tr)
	}
	h.typeText("/plan")
	h.key("enter")
	h.ev(typePlanMode, planModeChanged{Active: false, Source: "plan-approved"})
	if !reflect.DeepEqual(h.b.plans, []bool{true, false}) || strings.Contains(h.live(), "PLAN") {
		t.Errorf("second /plan: %v\n%s", h.b.plans, h.live())
	}
	if tr := h.transcript(); !strings.Contains(tr, "◇ plan approved: plan mode off") {
		t.Errorf("no plan-approved notice:\n%s", tr)
	}
	h.typeText("/plan sideways")
	h.key("enter")
	if tr := h.transcript(); !strings.Contains(tr, "/plan takes on or off") {
		t.Errorf("a bad /plan argument is not refused:\n%s", tr)
	}
}

func TestAnsweredQuestionInTheTranscript(t *testing.T) {
	h := newHarness(t, 100, 30)
	h.startTurn()
	h.ev(session.TypeToolCall, session.ToolCall{CallID: "call-1", Name: toolAskUser, Arguments: `{}`})
	h.ev(typeQuestionAsk, map[string]any{"questionId": "q-1", "callId": "call-1", "kind": "question", "questions": dbQuestion().Questions})
	h.ev(typeQuestionAnswer, questionAnswered{QuestionID: "q-1", Status: "answered", Answers: map[string][]string{"db": {"SQLite"}, "checks": {"linters"}}})
	h.ev(session.TypeToolResult, session.ToolResult{CallID: "call-1", Name: toolAskUser})
	h.ev(session.TypeToolCall, session.ToolCall{CallID: "call-2", Name: toolExitPlan, Arguments: `{}`})
	h.ev(typeQuestionAsk, questionAsked{QuestionID: "p-1", CallID: "call-2", Kind: "plan", Plan: "1. first step\n2. second step"})
	no := false
	h.ev(typeQuestionAnswer, questionAnswered{QuestionID: "p-1", Status: "answered", Approved: &no, Feedback: "split step two"})
	h.ev(session.TypeToolResult, session.ToolResult{CallID: "call-2", Name: toolExitPlan})
	tr := h.transcript()
	for _, want := range []string{"? Database · Which database should the service use?", "⎿ SQLite", "⎿ linters",
		"◇ Plan ↺ kept planning", "│ 1. first step", "⎿ feedback: split step two"} {
		if !strings.Contains(tr, want) {
			t.Errorf("transcript lacks %q:\n%s", want, tr)
		}
	}
	if strings.Contains(tr, toolAskUser) || strings.Contains(tr, toolExitPlan) {
		t.Errorf("the question's tool rows were printed too:\n%s", tr)
	}
}

func TestQuestionGoldenFrames(t *testing.T) {
	h := newHarness(t, 80, 26)
	h.startTurn()
	h.ev(typePlanMode, planModeChanged{Active: true, Source: "user"})
	h.send(questionsMsg{list: []host.Question{dbQuestion()}})
	golden(t, "question-80", frameOf(h))
	h = newHarness(t, 80, 26)
	h.startTurn()
	h.send(questionsMsg{list: []host.Question{{ID: "p-1", SessionID: "sess-1", Kind: "plan",
		Plan: "## Plan\n\nAdd plan mode to the TUI:\n\n1. a `/plan` command\n2. a **PLAN** badge on the status line\n3. the review panel\n\n```go\nfunc planRows() int\n```\n\n- tests in tmux\n- goldens\n- docs\n- README"}}})
	golden(t, "plan-80", frameOf(h))
}

// TestQuestionPanelsNeverPanic draws the panels at widths and heights
// down to the smallest, with long texts and many options.
func TestQuestionPanelsNeverPanic(t *testing.T) {
	long := strings.Repeat("a long question text ", 20)
	var many []host.QuestionOption
	for i := range 16 {
		many = append(many, host.QuestionOption{Label: strings.Repeat("label ", i+1), Description: long})
	}
	qs := []host.Question{
		{ID: "q", SessionID: "sess-1", Kind: "question", Questions: []host.QuestionItem{{ID: "a", Header: long, Question: long, Options: many, MultiSelect: true}, {ID: "b", Question: "free text only"}}},
		{ID: "p", SessionID: "sess-1", Kind: "plan", Plan: strings.Repeat("- step\n", 200)},
		{ID: "e", SessionID: "sess-1", Kind: "question"},
	}
	for _, w := range []int{200, 80, 40, 20, 1} {
		for _, q := range qs {
			h := newHarness(t, w, 10)
			h.send(questionsMsg{list: []host.Question{q}})
			for _, k := range []string{"down", "up", " ", "9", "tab", "x", "pgdown", "enter"} {
				h.key(k)
				for _, l := range strings.Split(h.view(), "\n") {
					if lw := len([]rune(l)); lw > 4*max(h.m.width, 20) {
						t.Errorf("width %d: runaway line of %d runes", w, lw)
					}
				}
			}
		}
	}
}

// TestEscAtAQuestionCancelsTheTurn: Esc (or Ctrl-C) at the panel cancels
// the turn, as at an approval; the host then resolves the question
// cancelled and the feed takes the panel away.
func TestEscAtAQuestionCancelsTheTurn(t *testing.T) {
	h := newHarness(t, 80, 24)
	h.startTurn()
	h.send(questionsMsg{list: []host.Question{dbQuestion()}})
	h.key("esc")
	h.key("ctrl+c")
	if h.b.cancels != 2 || len(h.b.qanswers) != 0 {
		t.Fatalf("%d cancels, %d answers", h.b.cancels, len(h.b.qanswers))
	}
	h.m.onFeed(feedMsg{events: []host.FeedEvent{{Type: host.FeedQuestionResolved, SessionID: "sess-1", ID: "q-1", Status: "cancelled"}}})
	if h.m.asking != nil || !strings.Contains(h.live(), "Ask dsh") {
		t.Errorf("the panel stayed after the cancellation:\n%s", h.live())
	}
}
