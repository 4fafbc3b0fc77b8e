package bench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/dsh-dev/dsh/internal/compaction"
	"github.com/dsh-dev/dsh/internal/llm"
	"github.com/dsh-dev/dsh/internal/llm/anthropic"
	"github.com/dsh-dev/dsh/internal/llm/openai"
	"github.com/dsh-dev/dsh/internal/session"
)

// sinkTransport reads the whole request body, as a connection would, and
// answers with an empty event stream: the request path without a network
// or a server.
type sinkTransport struct{}

func (sinkTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	_, _ = io.Copy(io.Discard, r.Body)
	_ = r.Body.Close()
	return &http.Response{
		StatusCode: http.StatusOK,
		Header:     http.Header{"Content-Type": {"text/event-stream"}},
		Body:       io.NopCloser(strings.NewReader("")),
		Request:    r,
	}, nil
}

// historyLog returns a log of steps tool steps as the agent logs them: a
// prompt, then per step an assistant message with a bash call and a user
// message with its ~400-byte result; each model call reported its usage.
func historyLog(b *testing.B, steps int) *session.Log {
	h := session.Header{Version: session.FormatVersion, ID: "encode-bench", CreatedAt: time.Now().UnixMilli(), Cwd: "/tmp"}
	log, err := session.NewLog(h, nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	add := func(typ string, data any) {
		if _, err := log.Append(typ, data, session.Surface()); err != nil {
			b.Fatal(err)
		}
	}
	add(session.TypeUserMessage, llm.Message{ID: "u0", Role: llm.RoleUser, Content: []llm.Block{llm.TextBlock("run the tests until they pass")}})
	out := strings.Repeat("ok  \tgithub.com/x/y/pkg\t0.012s \"quoted\" <tag>\n", 9)
	for i := range steps {
		id := fmt.Sprintf("call_%d", i)
		add(session.TypeAssistantMsg, session.AssistantMessage{Turn: 1, Step: i + 1, Usage: &llm.Usage{InputTokens: int64(1000 + 150*i), OutputTokens: 40}, Message: llm.Message{
			ID: fmt.Sprintf("a%d", i), Role: llm.RoleAssistant, Content: []llm.Block{
				{Type: llm.BlockReasoning, Text: "The previous run printed its result; run the next check."},
				{Type: llm.BlockToolCall, ID: id, Name: "bash", Arguments: stepArgs},
			}}})
		add(session.TypeUserMessage, session.ToolResultMessage(session.ToolResult{CallID: id, Name: "bash", Content: []llm.Block{llm.TextBlock(out + "\n[exit code: 0]")}}))
	}
	return log
}

// BenchmarkRequestPath measures the per-step CPU of building and sending
// one model request at a history of 10, 500 and 2,000 tool steps: the
// derived history (Log.History), the adapter's request conversion and
// JSON encoding, and the HTTP request (body read by a sink transport).
// The request carries the session's encode cache, as the agent's do.
func BenchmarkRequestPath(b *testing.B) {
	hc := &http.Client{Transport: sinkTransport{}}
	adapters := []struct {
		name string
		ad   llm.Adapter
	}{
		{"openai", openai.New(openai.Config{Provider: "deepseek", BaseURL: "http://sink", APIKey: "k", DeepSeek: true, HTTPClient: hc})},
		{"anthropic", anthropic.New(anthropic.Config{Provider: "anthropic", BaseURL: "http://sink", APIKey: "k", HTTPClient: hc})},
	}
	tools := []llm.ToolSchema{{Name: "bash", Description: "Run a command.", Parameters: []byte(`{"type":"object","properties":{"command":{"type":"string"}}}`)}}
	for _, a := range adapters {
		for _, steps := range []int{10, 500, 2000} {
			b.Run(fmt.Sprintf("%s/history=%d", a.name, steps), func(b *testing.B) {
				log := historyLog(b, steps)
				cache := new(llm.EncodeCache)
				send := func() {
					req := llm.Request{Model: "m", System: "bench", Messages: log.History(), Tools: tools, SessionID: log.ID(), EncodeCache: cache}
					for _, err := range a.ad.Stream(context.Background(), req) {
						_ = err
					}
				}
				send()
				b.ReportAllocs()
				b.ResetTimer()
				c0 := cpuTime()
				for range b.N {
					send()
				}
				b.ReportMetric(float64(cpuTime()-c0)/float64(time.Microsecond)/float64(b.N), "cpu-µs/step")
			})
		}
	}
}

// BenchmarkCompactionEstimate measures the compaction meter's estimate of
// the next request's size, which the compaction hook makes before every
// step, at a history of 10, 500 and 2,000 tool steps.
func BenchmarkCompactionEstimate(b *testing.B) {
	for _, steps := range []int{10, 500, 2000} {
		b.Run(fmt.Sprintf("history=%d", steps), func(b *testing.B) {
			log := historyLog(b, steps)
			c := compaction.New(compaction.Options{Log: log})
			c.Estimate(nil)
			b.ReportAllocs()
			b.ResetTimer()
			c0 := cpuTime()
			for range b.N {
				c.Estimate(nil)
			}
			b.ReportMetric(float64(cpuTime()-c0)/float64(time.Microsecond)/float64(b.N), "cpu-µs/step")
		})
	}
}
