package server_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dsh-dev/dsh/internal/host"
	"github.com/dsh-dev/dsh/internal/llm/llmtest"
	"github.com/dsh-dev/dsh/internal/session"
)

func toolCall(name string, args any) llmtest.ToolCall {
	b, _ := json.Marshal(args)
	return llmtest.ToolCall{Name: name, Arguments: string(b)}
}

// lastToolResult reads the session's last tool/result.
func lastToolResult(t *testing.T, e *env, id string) session.ToolResult {
	t.Helper()
	var page struct{ Events []session.Event }
	e.call("GET", "/api/sessions/"+id+"/events", nil, 200, &page)
	var r session.ToolResult
	found := false
	for _, ev := range page.Events {
		if ev.Type == session.TypeToolResult {
			found = true
			if err := ev.Decode(&r); err != nil {
				t.Fatal(err)
			}
		}
	}
	if !found {
		t.Fatal("no tool result")
	}
	return r
}

func textOf(r session.ToolResult) string {
	var b strings.Builder
	for _, c := range r.Content {
		b.WriteString(c.Text)
	}
	return b.String()
}

// TestQuestionOverHTTP: a question is listed by both routes and on a
// reconnected feed, a bad answer is 400 QUESTION_INVALID_ANSWER, the
// first good answer is 204 and reaches the model, a second is 409.
func TestQuestionOverHTTP(t *testing.T) {
	e := newEnv(t, "")
	e.model.Enqueue(
		llmtest.Response{ToolCalls: []llmtest.ToolCall{toolCall("ask_user_question", map[string]any{"questions": []map[string]any{{
			"id": "color", "question": "Which colour?", "options": []map[string]string{{"label": "red"}, {"label": "blue"}},
		}}})}},
		llmtest.Response{Text: "blue it is"},
	)
	feed := e.openSSE(e.req("GET", "/api/events", nil))
	id := e.create(nil).Header.ID
	st := e.openSSE(e.req("GET", "/api/sessions/"+id+"/stream", nil))
	defer st.close()
	e.send(id, "ask")
	q := feedUntil(t, feed, host.FeedQuestion).Question
	if q == nil || q.SessionID != id || q.Kind != "question" || q.Questions[0].ID != "color" {
		t.Fatalf("question %+v", q)
	}
	feed.close()
	var all, mine struct{ Questions []host.Question }
	e.call("GET", "/api/questions", nil, 200, &all)
	e.call("GET", "/api/sessions/"+id+"/questions", nil, 200, &mine)
	if len(all.Questions) != 1 || len(mine.Questions) != 1 || mine.Questions[0].ID != q.ID {
		t.Fatalf("lists %+v %+v", all, mine)
	}
	feed2 := e.openSSE(e.req("GET", "/api/events", nil))
	defer feed2.close()
	if again := feedUntil(t, feed2, host.FeedQuestion); again.Question == nil || again.Question.ID != q.ID {
		t.Fatalf("after reconnect %+v", again)
	}
	path := "/api/sessions/" + id + "/questions/" + q.ID
	e.wantError(e.req("POST", path, map[string]any{"answers": map[string][]string{"colour": {"red"}}}), 400, "QUESTION_INVALID_ANSWER")
	e.wantError(e.req("POST", path, map[string]any{"answers": map[string][]string{"color": {"red", "blue"}}}), 400, "QUESTION_INVALID_ANSWER")
	e.wantError(e.req("POST", path, map[string]any{"bogus": true}), 400, "INVALID_JSON")
	e.call("POST", path, map[string]any{"answers": map[string][]string{"color": {"blue"}}}, 204, nil)
	e.wantError(e.req("POST", path, map[string]any{"answers": map[string][]string{"color": {"red"}}}), 409, "QUESTION_NOT_PENDING")
	e.wantError(e.req("POST", "/api/sessions/"+id+"/questions/nope", map[string]any{"answers": map[string][]string{"color": {"red"}}}), 404, "QUESTION_NOT_FOUND")
	if res := feedUntil(t, feed2, host.FeedQuestionResolved); res.ID != q.ID || res.Status != "answered" {
		t.Fatalf("resolved %+v", res)
	}
	untilType(t, st, session.TypeTurnEnd)
	if r := lastToolResult(t, e, id); r.IsError || !strings.Contains(textOf(r), "color (Which colour?): blue") {
		t.Fatalf("tool result %+v", r)
	}
	e.call("GET", "/api/questions", nil, 200, &all)
	if len(all.Questions) != 0 {
		t.Fatalf("still pending: %+v", all)
	}
}

// TestPlanOverHTTP: a session created in plan mode presents its plan;
// keep planning (approve false, feedback) goes back to the model, approve
// ends plan mode and the write that follows runs. POST .../plan toggles
// plan mode of an idle session.
func TestPlanOverHTTP(t *testing.T) {
	e := newEnv(t, "")
	file := filepath.Join(e.cwd, "out.txt")
	e.model.Enqueue(
		llmtest.Response{ToolCalls: []llmtest.ToolCall{toolCall("exit_plan_mode", map[string]string{"plan": "# Write\nwrite out.txt"})}},
		llmtest.Response{ToolCalls: []llmtest.ToolCall{toolCall("exit_plan_mode", map[string]string{"plan": "# Write v2\nwrite out.txt twice"})}},
		llmtest.Response{ToolCalls: []llmtest.ToolCall{toolCall("write", map[string]string{"file_path": file, "content": "ok\n"})}},
		llmtest.Response{Text: "done"},
	)
	feed := e.openSSE(e.req("GET", "/api/events", nil))
	defer feed.close()
	in := e.create(map[string]any{"planMode": true})
	id := in.Header.ID
	var info struct {
		PlanMode bool `json:"planMode"`
	}
	e.call("GET", "/api/sessions/"+id, nil, 200, &info)
	if !info.PlanMode {
		t.Fatal("created with planMode, info says off")
	}
	st := e.openSSE(e.req("GET", "/api/sessions/"+id+"/stream", nil))
	defer st.close()
	e.send(id, "plan it")
	q := feedUntil(t, feed, host.FeedQuestion).Question
	if q.Kind != "plan" || q.Plan != "# Write\nwrite out.txt" {
		t.Fatalf("plan %+v", q)
	}
	path := "/api/sessions/" + id + "/questions/" + q.ID
	e.wantError(e.req("POST", path, map[string]any{"feedback": "no approve"}), 400, "QUESTION_INVALID_ANSWER")
	e.call("POST", path, map[string]any{"approve": false, "feedback": "write it twice"}, 204, nil)
	q2 := feedUntil(t, feed, host.FeedQuestion).Question
	if q2.Plan != "# Write v2\nwrite out.txt twice" {
		t.Fatalf("second plan %+v", q2)
	}
	e.call("POST", "/api/sessions/"+id+"/questions/"+q2.ID, map[string]any{"approve": true}, 204, nil)
	if pm := feedUntil(t, feed, host.FeedPlanMode); pm.Active == nil || *pm.Active {
		t.Fatalf("plan-mode %+v", pm)
	}
	untilType(t, st, session.TypeTurnEnd)
	if b, err := os.ReadFile(file); err != nil || string(b) != "ok\n" {
		t.Fatalf("out.txt %q %v", b, err)
	}
	body, _ := json.Marshal(e.model.Requests()[1].Messages())
	if !strings.Contains(string(body), "write it twice") {
		t.Fatalf("the model did not get the feedback: %s", body)
	}
	e.call("GET", "/api/sessions/"+id, nil, 200, &info)
	if info.PlanMode {
		t.Fatal("plan mode still on after approval")
	}
	// The web toggle: on, then off, after the turn. The run may still be
	// ending when the turn's end is streamed; a change asked then is
	// applied when it ends, so wait for the feed to announce it.
	e.call("POST", "/api/sessions/"+id+"/plan", map[string]any{"active": true}, 204, nil)
	if pm := feedUntil(t, feed, host.FeedPlanMode); pm.Active == nil || !*pm.Active {
		t.Fatalf("toggle on: plan-mode %+v", pm)
	}
	e.call("GET", "/api/sessions/"+id, nil, 200, &info)
	if !info.PlanMode {
		t.Fatal("toggle on did not take")
	}
	e.wantError(e.req("POST", "/api/sessions/"+id+"/plan", map[string]any{}), 400, "INVALID_ARGUMENT")
	e.call("POST", "/api/sessions/"+id+"/plan", map[string]any{"active": false}, 204, nil)
	if pm := feedUntil(t, feed, host.FeedPlanMode); pm.Active == nil || *pm.Active {
		t.Fatalf("toggle off: plan-mode %+v", pm)
	}
	e.call("GET", "/api/sessions/"+id, nil, 200, &info)
	if info.PlanMode {
		t.Fatal("toggle off did not take")
	}
	e.wantError(e.req("POST", "/api/sessions/nosuch/plan", map[string]any{"active": true}), 404, "SESSION_NOT_FOUND")
}
