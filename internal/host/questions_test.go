package host_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/dsh-dev/dsh/internal/host"
	"github.com/dsh-dev/dsh/internal/llm/llmtest"
	"github.com/dsh-dev/dsh/internal/session"
	"github.com/dsh-dev/dsh/internal/tools/question"
)

func askCall(questions ...map[string]any) llmtest.ToolCall {
	b, _ := json.Marshal(map[string]any{"questions": questions})
	return llmtest.ToolCall{Name: question.AskName, Arguments: string(b)}
}

func exitCall(plan string) llmtest.ToolCall {
	b, _ := json.Marshal(map[string]string{"plan": plan})
	return llmtest.ToolCall{Name: question.ExitName, Arguments: string(b)}
}

func bashCall(cmd string) llmtest.ToolCall {
	b, _ := json.Marshal(map[string]string{"command": cmd})
	return llmtest.ToolCall{Name: "bash", Arguments: string(b)}
}

var (
	dbQuestion = map[string]any{"id": "db", "question": "Which database?", "header": "Database",
		"options": []map[string]string{{"label": "SQLite", "description": "embedded"}, {"label": "Postgres"}}}
	langQuestion = map[string]any{"id": "langs", "question": "Which languages?", "multi_select": true,
		"options": []map[string]string{{"label": "Go"}, {"label": "Rust"}, {"label": "Zig"}}}
)

// toolResults decodes the session's tool results in log order.
func toolResults(t *testing.T, f *fixture, id string) []session.ToolResult {
	t.Helper()
	events, _, err := f.h.Events(t.Context(), id, -1, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []session.ToolResult
	for _, e := range events {
		if e.Type != session.TypeToolResult {
			continue
		}
		var r session.ToolResult
		if err := e.Decode(&r); err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	return out
}

func resultText(r session.ToolResult) string {
	var b strings.Builder
	for _, c := range r.Content {
		b.WriteString(c.Text)
	}
	return b.String()
}

func answersOf(t *testing.T, f *fixture, id string) []question.Answered {
	t.Helper()
	events, _, err := f.h.Events(t.Context(), id, -1, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []question.Answered
	for _, e := range events {
		if e.Type == session.TypeQuestionAnswer {
			var a question.Answered
			if err := e.Decode(&a); err != nil {
				t.Fatal(err)
			}
			out = append(out, a)
		}
	}
	return out
}

// TestQuestionAnsweredThroughHost: a form waits in the host's queue
// (status awaiting-approval, Info and Questions list it, a new feed
// subscriber still finds it), bad answers are refused with
// QUESTION_INVALID_ANSWER and leave it pending, the first good answer
// wins (QUESTION_NOT_PENDING after), and the model reads the answers.
func TestQuestionAnsweredThroughHost(t *testing.T) {
	f := newFixture(t, host.Config{})
	feed := f.h.Subscribe()
	defer feed.Close()
	f.srv.Enqueue(llmtest.Response{ToolCalls: []llmtest.ToolCall{askCall(dbQuestion, langQuestion)}}, llmtest.Response{Text: "noted"})
	info := f.create(host.CreateRequest{})
	id := info.Header.ID
	f.send(id, "ask me", host.DeliveryQueue)
	ev := nextFeed(t, feed, feedType(host.FeedQuestion))
	q := ev.Question
	if q == nil || ev.SessionID != id || q.Kind != host.QuestionKindQuestion || len(q.Questions) != 2 || q.Questions[1].ID != "langs" || !q.Questions[1].MultiSelect {
		t.Fatalf("question event %+v", ev)
	}
	if q.Questions[0].Options[0] != (host.QuestionOption{Label: "SQLite", Description: "embedded"}) {
		t.Fatalf("options %+v", q.Questions[0].Options)
	}
	// A client that reconnects finds it again.
	feed.Close()
	if all := f.h.Questions(""); len(all) != 1 || all[0].ID != q.ID {
		t.Fatalf("Questions() = %+v", all)
	}
	got, err := f.h.Get(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != host.StatusAwaitingApproval || len(got.PendingQuestions) != 1 || got.PendingQuestions[0].ID != q.ID {
		t.Fatalf("while asking: %s %+v", got.Status, got.PendingQuestions)
	}
	feed = f.h.Subscribe()
	defer feed.Close()

	for _, bad := range []host.QuestionAnswer{
		{Answers: map[string][]string{"db": {"SQLite"}}},                                             // langs unanswered
		{Answers: map[string][]string{"db": {"SQLite"}, "langs": {"Go"}, "x": {"y"}}},                // unknown id
		{Answers: map[string][]string{"db": {"SQLite", "Postgres"}, "langs": {"Go"}}},                // two for single choice
		{Answers: map[string][]string{"db": {"SQLite"}, "langs": {"Go", "something else"}}},          // labels and free text
		{Answers: map[string][]string{"db": {"SQLite"}, "langs": {"Go"}}, Approve: new(bool)},        // plan field
		{Answers: map[string][]string{"db": {" "}, "langs": {"Go"}}},                                 // empty entry
		{Answers: map[string][]string{"db": {"sqlite", "SQLite"}, "langs": {"Go"}}},                  // twice
		{Answers: map[string][]string{"db": {"SQLite"}, "langs": {"free one", "free two"}}},          // two free texts
		{Answers: map[string][]string{"db": {"SQLite"}, "langs": {}}},                                // none
		{Answers: map[string][]string{"db": {"SQLite"}, "langs": {"Go"}}, Feedback: "not for forms"}, // feedback
	} {
		if err := f.h.AnswerQuestion(t.Context(), id, q.ID, bad); host.ErrorCode(err) != host.CodeQuestionInvalidAnswer {
			t.Fatalf("answer %+v: %v", bad, err)
		}
	}
	if len(f.h.Questions(id)) != 1 {
		t.Fatal("a bad answer resolved the question")
	}
	if err := f.h.AnswerQuestion(t.Context(), id, q.ID, host.QuestionAnswer{Answers: map[string][]string{
		"db": {"postgres"}, "langs": {"Go", "Zig"},
	}}); err != nil {
		t.Fatal(err)
	}
	if err := f.h.AnswerQuestion(t.Context(), id, q.ID, host.QuestionAnswer{Answers: map[string][]string{"db": {"SQLite"}, "langs": {"Go"}}}); host.ErrorCode(err) != host.CodeQuestionNotPending {
		t.Fatalf("second answer: %v", err)
	}
	if err := f.h.AnswerQuestion(t.Context(), id, "no-such-question", host.QuestionAnswer{}); host.ErrorCode(err) != host.CodeQuestionNotFound {
		t.Fatalf("unknown question: %v", err)
	}
	res := nextFeed(t, feed, feedType(host.FeedQuestionResolved))
	if res.ID != q.ID || res.Status != host.QuestionAnswered {
		t.Fatalf("question-resolved %+v", res)
	}
	out, err := f.h.RunUntilIdle(t.Context(), id)
	if err != nil || out.Text != "noted" {
		t.Fatalf("run: %+v, %v", out, err)
	}
	rs := toolResults(t, f, id)
	if len(rs) != 1 || rs[0].IsError || !strings.Contains(resultText(rs[0]), "db (Which database?): Postgres") ||
		!strings.Contains(resultText(rs[0]), "langs (Which languages?): Go, Zig") {
		t.Fatalf("tool result %+v", rs)
	}
	as := answersOf(t, f, id)
	if len(as) != 1 || as[0].Status != question.StatusAnswered || !reflect.DeepEqual(as[0].Answers["langs"], []string{"Go", "Zig"}) || as[0].QuestionID != q.ID {
		t.Fatalf("question/answer %+v", as)
	}
	body, _ := json.Marshal(f.srv.Requests()[1].Messages())
	if !strings.Contains(string(body), "Postgres") {
		t.Fatalf("the model did not read the answer: %s", body)
	}
}

// TestQuestionFreeText: one typed entry is an answer in the user's words.
func TestQuestionFreeText(t *testing.T) {
	f := newFixture(t, host.Config{})
	feed := f.h.Subscribe()
	defer feed.Close()
	f.srv.Enqueue(llmtest.Response{ToolCalls: []llmtest.ToolCall{askCall(dbQuestion)}}, llmtest.Response{Text: "ok"})
	info := f.create(host.CreateRequest{})
	f.send(info.Header.ID, "ask me", host.DeliveryQueue)
	q := nextFeed(t, feed, feedType(host.FeedQuestion)).Question
	if err := f.h.AnswerQuestion(t.Context(), info.Header.ID, q.ID, host.QuestionAnswer{Answers: map[string][]string{"db": {"DuckDB, please"}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.h.RunUntilIdle(t.Context(), info.Header.ID); err != nil {
		t.Fatal(err)
	}
	if rs := toolResults(t, f, info.Header.ID); len(rs) != 1 || !strings.Contains(resultText(rs[0]), `in their own words: "DuckDB, please"`) {
		t.Fatalf("tool result %+v", rs)
	}
}

// TestQuestionCancelledWithTurn: cancelling the turn resolves a pending
// question cancelled (feed, log); answering it then is QUESTION_NOT_PENDING.
func TestQuestionCancelledWithTurn(t *testing.T) {
	f := newFixture(t, host.Config{})
	feed := f.h.Subscribe()
	defer feed.Close()
	f.srv.Enqueue(llmtest.Response{ToolCalls: []llmtest.ToolCall{askCall(dbQuestion)}})
	info := f.create(host.CreateRequest{})
	id := info.Header.ID
	f.send(id, "ask me", host.DeliveryQueue)
	q := nextFeed(t, feed, feedType(host.FeedQuestion)).Question
	if err := f.h.Cancel(t.Context(), id, false); err != nil {
		t.Fatal(err)
	}
	res := nextFeed(t, feed, feedType(host.FeedQuestionResolved))
	if res.ID != q.ID || res.Status != host.QuestionCancelled {
		t.Fatalf("question-resolved %+v", res)
	}
	if _, err := f.h.RunUntilIdle(t.Context(), id); err != nil {
		t.Fatal(err)
	}
	if len(f.h.Questions("")) != 0 {
		t.Fatal("the cancelled question is still pending")
	}
	if err := f.h.AnswerQuestion(t.Context(), id, q.ID, host.QuestionAnswer{Answers: map[string][]string{"db": {"SQLite"}}}); host.ErrorCode(err) != host.CodeQuestionNotPending {
		t.Fatalf("answer after cancel: %v", err)
	}
	if as := answersOf(t, f, id); len(as) != 1 || as[0].Status != question.StatusCancelled {
		t.Fatalf("question/answer %+v", as)
	}
}

// TestQuestionUnavailableHeadless: with nobody to ask (a headless session,
// a headless host) the call fails at once with QUESTION_UNAVAILABLE.
func TestQuestionUnavailableHeadless(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  host.Config
		req  host.CreateRequest
	}{
		{"request", host.Config{}, host.CreateRequest{Headless: true}},
		{"host", host.Config{Headless: true}, host.CreateRequest{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, tc.cfg)
			f.srv.Enqueue(llmtest.Response{ToolCalls: []llmtest.ToolCall{askCall(dbQuestion)}}, llmtest.Response{Text: "I chose SQLite"})
			info := f.create(tc.req)
			f.send(info.Header.ID, "ask me", host.DeliveryQueue)
			out, err := f.h.RunUntilIdle(t.Context(), info.Header.ID)
			if err != nil || out.Text != "I chose SQLite" {
				t.Fatalf("run: %+v, %v", out, err)
			}
			rs := toolResults(t, f, info.Header.ID)
			if len(rs) != 1 || !rs[0].IsError || rs[0].Error == nil || rs[0].Error.Code != question.CodeUnavailable {
				t.Fatalf("tool result %+v", rs)
			}
			if as := answersOf(t, f, info.Header.ID); len(as) != 1 || as[0].Status != question.StatusUnavailable {
				t.Fatalf("question/answer %+v", as)
			}
		})
	}
}

// TestPlanModeFlow: a session started in plan mode refuses a write
// (PLAN_MODE_ACTIVE) and runs bash read-only; exit_plan_mode puts the
// plan to the person: keep planning returns the feedback and stays in
// plan mode, approve leaves plan mode at the step boundary, after which
// the write runs. The system prompt and the tool list never change; the
// mode reaches the model in runtime-context snapshots.
func TestPlanModeFlow(t *testing.T) {
	needSandbox(t)
	f := newFixture(t, host.Config{})
	feed := f.h.Subscribe()
	defer feed.Close()
	file := filepath.Join(f.cwd, "out.txt")
	bashFile := filepath.Join(f.cwd, "bash.txt")
	f.srv.Enqueue(
		llmtest.Response{ToolCalls: []llmtest.ToolCall{writeCall(file, "early\n")}},
		llmtest.Response{ToolCalls: []llmtest.ToolCall{bashCall("echo hi > " + bashFile + "; echo read-ok")}},
		llmtest.Response{ToolCalls: []llmtest.ToolCall{exitCall("# Plan\n1. write out.txt")}},
		llmtest.Response{ToolCalls: []llmtest.ToolCall{exitCall("# Plan v2\n1. write out.txt with care")}},
		llmtest.Response{ToolCalls: []llmtest.ToolCall{writeCall(file, "planned\n")}},
		llmtest.Response{Text: "done"},
	)
	info := f.create(host.CreateRequest{PlanMode: true})
	id := info.Header.ID
	if !info.PlanMode {
		t.Fatal("created in plan mode, Info.PlanMode false")
	}
	f.send(id, "plan then write", host.DeliveryQueue)

	plan := nextFeed(t, feed, feedType(host.FeedQuestion)).Question
	if plan.Kind != host.QuestionKindPlan || plan.Plan != "# Plan\n1. write out.txt" {
		t.Fatalf("plan question %+v", plan)
	}
	if err := f.h.AnswerQuestion(t.Context(), id, plan.ID, host.QuestionAnswer{Answers: map[string][]string{"x": {"y"}}}); host.ErrorCode(err) != host.CodeQuestionInvalidAnswer {
		t.Fatalf("answers for a plan: %v", err)
	}
	no, yes := false, true
	if err := f.h.AnswerQuestion(t.Context(), id, plan.ID, host.QuestionAnswer{Approve: &no, Feedback: "say with care"}); err != nil {
		t.Fatal(err)
	}
	plan2 := nextFeed(t, feed, func(e host.FeedEvent) bool { return e.Type == host.FeedQuestion && e.Question.ID != plan.ID }).Question
	if got, _ := f.h.Get(t.Context(), id); !got.PlanMode {
		t.Fatal("keep planning left plan mode")
	}
	if err := f.h.AnswerQuestion(t.Context(), id, plan2.ID, host.QuestionAnswer{Approve: &yes}); err != nil {
		t.Fatal(err)
	}
	if ev := nextFeed(t, feed, feedType(host.FeedPlanMode)); ev.SessionID != id || ev.Active == nil || *ev.Active {
		t.Fatalf("plan-mode event %+v", ev)
	}
	out, err := f.h.RunUntilIdle(t.Context(), id)
	if err != nil || out.Text != "done" {
		t.Fatalf("run: %+v, %v", out, err)
	}
	rs := toolResults(t, f, id)
	if len(rs) != 5 {
		t.Fatalf("%d tool results: %+v", len(rs), rs)
	}
	if !rs[0].IsError || rs[0].Error == nil || rs[0].Error.Code != question.CodePlanModeActive {
		t.Fatalf("write in plan mode: %+v", rs[0])
	}
	if txt := resultText(rs[1]); rs[1].IsError || !strings.Contains(txt, "read-ok") {
		t.Fatalf("bash in plan mode: %s", txt)
	}
	if fileExists(bashFile) {
		t.Fatal("bash wrote a file in plan mode")
	}
	if txt := resultText(rs[2]); rs[2].IsError || !strings.Contains(txt, "keep planning") || !strings.Contains(txt, "say with care") {
		t.Fatalf("keep planning: %+v", rs[2])
	}
	if txt := resultText(rs[3]); rs[3].IsError || !strings.Contains(txt, "approved") {
		t.Fatalf("approve: %+v", rs[3])
	}
	if rs[4].IsError {
		t.Fatalf("write after approval: %+v", rs[4])
	}
	if b, err := os.ReadFile(file); err != nil || string(b) != "planned\n" {
		t.Fatalf("file: %q, %v", b, err)
	}
	if got, _ := f.h.Get(t.Context(), id); got.PlanMode {
		t.Fatal("still in plan mode after approval")
	}
	// The plan/mode change sits between the approving step and the next.
	events, _, _ := f.h.Events(t.Context(), id, -1, 0)
	var modes []question.PlanMode
	for _, e := range events {
		if e.Type == session.TypePlanMode {
			var p question.PlanMode
			_ = e.Decode(&p)
			modes = append(modes, p)
		}
	}
	if len(modes) != 2 || !modes[0].Active || modes[0].Source != question.SourceUser || modes[1].Active || modes[1].Source != question.SourcePlanApproved {
		t.Fatalf("plan/mode events %+v", modes)
	}
	reqs := f.srv.Requests()
	first, _ := json.Marshal(reqs[0].Messages()[0])
	for i, r := range reqs {
		if sys, _ := json.Marshal(r.Messages()[0]); string(sys) != string(first) {
			t.Fatalf("request %d changed the system prompt", i)
		}
		if !reflect.DeepEqual(r.ToolNames(), reqs[0].ToolNames()) {
			t.Fatalf("request %d changed the tool list: %v", i, r.ToolNames())
		}
	}
	b0, _ := json.Marshal(reqs[0].Messages())
	last, _ := json.Marshal(reqs[len(reqs)-1].Messages())
	if !strings.Contains(string(b0), "Plan mode is on") || !strings.Contains(string(b0), "read-only while plan mode is on") ||
		!strings.Contains(string(last), "Plan mode is off") || !strings.Contains(string(last), "Sandbox mode: workspace-write") {
		t.Fatalf("the runtime context did not carry the mode:\nfirst %s\nlast %s", b0, last)
	}
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// TestExitPlanModeOutsidePlanMode: the tool stays offered and refuses with
// PLAN_MODE_INACTIVE; invalid arguments to either tool are INVALID_ARGS
// and ask nobody.
func TestExitPlanModeOutsidePlanMode(t *testing.T) {
	f := newFixture(t, host.Config{})
	f.srv.Enqueue(
		llmtest.Response{ToolCalls: []llmtest.ToolCall{exitCall("# Plan")}},
		llmtest.Response{ToolCalls: []llmtest.ToolCall{exitCall(" ")}},
		llmtest.Response{ToolCalls: []llmtest.ToolCall{askCall(dbQuestion, dbQuestion)}},
		llmtest.Response{Text: "ok"})
	info := f.create(host.CreateRequest{})
	f.send(info.Header.ID, "go", host.DeliveryQueue)
	if _, err := f.h.RunUntilIdle(t.Context(), info.Header.ID); err != nil {
		t.Fatal(err)
	}
	rs := toolResults(t, f, info.Header.ID)
	if len(rs) != 3 || rs[0].Error == nil || rs[0].Error.Code != question.CodePlanModeInactive {
		t.Fatalf("tool results %+v", rs)
	}
	if rs[1].Error == nil || rs[1].Error.Code != "INVALID_ARGS" || !strings.Contains(resultText(rs[1]), "plan is required") {
		t.Fatalf("empty plan: %+v", rs[1])
	}
	if rs[2].Error == nil || rs[2].Error.Code != "INVALID_ARGS" || !strings.Contains(resultText(rs[2]), `"db" is used twice`) {
		t.Fatalf("duplicate ids: %+v", rs[2])
	}
	if len(f.h.Questions("")) != 0 || len(answersOf(t, f, info.Header.ID)) != 0 {
		t.Fatal("an invalid call asked a question")
	}
	if names := f.srv.Requests()[0].ToolNames(); !contains(names, question.ExitName) || !contains(names, question.AskName) {
		t.Fatalf("tools offered: %v", names)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// TestSetPlanModeSurvivesResumeAndFork: SetPlanMode on an idle session is
// logged at once (feed plan-mode); the mode is read back from the stored
// log after the session is disposed, and a fork inherits it.
func TestSetPlanModeSurvivesResumeAndFork(t *testing.T) {
	f := newFixture(t, host.Config{})
	feed := f.h.Subscribe()
	defer feed.Close()
	f.srv.Enqueue(llmtest.Response{Text: "hello"})
	info := f.create(host.CreateRequest{})
	id := info.Header.ID
	f.send(id, "hi", host.DeliveryQueue)
	if _, err := f.h.RunUntilIdle(t.Context(), id); err != nil {
		t.Fatal(err)
	}
	if err := f.h.SetPlanMode(t.Context(), id, true); err != nil {
		t.Fatal(err)
	}
	if ev := nextFeed(t, feed, feedType(host.FeedPlanMode)); ev.Active == nil || !*ev.Active {
		t.Fatalf("plan-mode %+v", ev)
	}
	if err := f.h.Dispose(t.Context(), id); err != nil {
		t.Fatal(err)
	}
	got, err := f.h.Get(t.Context(), id)
	if err != nil || got.Live || !got.PlanMode {
		t.Fatalf("stored session: live %v plan %v, %v", got.Live, got.PlanMode, err)
	}
	fork, err := f.h.Fork(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	if !fork.PlanMode {
		t.Fatal("the fork lost plan mode")
	}
	// Resumed on demand, then turned off.
	if err := f.h.SetPlanMode(t.Context(), id, false); err != nil {
		t.Fatal(err)
	}
	if got, _ := f.h.Get(t.Context(), id); !got.Live || got.PlanMode {
		t.Fatalf("after off: live %v plan %v", got.Live, got.PlanMode)
	}
}

// TestSetPlanModeMidTurnWaitsForStepBoundary: plan mode turned on while a
// turn runs (here: waiting on a question) is logged at the next step
// boundary, so the write the model makes in the next step is refused.
func TestSetPlanModeMidTurnWaitsForStepBoundary(t *testing.T) {
	f := newFixture(t, host.Config{})
	feed := f.h.Subscribe()
	defer feed.Close()
	file := filepath.Join(f.cwd, "out.txt")
	f.srv.Enqueue(
		llmtest.Response{ToolCalls: []llmtest.ToolCall{askCall(dbQuestion)}},
		llmtest.Response{ToolCalls: []llmtest.ToolCall{writeCall(file, "x\n")}},
		llmtest.Response{Text: "ok"},
	)
	info := f.create(host.CreateRequest{})
	id := info.Header.ID
	f.send(id, "go", host.DeliveryQueue)
	q := nextFeed(t, feed, feedType(host.FeedQuestion)).Question
	if err := f.h.SetPlanMode(t.Context(), id, true); err != nil {
		t.Fatal(err)
	}
	if got, _ := f.h.Get(t.Context(), id); got.PlanMode {
		t.Fatal("plan mode logged in the middle of a step")
	}
	if err := f.h.AnswerQuestion(t.Context(), id, q.ID, host.QuestionAnswer{Answers: map[string][]string{"db": {"SQLite"}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.h.RunUntilIdle(t.Context(), id); err != nil {
		t.Fatal(err)
	}
	rs := toolResults(t, f, id)
	if len(rs) != 2 || rs[1].Error == nil || rs[1].Error.Code != question.CodePlanModeActive || fileExists(file) {
		t.Fatalf("write after the boundary: %+v", rs)
	}
	events, _, _ := f.h.Events(t.Context(), id, -1, 0)
	mode, step := -1, -1
	for i, e := range events {
		switch e.Type {
		case session.TypePlanMode:
			mode = i
		case session.TypeStepStart:
			if mode >= 0 && step < 0 {
				step = i
			}
		}
	}
	if mode < 0 || step < 0 {
		t.Fatalf("plan/mode at %d, next step at %d", mode, step)
	}
}
