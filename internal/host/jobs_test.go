package host_test

import (
	"encoding/json"
	"testing"

	"github.com/dsh-dev/dsh/internal/host"
	"github.com/dsh-dev/dsh/internal/llm/llmtest"
	"github.com/dsh-dev/dsh/internal/session"
)

// TestJobNoticeWakesIdleSession: in a hosted session nobody drives turns
// by hand: a background job's completion notice wakes the idle agent and
// its owner goroutine runs the turn that reports it; the job is listed
// while the session is live.
func TestJobNoticeWakesIdleSession(t *testing.T) {
	needSandbox(t)
	f := newFixture(t, host.Config{})
	args, _ := json.Marshal(map[string]any{"command": "echo from-the-job", "description": "test", "run_in_background": true})
	f.srv.Enqueue(
		llmtest.Response{ToolCalls: []llmtest.ToolCall{{Name: "bash", Arguments: string(args)}}},
		llmtest.Response{Text: "started it"},
		llmtest.Response{Text: "the job said from-the-job"},
	)
	id := f.create(host.CreateRequest{}).Header.ID
	s, err := f.h.Follow(t.Context(), id, -1)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	f.send(id, "start a job", host.DeliveryQueue)
	ends := 0
	events := until(t, s, func(e session.Event) bool {
		if e.Type == session.TypeTurnEnd {
			ends++
		}
		return ends == 2
	})
	if n := countType(events, session.TypeTurnStart); n != 2 {
		t.Fatalf("%d turns, want the notice's own", n)
	}
	jobs := f.h.Jobs(id)
	if len(jobs) != 1 || jobs[0].Kind != "bash" || jobs[0].Status == "running" {
		t.Fatalf("jobs %+v", jobs)
	}
	f.dispose(id)
	if jobs := f.h.Jobs(id); len(jobs) != 0 {
		t.Fatalf("jobs of a disposed session: %+v", jobs)
	}
	if f.srv.RequestCount() != 3 {
		t.Fatalf("%d model requests", f.srv.RequestCount())
	}
}
