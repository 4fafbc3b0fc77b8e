package agent_test

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"

	"github.com/dsh-dev/dsh/internal/agent"
	"github.com/dsh-dev/dsh/internal/llm"
	"github.com/dsh-dev/dsh/internal/llm/llmtest"
	"github.com/dsh-dev/dsh/internal/session"
	"github.com/dsh-dev/dsh/internal/tool"
)

// headerData returns the data of the run's request/header events.
func headerData(t *testing.T, log *session.Log) []json.RawMessage {
	t.Helper()
	var out []json.RawMessage
	for _, e := range log.Events() {
		if e.Type == session.TypeRequestHeader {
			out = append(out, e.Data)
		}
	}
	return out
}

// TestPreparedHeaderIsTheLoggedOne: a header encoded ahead of the first
// call is what that call logs and sends when nothing changed since, byte
// for byte as without it; a request hook or a tool registered after it
// make the call encode its own.
func TestPreparedHeaderIsTheLoggedOne(t *testing.T) {
	run := func(t *testing.T, prepare func(*harness, *agent.Agent), hook func(*session.CallConfig)) (*harness, []json.RawMessage) {
		h := newHarness(t)
		h.srv.Enqueue(llmtest.Response{Text: "done"})
		h.agent = h.newAgentWith(h.log, func(c *agent.Config) {
			if hook != nil {
				c.Hooks.Request = append(c.Hooks.Request, func(_ context.Context, cfg *session.CallConfig) { hook(cfg) })
			}
		})
		if prepare != nil {
			prepare(h, h.agent)
		}
		if out := h.run(t.Context(), "go"); out.Reason.Kind != session.EndCompleted {
			t.Fatalf("outcome %+v", out)
		}
		return h, headerData(t, h.log)
	}
	plainH, plain := run(t, nil, nil)
	if len(plain) != 1 {
		t.Fatalf("%d headers logged", len(plain))
	}
	preparedH, prepared := run(t, func(_ *harness, a *agent.Agent) { a.PrepareHeader() }, nil)
	if len(prepared) != 1 || !bytes.Equal(prepared[0], plain[0]) {
		t.Fatalf("prepared header\n%s\nwant\n%s", prepared, plain[0])
	}
	if a, b := plainH.srv.Requests()[0].Body, preparedH.srv.Requests()[0].Body; !bytes.Equal(a, b) {
		t.Fatalf("request bodies differ:\n%s\n%s", a, b)
	}
	// The call takes the prepared bytes as they are: a stand-in shows in
	// the log.
	sentinel := json.RawMessage(`{"config":{},"system":"prepared","tools":[]}`)
	_, used := run(t, func(_ *harness, a *agent.Agent) {
		a.PrepareHeader()
		agent.SetPreparedHeader(a, sentinel)
	}, nil)
	var hd session.RequestHeader
	if err := json.Unmarshal(used[0], &hd); err != nil || hd.Header.System != "prepared" {
		t.Fatalf("the prepared encoding was not used: %s (%v)", used[0], err)
	}
	// Inputs that changed after it: the call encodes its own.
	_, hooked := run(t, func(_ *harness, a *agent.Agent) {
		a.PrepareHeader()
		agent.SetPreparedHeader(a, sentinel)
	}, func(cfg *session.CallConfig) { cfg.Effort = llm.EffortHigh })
	if err := json.Unmarshal(hooked[0], &hd); err != nil || hd.Header.System == "prepared" || hd.Header.Config.Effort != llm.EffortHigh {
		t.Fatalf("a hooked call logged %s (%v)", hooked[0], err)
	}
	_, added := run(t, func(h *harness, a *agent.Agent) {
		a.PrepareHeader()
		agent.SetPreparedHeader(a, sentinel)
		if err := h.reg.Register("", tool.Definition{Name: "late", Description: "registered after the header was prepared",
			Parameters: json.RawMessage(`{"type":"object"}`),
			Execute:    func(context.Context, *tool.Call) (tool.Result, error) { return tool.Result{}, nil }}); err != nil {
			t.Fatal(err)
		}
	}, nil)
	if err := json.Unmarshal(added[0], &hd); err != nil || hd.Header.System == "prepared" || len(hd.Header.Tools) != 2 {
		t.Fatalf("a call with a tool added logged %s (%v)", added[0], err)
	}
}
