package compaction_test

import (
	"strings"
	"sync/atomic"
	"testing"

	"github.com/dsh-dev/dsh/internal/compaction"
	"github.com/dsh-dev/dsh/internal/llm/llmtest"
	"github.com/dsh-dev/dsh/internal/session"
)

// reportingLoop answers the first agent request with a bash call and the
// given usage, and every later one with a final text; summary requests
// get a summary.
func reportingLoop(first llmtest.Usage) func(llmtest.Request) llmtest.Response {
	var agentCalls atomic.Int32
	small := &llmtest.Usage{Input: 100, Output: 10}
	return func(r llmtest.Request) llmtest.Response {
		if isSummaryRequest(r) {
			return llmtest.Response{Text: summaryText, Usage: small}
		}
		if agentCalls.Add(1) == 1 {
			return llmtest.Response{Text: "looking", ToolCalls: []llmtest.ToolCall{bashCall("echo hi")}, Usage: &first}
		}
		return llmtest.Response{Text: "done", Usage: small}
	}
}

// TestProactiveCompactionOnReportedUsage is DSH's vector: with a
// 10,000-token window, a provider reporting 8,500 (or 9,900) prompt
// tokens must make the next step compact first, although dsh's own
// heuristic finds the short history tiny; 7,000 must not.
func TestProactiveCompactionOnReportedUsage(t *testing.T) {
	for _, tc := range []struct {
		name        string
		routeWindow int // the model's window (logged in request/context)
		opts        compaction.Options
		usage       llmtest.Usage
		want        bool
	}{
		{"8500 of the model's 10000", 10000, compaction.Options{}, llmtest.Usage{Input: 8500, Output: 10}, true},
		{"9900 of a configured 10000", 128000, compaction.Options{ContextWindow: 10000}, llmtest.Usage{Input: 9900, Output: 10}, true},
		{"8500 counting cache hits", 10000, compaction.Options{}, llmtest.Usage{Input: 500, CacheRead: 8000, Output: 10}, true},
		{"7000 stays below 80%", 10000, compaction.Options{}, llmtest.Usage{Input: 7000, Output: 10}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, tc.routeWindow, tc.opts)
			h.srv.SetFallback(reportingLoop(tc.usage))
			if out := h.run("say hi with bash"); out.Reason.Kind != session.EndCompleted || out.Text != "done" {
				t.Fatalf("outcome %+v", out)
			}
			checkLog(t, h.log)
			starts := eventsOf[compaction.StartPayload](t, h.log.Events(), session.TypeCompactionStart)
			var tags []string
			for _, r := range h.rec.all() {
				tags = append(tags, r.tag)
			}
			if !tc.want {
				if len(starts) != 0 || strings.Join(tags, ",") != "agent,agent" {
					t.Fatalf("compacted below the threshold: starts %+v, calls %v", starts, tags)
				}
				return
			}
			// The summary call comes between the step that reported the
			// usage and the next step's request, which carries the summary.
			if strings.Join(tags, ",") != "agent,summary,agent" {
				t.Fatalf("calls %v, want agent,summary,agent", tags)
			}
			if len(starts) != 1 || starts[0].Reason != compaction.ReasonPressure || starts[0].Turn == nil || *starts[0].Turn != 1 {
				t.Fatalf("compaction/start %+v", starts)
			}
			ends := eventsOf[compaction.EndPayload](t, h.log.Events(), session.TypeCompactionEnd)
			if len(ends) != 1 || ends[0].Error != nil {
				t.Fatalf("compaction/end %+v", ends)
			}
			next := h.rec.all()[2].req.Messages
			if len(next) == 0 || !compaction.IsSummary(next[0]) || !strings.Contains(next[0].Text(), summaryText) {
				t.Errorf("the step after the compaction did not start from the summary: %+v", next)
			}
		})
	}
}

// TestCompactionWhenTheProviderUnderReports: a provider whose usage
// leaves out most of the prompt (here it always reports 1 token) must
// not keep compaction off; dsh's own estimate, the larger, triggers it.
func TestCompactionWhenTheProviderUnderReports(t *testing.T) {
	const window, steps = 2000, 12
	h := newHarness(t, window, compaction.Options{})
	loop := scriptedLoop(steps, llmtest.Response{Text: summaryText, Usage: &llmtest.Usage{Input: 1}})
	h.srv.SetFallback(func(r llmtest.Request) llmtest.Response {
		resp := loop(r)
		resp.Usage = &llmtest.Usage{Input: 1, Output: 1}
		return resp
	})
	if out := h.run("run the verbose steps"); out.Reason.Kind != session.EndCompleted {
		t.Fatalf("outcome %+v", out)
	}
	checkLog(t, h.log)
	if n := len(eventsOf[compaction.SummaryPayload](t, h.log.Events(), session.TypeCompactionSummary)); n == 0 {
		t.Fatal("no compaction although the history passed the window")
	}
	// No request after the first compaction exceeds the window by dsh's
	// own measure.
	if p := h.comp.Pressure(); p >= 1 {
		t.Errorf("pressure %.2f at the end", p)
	}
}
