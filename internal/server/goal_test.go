package server_test

import (
	"testing"

	"github.com/dsh-dev/dsh/internal/goal"
	"github.com/dsh-dev/dsh/internal/llm/llmtest"
	"github.com/dsh-dev/dsh/internal/session"
)

// TestGoalRoutes: POST /goal creates and arms a goal whose rounds run at
// once (two, its cap); GET /goal and the session's info show it; the
// refusals carry the goal codes with their statuses.
func TestGoalRoutes(t *testing.T) {
	e := newEnv(t, "")
	e.model.SetFallback(func(llmtest.Request) llmtest.Response { return llmtest.Response{Text: "progress"} })
	id := e.create(nil).Header.ID
	var empty goal.State
	e.call("GET", "/api/sessions/"+id+"/goal", nil, 200, &empty)
	if empty.Goal != nil || empty.Armed {
		t.Fatalf("no goal yet: %+v", empty)
	}
	st := e.openSSE(e.req("GET", "/api/sessions/"+id+"/stream", nil))
	defer st.close()
	var created goal.State
	e.call("POST", "/api/sessions/"+id+"/goal", map[string]any{"objective": "ship it", "maxRounds": 2}, 200, &created)
	if created.Goal == nil || created.Goal.Objective != "ship it" || !created.Armed {
		t.Fatalf("created %+v", created)
	}
	// Two rounds, then the driver blocks the goal at its cap.
	blocked := func(ev session.Event) bool {
		var c goal.Change
		return ev.Type == session.TypeGoalChange && ev.Decode(&c) == nil && c.Operation == goal.OpBlock
	}
	untilEvent(t, st, blocked)
	var got goal.State
	e.call("GET", "/api/sessions/"+id+"/goal", nil, 200, &got)
	if got.Goal.Phase != goal.PhaseBlocked || got.Goal.Rounds != 2 {
		t.Fatalf("goal %+v", got.Goal)
	}
	var info struct {
		Goal *goal.State `json:"goal"`
	}
	e.call("GET", "/api/sessions/"+id, nil, 200, &info)
	if info.Goal == nil || info.Goal.Goal.ID != created.Goal.ID {
		t.Fatalf("session info goal %+v", info.Goal)
	}
	e.wantError(e.req("POST", "/api/sessions/"+id+"/goal", map[string]any{"objective": "another"}), 409, goal.CodeExists)
	e.wantError(e.req("POST", "/api/sessions/"+id+"/goal", map[string]any{"action": "resume"}), 409, goal.CodeCapReached)
	e.wantError(e.req("POST", "/api/sessions/"+id+"/goal", map[string]any{"action": "dance"}), 400, "INVALID_ARGUMENT")
	e.wantError(e.req("POST", "/api/sessions/"+id+"/goal", map[string]any{"objective": "x", "bogus": 1}), 400, "INVALID_JSON")
	var cleared goal.State
	e.call("POST", "/api/sessions/"+id+"/goal", map[string]any{"action": "clear"}, 200, &cleared)
	if cleared.Goal != nil {
		t.Fatalf("after clear %+v", cleared)
	}
	e.wantError(e.req("POST", "/api/sessions/"+id+"/goal", map[string]any{"action": "pause"}), 404, goal.CodeNotFound)
	e.wantError(e.req("POST", "/api/sessions/"+id+"/goal", map[string]any{"objective": " "}), 400, goal.CodeInvalidArgument)
}

// untilEvent reads s until an event satisfies stop.
func untilEvent(t *testing.T, s *sseStream, stop func(session.Event) bool) {
	t.Helper()
	for {
		ev, err := s.next()
		if err != nil {
			t.Fatalf("stream ended: %v", err)
		}
		if ev.Comment != "" {
			continue
		}
		if se := decodeEvents(t, []sseEvent{ev}); stop(se[0]) {
			return
		}
	}
}
