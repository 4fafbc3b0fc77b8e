package compaction_test

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/dsh-dev/dsh/internal/agent"
	"github.com/dsh-dev/dsh/internal/compaction"
	"github.com/dsh-dev/dsh/internal/llm"
	"github.com/dsh-dev/dsh/internal/llm/llmtest"
	"github.com/dsh-dev/dsh/internal/llm/openai"
	"github.com/dsh-dev/dsh/internal/session"
)

func TestEnteringMessagesCountAndStayVerbatim(t *testing.T) {
	h := newHarness(t, 2000, compaction.Options{})
	h.srv.SetFallback(scriptedLoop(3, llmtest.Response{Text: summaryText}))
	if out := h.run("turn one"); out.Reason.Kind != session.EndCompleted {
		t.Fatalf("turn 1: %+v", out)
	}
	if n := len(eventsOf[compaction.StartPayload](t, h.log.Events(), session.TypeCompactionStart)); n != 0 {
		t.Fatalf("turn 1 already compacted (%d); the test needs it below the threshold", n)
	}
	// Below the threshold on its own, over it with the new prompt.
	prompt := "turn two: " + strings.Repeat("please continue carefully. ", 50)
	enter := []llm.Message{{Role: llm.RoleUser, Content: []llm.Block{llm.TextBlock(prompt)}}}
	if p := h.comp.Pressure(); p >= compaction.DefaultThreshold || float64(h.comp.Estimate(enter))/2000 < compaction.DefaultThreshold {
		t.Fatalf("pressure %.2f without the prompt, %.2f with it", p, float64(h.comp.Estimate(enter))/2000)
	}
	if out := h.run(prompt); out.Reason.Kind != session.EndCompleted {
		t.Fatalf("turn 2: %+v", out)
	}
	events := h.log.Events()
	checkLog(t, h.log)
	starts := eventsOf[compaction.StartPayload](t, events, session.TypeCompactionStart)
	sums := eventsOf[compaction.SummaryPayload](t, events, session.TypeCompactionSummary)
	if len(starts) != 1 || *starts[0].Turn != 2 || len(sums) != 1 {
		t.Fatalf("compactions %+v", starts)
	}
	startSeq := seqOf(t, events, session.TypeCompactionStart, sums[0].CompactionID)
	pre := surfaceAt(t, events, startSeq)
	k := sums[0].ShadowedRange.End + 1
	reqs := h.rec.all()
	var after []llm.Message
	for i, r := range reqs {
		if r.tag == "summary" {
			after = reqs[i+1].req.Messages
		}
	}
	want := append([]llm.Message{compaction.SummaryMessage(sums[0].CompactionID, sums[0].Summary)}, messagesOf(pre[k:])...)
	if len(after) != len(want)+1 || !reflect.DeepEqual(after[:len(want)], want) || after[len(want)].Text() != prompt {
		t.Errorf("request after compaction is not [summary] + tail + prompt:\n%+v", after)
	}
}

func TestManualCompact(t *testing.T) {
	// Threshold 2 turns automatic compaction off.
	h := newHarness(t, 2000, compaction.Options{Threshold: 2})
	h.srv.SetFallback(scriptedLoop(4, llmtest.Response{Text: summaryText}))
	if out := h.run("turn one"); out.Reason.Kind != session.EndCompleted {
		t.Fatalf("turn 1: %+v", out)
	}
	before := h.log.Len()
	res, err := h.comp.Compact(t.Context(), "")
	if err != nil {
		t.Fatal(err)
	}
	if !res.Compacted || res.Shadowed == 0 || res.TokensAfter >= res.TokensBefore || res.ModelTime <= 0 || res.Duration < res.ModelTime {
		t.Fatalf("result %+v", res)
	}
	events := h.log.Events()
	checkLog(t, h.log)
	if got := events[before].Type; got != session.TypeCompactionStart || !strings.Contains(string(events[before].Data), `"turn":null`) || !strings.Contains(string(events[before].Data), `"reason":"manual"`) {
		t.Errorf("manual compaction/start = %s", events[before].Data)
	}
	var types []string
	for _, e := range events[before:] {
		types = append(types, e.Type)
	}
	if got := strings.Join(types, ","); got != "compaction/start,compaction/summary,user/message,compaction/end" {
		t.Errorf("manual compaction events: %s", got)
	}
	if op := events[before+2].SurfaceOp; op == nil || !op.Replace || op.Start != 0 || op.End != res.Shadowed-1 || len(events[before+2].SourceEventSeqs) != res.Shadowed {
		t.Errorf("summary message op %+v cites %v", op, events[before+2].SourceEventSeqs)
	}
	if !strings.Contains(string(events[before+3].Data), `"turn":null`) {
		t.Errorf("manual compaction/end = %s", events[before+3].Data)
	}

	// Nothing left to do: no model call, no events.
	n, calls := h.log.Len(), h.srv.RequestCount()
	res, err = h.comp.Compact(t.Context(), "")
	if err != nil || res.Compacted || h.log.Len() != n || h.srv.RequestCount() != calls {
		t.Errorf("second compaction: %+v, %v; %d events appended, %d calls", res, err, h.log.Len()-n, h.srv.RequestCount()-calls)
	}

	// The next turn starts from the summary.
	if out := h.run("turn two"); out.Reason.Kind != session.EndCompleted {
		t.Fatalf("turn 2: %+v", out)
	}
	reqs := h.rec.all()
	if first := reqs[len(reqs)-1].req.Messages[0]; !compaction.IsSummary(first) {
		t.Errorf("turn 2 request starts with %+v", first)
	}
}

func TestPruneInSummaryRequestOnly(t *testing.T) {
	srv := llmtest.New()
	t.Cleanup(srv.Close)
	srv.Enqueue(llmtest.Response{Text: summaryText})
	rec := &recorder{}
	b := newLogBuilder(t)
	b.header()
	b.user("look at the big file")
	b.call("c1", nil)
	big := "BEGIN" + strings.Repeat("0123456789abcdef", 1000) + "END" // 16 KB
	b.result("c1", big)
	b.assistant("it is big", nil)
	b.user("now something else")
	b.assistant("done", nil)
	c := compaction.New(compaction.Options{
		Log:     b.log,
		Adapter: recAdapter{rec, "summary", openai.New(openai.Config{Provider: "deepseek", BaseURL: srv.URL(), APIKey: "k", DeepSeek: true, IdleTimeout: 5 * time.Second})},
		// A tail budget (8 tokens) just big enough for the last answer.
		ContextWindow: 200, KeepTail: 0.04,
	})
	res, err := c.Compact(t.Context(), "")
	if err != nil || !res.Compacted || res.Shadowed != 5 {
		t.Fatalf("Compact = %+v, %v", res, err)
	}
	events := b.log.Events()
	checkLog(t, b.log)
	resultSeq := int64(3) // header 0, prompt 1, call 2, result 3
	if events[resultSeq].Type != session.TypeToolResult || !strings.Contains(string(events[resultSeq].Data), big) {
		t.Fatal("the logged tool result changed")
	}
	sum := eventsOf[compaction.SummaryPayload](t, events, session.TypeCompactionSummary)[0]
	if !reflect.DeepEqual(sum.PrunedSeqs, []int64{resultSeq}) || sum.PruneBytes != compaction.DefaultPruneBytes {
		t.Errorf("summary payload pruned %v at %d bytes", sum.PrunedSeqs, sum.PruneBytes)
	}
	msgs := rec.all()[0].req.Messages
	text := msgs[2].Content[0].Content[0].Text
	if len(text) > compaction.DefaultPruneBytes || !strings.HasPrefix(text, "BEGIN") || !strings.HasSuffix(text, "END") || !strings.Contains(text, "omitted for the summary") {
		t.Errorf("summary request carries a %d-byte result: %.80q…", len(text), text)
	}
	for _, e := range events {
		if e.Type == session.TypeCompactionPrune {
			t.Error("compaction/prune logged, but the surface was not pruned")
		}
	}
	// The tail is the last exchange, verbatim.
	live := b.log.Messages()
	if len(live) != 2 || live[1].Text() != "done" || !compaction.IsSummary(live[0]) {
		t.Errorf("history after compaction: %+v", live)
	}
}

func TestCancelDuringSummary(t *testing.T) {
	srv := llmtest.New()
	t.Cleanup(srv.Close)
	srv.Enqueue(llmtest.Response{Text: summaryText, StallAfter: llmtest.AtStart})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	srv.SetOnRequest(func(llmtest.Request) { cancel() })
	b := newLogBuilder(t)
	b.header()
	b.window(100)
	b.user(strings.Repeat("old ", 100))
	b.assistant("old answer", nil)
	b.user("new")
	c := compaction.New(compaction.Options{
		Log:     b.log,
		Adapter: openai.New(openai.Config{Provider: "deepseek", BaseURL: srv.URL(), APIKey: "k", DeepSeek: true, IdleTimeout: 5 * time.Second}),
	})
	before := b.log.Messages()
	enter, reject, err := c.PreStep(ctx, agent.PreStep{Turn: 1, Step: 1})
	if !errors.Is(err, context.Canceled) || reject || enter != nil {
		t.Fatalf("PreStep = %v, %v, %v; want a cancellation error", enter, reject, err)
	}
	ends := eventsOf[compaction.EndPayload](t, b.log.Events(), session.TypeCompactionEnd)
	if len(ends) != 1 || ends[0].Error == nil || ends[0].Error.Code != llm.CodeAborted {
		t.Errorf("compaction/end %+v", ends)
	}
	if !reflect.DeepEqual(b.log.Messages(), before) {
		t.Error("a cancelled compaction changed the history")
	}
	checkLog(t, b.log)
}

func TestOverflowRetryOncePerStep(t *testing.T) {
	srv := llmtest.New()
	t.Cleanup(srv.Close)
	b := newLogBuilder(t)
	b.header()
	for range 3 {
		b.user("question")
		b.assistant("answer", nil)
	}
	c := compaction.New(compaction.Options{
		Log:     b.log,
		Adapter: openai.New(openai.Config{Provider: "deepseek", BaseURL: srv.URL(), APIKey: "k", DeepSeek: true, IdleTimeout: 5 * time.Second}),
	})
	overflow := &llm.Failure{Code: llm.CodeContextWindowExceeded, Message: "too long"}
	for _, tc := range []struct {
		name      string
		in        agent.RequestError
		summary   *llmtest.Response // nil: no summary call expected
		wantRetry bool
	}{
		{"other failures are not handled", agent.RequestError{Turn: 1, Step: 1, Failure: &llm.Failure{Code: llm.CodeServer}}, nil, false},
		{"failed summary: no retry", agent.RequestError{Turn: 1, Step: 1, Failure: overflow}, &llmtest.Response{Status: 500}, false},
		{"same step again: not even tried", agent.RequestError{Turn: 1, Step: 1, Failure: overflow}, nil, false},
		{"next step: compact and retry", agent.RequestError{Turn: 1, Step: 2, Failure: overflow}, &llmtest.Response{Text: summaryText}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			calls := srv.RequestCount()
			if tc.summary != nil {
				srv.Enqueue(*tc.summary)
			}
			if got := c.RequestError(t.Context(), tc.in); got != tc.wantRetry {
				t.Errorf("RequestError = %v, want %v", got, tc.wantRetry)
			}
			want := 0
			if tc.summary != nil {
				want = 1
			}
			if n := srv.RequestCount() - calls; n != want {
				t.Errorf("%d summary calls, want %d", n, want)
			}
		})
	}
	checkLog(t, b.log)
	// Maximal reduction kept only the last message verbatim.
	if live := b.log.Messages(); len(live) != 2 || !compaction.IsSummary(live[0]) || live[1].Text() != "answer" {
		t.Errorf("history after overflow compaction: %+v", live)
	}
}
