package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/dsh-dev/dsh/internal/compaction"
	"github.com/dsh-dev/dsh/internal/llm"
	"github.com/dsh-dev/dsh/internal/llm/llmtest"
	"github.com/dsh-dev/dsh/internal/llm/openai"
	"github.com/dsh-dev/dsh/internal/session"
)

// compactionSeed builds the events of a session with exactly messages
// surface messages: each exchange is a user prompt, then two or three
// bash steps (assistant message with a call, tool result), then a final
// answer, and every assistant message carries usage like a provider's.
// Tool results range from a one-line status to a 12 KB listing, in a fixed
// pseudo-random mix, so the session resembles a real coding session of
// about 200k tokens.
func compactionSeed(messages int) []session.Event {
	var events []session.Event
	prefix := 0 // bytes of the prompt so far, for realistic usage
	add := func(typ string, data any, surface bool) {
		raw, err := json.Marshal(data)
		if err != nil {
			panic(err)
		}
		prefix += len(raw)
		e := session.Event{Type: typ, Seq: int64(len(events)), Time: 1, Data: raw}
		if surface {
			e.SurfaceOp = session.Append
		}
		events = append(events, e)
	}
	add(session.TypeRequestHeader, session.RequestHeader{Reason: "initial", Header: session.RequestHeaderData{
		Config: session.CallConfig{Provider: "deepseek", Model: "deepseek-v4-flash"},
		System: strings.Repeat("You are dsh, a coding agent. Follow the user's instructions. ", 40),
		Tools:  []llm.ToolSchema{{Name: "bash", Description: strings.Repeat("Run a command. ", 60), Parameters: json.RawMessage(`{"type":"object","properties":{"command":{"type":"string"}}}`)}},
	}}, false)
	add(session.TypeRequestContext, session.RequestContext{Provider: "deepseek", Model: "deepseek-v4-flash", ContextWindow: 200_000}, false)
	sizes := []int{120, 2400, 600, 12000, 300, 4800, 900, 7000}
	line := "drwxr-xr-x  2 dev dev 4096 Nov 30 12:00 internal/compaction/plan.go ok\n"
	n, call, prompt := 0, 0, 0
	usage := func() *llm.Usage {
		return &llm.Usage{InputTokens: 500, CacheReadTokens: int64(max(prefix/4-500, 0)), OutputTokens: 120}
	}
	model := llm.Source{Kind: "model", Provider: "deepseek", Model: "deepseek-v4-flash"}
	for n < messages {
		prompt++
		add(session.TypeUserMessage, llm.Message{ID: fmt.Sprint("u", prompt), Role: llm.RoleUser, Source: llm.Source{Kind: "user"},
			Content: []llm.Block{llm.TextBlock(fmt.Sprintf("Task %d: fix the failing test in package %d and explain the cause.", prompt, prompt))}}, true)
		n++
		for s := 0; s < 2+prompt%2 && n+3 <= messages; s++ {
			call++
			id := fmt.Sprint("call_", call)
			add(session.TypeAssistantMsg, session.AssistantMessage{Turn: prompt, Step: s + 1, Usage: usage(), Message: llm.Message{
				ID: "a" + id, Role: llm.RoleAssistant, Source: model, Content: []llm.Block{
					{Type: llm.BlockReasoning, Text: "I should look at the files involved before changing anything."},
					llm.TextBlock("Let me check."),
					{Type: llm.BlockToolCall, ID: id, Name: "bash", Arguments: fmt.Sprintf(`{"command":"ls -la internal/%d && go test ./internal/%d/..."}`, call, call)},
				}}}, true)
			out := strings.Repeat(line, sizes[call%len(sizes)]/len(line)+1)
			add(session.TypeToolResult, session.ToolResult{Turn: prompt, Step: s + 1, CallID: id, Name: "bash",
				Content: []llm.Block{llm.TextBlock(out + "[exit code: 0]")}}, true)
			n += 2
		}
		if n < messages {
			add(session.TypeAssistantMsg, session.AssistantMessage{Turn: prompt, Step: 3, Usage: usage(), Message: llm.Message{
				ID: fmt.Sprint("final", prompt), Role: llm.RoleAssistant, Source: model,
				Content: []llm.Block{llm.TextBlock("The test failed because the fixture was stale; I regenerated it and the package passes now.")}}}, true)
			n++
		}
	}
	return events
}

// BenchmarkCompaction500 compacts a 500-message session against the fake
// model server, which answers at once. The model call (request encoding,
// loopback HTTP, the fake server's work, stream decoding) is timed inside
// the compactor and reported apart; overhead-ms is everything else:
// snapshotting and metering the history, planning, building and pruning
// the summary request and logging the four events. estimate-us is the
// pre-step pressure check on the same session, paid on every step.
func BenchmarkCompaction500(b *testing.B) {
	seed := compactionSeed(500)
	srv := llmtest.New()
	b.Cleanup(srv.Close)
	srv.SetFallback(func(r llmtest.Request) llmtest.Response {
		return llmtest.Response{Text: "Summary: the user fixed several failing tests; all pass now.", ChunkRunes: 64, Usage: &llmtest.Usage{Input: 100, CacheRead: len(r.Body) / 4, Output: 20}}
	})
	ad := openai.New(openai.Config{Provider: "deepseek", BaseURL: srv.URL(), APIKey: "k", DeepSeek: true})
	ctx := context.Background()
	var total, model, estimate time.Duration
	var shadowed, before, after int
	for i := 0; b.Loop(); i++ {
		b.StopTimer()
		log, err := session.NewLog(session.Header{ID: fmt.Sprint("bench-compaction-", i)}, seed, nil)
		if err != nil {
			b.Fatal(err)
		}
		if got := len(log.Messages()); got != 500 {
			b.Fatalf("seed has %d messages, want 500", got)
		}
		c := compaction.New(compaction.Options{Log: log, Adapter: ad})
		t0 := time.Now()
		c.Estimate(nil)
		estimate += time.Since(t0)
		b.StartTimer()
		res, err := c.Compact(ctx, "bench")
		if err != nil || !res.Compacted {
			b.Fatalf("Compact = %+v, %v", res, err)
		}
		total += res.Duration
		model += res.ModelTime
		shadowed, before, after = res.Shadowed, res.TokensBefore, res.TokensAfter
	}
	ms := func(d time.Duration) float64 { return float64(d) / float64(b.N) / 1e6 }
	b.ReportMetric(ms(total), "compaction-ms")
	b.ReportMetric(ms(model), "model-ms")
	b.ReportMetric(ms(total-model), "overhead-ms")
	b.ReportMetric(ms(estimate)*1000, "estimate-us")
	b.ReportMetric(float64(shadowed), "shadowed-msgs")
	b.ReportMetric(float64(before), "tokens-before")
	b.ReportMetric(float64(after), "tokens-after")
}
