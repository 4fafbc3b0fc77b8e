package agent_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/dsh-dev/dsh/internal/agent"
	"github.com/dsh-dev/dsh/internal/llm"
	"github.com/dsh-dev/dsh/internal/llm/llmtest"
	"github.com/dsh-dev/dsh/internal/session"
)

// TestRequestHeaderLoggedOnlyOnChange: a header whose inputs did not
// change since the last step is not logged again (nor encoded); one
// whose inputs changed (a request hook raising the effort from step 2,
// a temperature changed in place from step 3) is logged with reason
// "change", and the requests carry what the log says.
func TestRequestHeaderLoggedOnlyOnChange(t *testing.T) {
	h := newHarness(t)
	h.srv.Enqueue(
		llmtest.Response{ToolCalls: []llmtest.ToolCall{bashCall("true")}},
		llmtest.Response{ToolCalls: []llmtest.ToolCall{bashCall("true")}},
		llmtest.Response{ToolCalls: []llmtest.ToolCall{bashCall("true")}},
		llmtest.Response{ToolCalls: []llmtest.ToolCall{bashCall("true")}},
		llmtest.Response{Text: "done"},
	)
	temp := 0.5
	step := 0
	h.agent = h.newAgentWith(h.log, func(c *agent.Config) {
		c.Hooks.Request = append(c.Hooks.Request, func(_ context.Context, cfg *session.CallConfig) {
			step++
			if step >= 2 {
				cfg.Effort = llm.EffortHigh
			}
			if step >= 3 {
				cfg.Temperature = &temp // the same pointer every step
			}
			if step == 4 {
				temp = 0.7 // changed in place
			}
		})
	})
	if out := h.run(t.Context(), "go"); out.Reason.Kind != session.EndCompleted {
		t.Fatalf("outcome %+v", out)
	}
	hdrs := eventsOf[session.RequestHeader](t, h.log.Events(), session.TypeRequestHeader)
	var got []string
	for _, hd := range hdrs {
		tp := "-"
		if hd.Header.Config.Temperature != nil {
			tp = fmt.Sprint(*hd.Header.Config.Temperature)
		}
		got = append(got, fmt.Sprintf("%s/%s/%s", hd.Reason, hd.Header.Config.Effort, tp))
	}
	want := "initial//- change/high/- change/high/0.5 change/high/0.7"
	if strings.Join(got, " ") != want {
		t.Errorf("request headers %q, want %q", strings.Join(got, " "), want)
	}
}
