package compaction_test

import (
	"reflect"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/dsh-dev/dsh/internal/compaction"
	"github.com/dsh-dev/dsh/internal/llm"
	"github.com/dsh-dev/dsh/internal/llm/llmtest"
	"github.com/dsh-dev/dsh/internal/session"
)

const summaryText = "The user asked for verbose bash steps; steps so far passed."

// scriptedLoop answers summary requests with summary (or fault) and
// agent requests with a verbose bash call until steps calls were made,
// then a final text. Usage is a token per 4 body bytes, as a provider
// would report it, so the meter anchors on it.
func scriptedLoop(steps int, summary llmtest.Response) func(llmtest.Request) llmtest.Response {
	var agentCalls atomic.Int32
	return func(r llmtest.Request) llmtest.Response {
		u := &llmtest.Usage{Input: len(r.Body) / 4, Output: 30}
		if isSummaryRequest(r) {
			s := summary
			if s.Usage == nil && !s.Empty && s.Status == 0 {
				s.Usage = u
			}
			return s
		}
		n := int(agentCalls.Add(1))
		if n <= steps {
			return llmtest.Response{Text: "running step", ToolCalls: []llmtest.ToolCall{bashCall(verboseCommand(n))}, Usage: u}
		}
		return llmtest.Response{Text: "all steps done", Usage: u}
	}
}

func TestAutomaticCompactionPastTheWindow(t *testing.T) {
	const window, steps = 2000, 12
	// The window comes from the agent's request/context, not the options.
	h := newHarness(t, window, compaction.Options{})
	h.srv.SetFallback(scriptedLoop(steps, llmtest.Response{Text: summaryText}))
	out := h.run("run the verbose steps")
	if out.Reason.Kind != session.EndCompleted || out.Text != "all steps done" {
		t.Fatalf("outcome %+v", out)
	}
	events := h.log.Events()
	checkLog(t, h.log)

	// Nothing was deleted: every tool result and the prompt are still
	// logged, and together they are far larger than the window.
	results := eventsOf[session.ToolResult](t, events, session.TypeToolResult)
	if len(results) != steps {
		t.Fatalf("%d tool results logged, want %d", len(results), steps)
	}
	total := 0
	for _, e := range events {
		if session.IsSurfaceType(e.Type) {
			total += len(e.Data) / 4
		}
	}
	if total <= window {
		t.Fatalf("conversation of ~%d tokens never exceeded the %d-token window", total, window)
	}
	if !strings.Contains(string(events[firstOf(t, events, session.TypeUserMessage)].Data), "run the verbose steps") {
		t.Error("the original prompt is gone from the log")
	}

	sums := eventsOf[compaction.SummaryPayload](t, events, session.TypeCompactionSummary)
	ends := eventsOf[compaction.EndPayload](t, events, session.TypeCompactionEnd)
	starts := eventsOf[compaction.StartPayload](t, events, session.TypeCompactionStart)
	if len(sums) < 2 || len(ends) != len(sums) || len(starts) != len(sums) {
		t.Fatalf("%d starts, %d summaries, %d ends; want at least 2 clean compactions", len(starts), len(sums), len(ends))
	}
	for i, s := range starts {
		if s.Turn == nil || *s.Turn != 1 || s.Reason != compaction.ReasonPressure || ends[i].Error != nil {
			t.Errorf("compaction %d: start %+v end %+v", i, s, ends[i])
		}
	}

	// Pair each summary call with the agent calls around it.
	reqs := h.rec.all()
	wire := h.srv.Requests()
	if len(wire) != len(reqs) {
		t.Fatalf("%d wire requests, %d recorded", len(wire), len(reqs))
	}
	si := 0
	for i, r := range reqs {
		if r.tag != "summary" {
			continue
		}
		sum := sums[si]
		si++
		if !isSummaryRequest(wire[i]) {
			t.Fatalf("request %d is not a summary request on the wire", i)
		}
		startSeq := seqOf(t, events, session.TypeCompactionStart, sum.CompactionID)
		pre := surfaceAt(t, events, startSeq)
		k := sum.ShadowedRange.End + 1
		if sum.ShadowedRange.Start != 0 || len(sum.ShadowedSeqs) != k {
			t.Fatalf("summary %d: range %+v, seqs %v", si, sum.ShadowedRange, sum.ShadowedSeqs)
		}
		for j, seq := range sum.ShadowedSeqs {
			if pre[j].Seq != seq {
				t.Fatalf("summary %d cites seq %d for node %d, which is seq %d", si, seq, j, pre[j].Seq)
			}
		}

		// The summary call replays the conversation's own prefix and
		// puts the instruction last.
		sr := r.req
		if sr.System != system || !reflect.DeepEqual(sr.Tools, h.reg.Schemas("")) || sr.Effort != llm.EffortOff || sr.Model != "deepseek-v4-flash" {
			t.Errorf("summary request header: system %q, tools %v, effort %q, model %q", sr.System, sr.Tools, sr.Effort, sr.Model)
		}
		if !reflect.DeepEqual(sr.Messages[:len(sr.Messages)-1], messagesOf(pre[:k])) {
			t.Errorf("summary request %d does not replay the shadowed prefix verbatim", si)
		}
		if last := sr.Messages[len(sr.Messages)-1]; last.Role != llm.RoleUser || last.Text() != compaction.Instruction {
			t.Errorf("summary request does not end with the instruction: %+v", last)
		}
		if !reflect.DeepEqual(wire[i].ToolNames(), []string{"bash"}) || wire[i].Messages()[0]["content"] != system {
			t.Errorf("summary request on the wire lacks the system prompt or tools: %s", wire[i].Body)
		}

		// The next agent request is [summary] + the verbatim tail, and
		// smaller than the last one before the compaction.
		if i == 0 || i+1 >= len(reqs) || reqs[i-1].tag != "agent" || reqs[i+1].tag != "agent" {
			t.Fatalf("summary request %d is not between two agent requests", i)
		}
		after := reqs[i+1].req.Messages
		want := append([]llm.Message{compaction.SummaryMessage(sum.CompactionID, sum.Summary)}, messagesOf(pre[k:])...)
		if !reflect.DeepEqual(after, want) {
			t.Errorf("request after compaction %d:\n got %+v\nwant %+v", si, after, want)
		}
		if !compaction.IsSummary(after[0]) || !strings.HasPrefix(after[0].Text(), compaction.SummaryPrefix) || !strings.Contains(after[0].Text(), summaryText) {
			t.Errorf("first message after compaction is not the summary: %+v", after[0])
		}
		if b, a := len(wire[i-1].Body), len(wire[i+1].Body); a >= b {
			t.Errorf("request after compaction %d is %d bytes, before %d", si, a, b)
		}
	}
	// The last request fits the window.
	if last := wire[len(wire)-1]; len(last.Body)/4 >= window {
		t.Errorf("last request of ~%d tokens exceeds the window", len(last.Body)/4)
	}
	// A later compaction merges the earlier summary.
	if lastSum := sums[len(sums)-1]; lastSum.ShadowedSeqs[0] == sums[0].ShadowedSeqs[0] {
		t.Error("the second compaction did not shadow the first summary")
	}
}

func firstOf(t *testing.T, events []session.Event, typ string) int {
	t.Helper()
	for i, e := range events {
		if e.Type == typ {
			return i
		}
	}
	t.Fatalf("no %s event", typ)
	return -1
}

func TestSummaryFailureContinuesUncompacted(t *testing.T) {
	for _, tc := range []struct {
		name  string
		fault llmtest.Response
		code  llm.Code
	}{
		{"server error", llmtest.Response{Status: 500}, llm.CodeServer},
		{"empty summary", llmtest.Response{Empty: true}, llm.CodeEmptyResponse},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, 2000, compaction.Options{})
			h.srv.SetFallback(scriptedLoop(6, tc.fault))
			out := h.run("run the verbose steps")
			if out.Reason.Kind != session.EndCompleted || out.Text != "all steps done" {
				t.Fatalf("outcome %+v", out)
			}
			events := h.log.Events()
			checkLog(t, h.log)
			ends := eventsOf[compaction.EndPayload](t, events, session.TypeCompactionEnd)
			if len(ends) == 0 {
				t.Fatal("no compaction was attempted")
			}
			for _, e := range ends {
				if e.Error == nil || e.Error.Code != tc.code {
					t.Errorf("compaction/end error = %+v, want %s", e.Error, tc.code)
				}
			}
			if n := len(eventsOf[compaction.SummaryPayload](t, events, session.TypeCompactionSummary)); n != 0 {
				t.Errorf("%d summaries logged after failures", n)
			}
			// The history is whole: the last request still starts with the prompt.
			reqs := h.rec.all()
			last := reqs[len(reqs)-1].req.Messages
			if last[0].Text() != "run the verbose steps" || len(last) != 1+2*6 {
				t.Errorf("last request has %d messages starting %q", len(last), last[0].Text())
			}
		})
	}
}

const overflowBody = `{"error":{"message":"This model's maximum context length is 10 tokens","type":"invalid_request_error","code":"context_length_exceeded"}}`

func TestOverflowRecovery(t *testing.T) {
	overflow := llmtest.Response{Status: 400, ErrorBody: overflowBody}
	for _, tc := range []struct {
		name string
		// script answers turn 2 after a first 400 overflow.
		script   []llmtest.Response
		wantKind string
		wantText string
	}{
		{"compact and retry once", []llmtest.Response{{Text: summaryText}, {Text: "second done"}}, session.EndCompleted, "second done"},
		{"second overflow in the step is not retried", []llmtest.Response{{Text: summaryText}, overflow}, session.EndError, ""},
		{"failed summary is not retried", []llmtest.Response{{Status: 401}}, session.EndError, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// A huge window: the meter never triggers, only the provider.
			h := newHarness(t, 1_000_000, compaction.Options{})
			h.srv.Enqueue(
				llmtest.Response{ToolCalls: []llmtest.ToolCall{bashCall(verboseCommand(1))}},
				llmtest.Response{Text: "first done"},
			)
			if out := h.run("first"); out.Reason.Kind != session.EndCompleted {
				t.Fatalf("turn 1: %+v", out)
			}
			h.srv.Enqueue(append([]llmtest.Response{overflow}, tc.script...)...)
			out := h.run("second")
			if out.Reason.Kind != tc.wantKind || out.Text != tc.wantText {
				t.Fatalf("turn 2: %+v", out)
			}
			if out.Reason.Kind == session.EndError && out.Reason.Failure.Code != llm.CodeContextWindowExceeded {
				t.Errorf("turn 2 failure %+v", out.Reason.Failure)
			}
			if h.srv.Pending() != 0 {
				t.Errorf("%d scripted responses left unused", h.srv.Pending())
			}
			events := h.log.Events()
			checkLog(t, h.log)
			starts := eventsOf[compaction.StartPayload](t, events, session.TypeCompactionStart)
			if len(starts) != 1 || starts[0].Reason != compaction.ReasonOverflow || starts[0].Turn == nil || *starts[0].Turn != 2 {
				t.Fatalf("compaction starts %+v, want one overflow compaction in turn 2", starts)
			}
			if n := len(eventsOf[session.LLMRetry](t, events, session.TypeLLMRetry)); n != 0 {
				t.Errorf("%d policy retries; overflow must not go through the retry policy", n)
			}
			if tc.wantKind != session.EndCompleted {
				return
			}
			// The retried request keeps only the new prompt verbatim.
			reqs := h.rec.all()
			retried := reqs[len(reqs)-1].req.Messages
			if len(retried) != 2 || !compaction.IsSummary(retried[0]) || retried[1].Text() != "second" {
				t.Errorf("retried request messages %+v", retried)
			}
		})
	}
}

func TestOverflowWithNothingToShadow(t *testing.T) {
	h := newHarness(t, 1_000_000, compaction.Options{})
	h.srv.Enqueue(llmtest.Response{Status: 400, ErrorBody: overflowBody})
	out := h.run("only prompt")
	if out.Reason.Kind != session.EndError || out.Reason.Failure.Code != llm.CodeContextWindowExceeded {
		t.Fatalf("outcome %+v", out)
	}
	if n := h.srv.RequestCount(); n != 1 {
		t.Errorf("%d requests, want 1 (no summary call, no retry)", n)
	}
	if n := len(eventsOf[compaction.StartPayload](t, h.log.Events(), session.TypeCompactionStart)); n != 0 {
		t.Errorf("%d compactions started with nothing to shadow", n)
	}
}
