package agent_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/dsh-dev/dsh/internal/agent"
	"github.com/dsh-dev/dsh/internal/llm"
	"github.com/dsh-dev/dsh/internal/llm/llmtest"
	"github.com/dsh-dev/dsh/internal/proc/proctest"
	"github.com/dsh-dev/dsh/internal/session"
	"github.com/dsh-dev/dsh/internal/tool"
)

func TestMultiStepBashTask(t *testing.T) {
	h := newHarness(t)
	h.srv.Enqueue(
		llmtest.Response{ToolCalls: []llmtest.ToolCall{bashCall("echo one > f.txt")}, Usage: &llmtest.Usage{Input: 10, Output: 5}},
		llmtest.Response{Text: "checking", ToolCalls: []llmtest.ToolCall{bashCall("cat f.txt; exit 3")}, Usage: &llmtest.Usage{Input: 20, CacheRead: 10, Output: 5}},
		llmtest.Response{Text: "done: one", Usage: &llmtest.Usage{Input: 30, Output: 7}},
	)
	out := h.run(t.Context(), "write and read a file")
	if out.Reason.Kind != session.EndCompleted || out.Text != "done: one" {
		t.Fatalf("outcome = %+v", out)
	}
	if want := (llm.Usage{InputTokens: 60, CacheReadTokens: 10, OutputTokens: 17}); out.Usage != want {
		t.Errorf("usage = %+v, want %+v", out.Usage, want)
	}
	events := h.log.Events()
	checkBalanced(t, events)
	res := toolResults(t, events)
	if len(res) != 2 || res[0].IsError || res[1].IsError {
		t.Fatalf("tool results = %+v", res)
	}
	if got := resultText(res[1]); !strings.Contains(got, "one") || !strings.Contains(got, "[exit code: 3]") {
		t.Errorf("second result %q lacks output and exit code", got)
	}
	reqs := h.srv.Requests()
	if len(reqs) != 3 {
		t.Fatalf("%d requests, want 3", len(reqs))
	}
	// The third request carries the whole history derived from the log.
	msgs := reqs[2].Messages()
	var roles []string
	for _, m := range msgs {
		roles = append(roles, m["role"].(string))
	}
	if got := strings.Join(roles, ","); got != "system,user,assistant,tool,assistant,tool" {
		t.Errorf("roles of third request = %s", got)
	}
	if ts := reqs[0].ToolNames(); len(ts) != 1 || ts[0] != "bash" {
		t.Errorf("tools sent = %v", ts)
	}
	// One request/header (initial) and one request/context for the run.
	hdrs := eventsOf[session.RequestHeader](t, events, session.TypeRequestHeader)
	if len(hdrs) != 1 || hdrs[0].Reason != "initial" || hdrs[0].Header.System == "" || len(hdrs[0].Header.Tools) != 1 {
		t.Errorf("request headers = %+v", hdrs)
	}
	if n := len(eventsOf[session.RequestContext](t, events, session.TypeRequestContext)); n != 1 {
		t.Errorf("%d request/context events, want 1", n)
	}
	// Every streamed chunk is logged and cited by its assistant message.
	chunks := 0
	for _, e := range events {
		if e.Type == session.TypeAssistantChunk {
			chunks++
		}
	}
	cited := 0
	for _, e := range events {
		if e.Type == session.TypeAssistantMsg {
			cited += len(e.SourceEventSeqs)
		}
	}
	if chunks == 0 || cited != chunks {
		t.Errorf("%d chunks logged, %d cited", chunks, cited)
	}
}

func TestReasoningPassback(t *testing.T) {
	h := newHarness(t)
	h.srv.Enqueue(
		llmtest.Response{Reasoning: "I should run true.", ToolCalls: []llmtest.ToolCall{bashCall("true")}},
		llmtest.Response{Reasoning: "Done.", Text: "ok"},
	)
	if out := h.run(t.Context(), "go"); out.Reason.Kind != session.EndCompleted {
		t.Fatalf("outcome %+v", out)
	}
	reqs := h.srv.Requests()
	var found bool
	for _, m := range reqs[1].Messages() {
		if m["role"] == "assistant" {
			found = m["reasoning_content"] == "I should run true."
		}
	}
	if !found {
		t.Errorf("second request lacks reasoning passback: %s", reqs[1].Body)
	}
	ams := eventsOf[session.AssistantMessage](t, h.log.Events(), session.TypeAssistantMsg)
	if ams[0].Message.Content[0].Type != llm.BlockReasoning {
		t.Errorf("reasoning not logged as a block: %+v", ams[0].Message.Content)
	}
}

func TestRetries(t *testing.T) {
	for _, tc := range []struct {
		name      string
		fault     llmtest.Response
		code      llm.Code
		wantDelay time.Duration
	}{
		{"429 with Retry-After", llmtest.Response{Status: 429, RetryAfter: "2"}, llm.CodeRateLimit, 2 * time.Second},
		{"mid-stream disconnect", llmtest.Response{Text: "partial answer that breaks", DisconnectAfter: 3}, llm.CodeTransport, 0},
		{"empty completion", llmtest.Response{Empty: true}, llm.CodeEmptyResponse, 0},
		{"server error", llmtest.Response{Status: 503}, llm.CodeServer, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			h.srv.Enqueue(tc.fault, llmtest.Response{Text: "recovered"})
			out := h.run(t.Context(), "hi")
			if out.Reason.Kind != session.EndCompleted || out.Text != "recovered" {
				t.Fatalf("outcome %+v", out)
			}
			events := h.log.Events()
			checkBalanced(t, events)
			retries := eventsOf[session.LLMRetry](t, events, session.TypeLLMRetry)
			if len(retries) != 1 || retries[0].Failure.Code != tc.code || retries[0].Retry != 1 || retries[0].Turn != 1 || retries[0].Step != 1 {
				t.Fatalf("retries = %+v", retries)
			}
			if len(eventsOf[session.LLMRetryStarted](t, events, session.TypeLLMRetryStart)) != 1 {
				t.Error("no llm/retry-started")
			}
			if tc.wantDelay != 0 && h.delays[0] != tc.wantDelay {
				t.Errorf("delay = %v, want %v", h.delays[0], tc.wantDelay)
			}
			// Only one assistant/message: failed attempts leave chunks but no message.
			if n := len(eventsOf[session.AssistantMessage](t, events, session.TypeAssistantMsg)); n != 1 {
				t.Errorf("%d assistant messages, want 1", n)
			}
		})
	}
}

func TestModelFailuresEndTheTurn(t *testing.T) {
	for _, tc := range []struct {
		name     string
		script   []llmtest.Response
		code     llm.Code
		requests int
	}{
		{"malformed stream", []llmtest.Response{{Text: "abc", MalformedAfter: 2}}, llm.CodeMalformedResponse, 1},
		{"auth", []llmtest.Response{{Status: 401}}, llm.CodeAuth, 1},
		{"context window", []llmtest.Response{{Status: 400, ErrorBody: `{"error":{"message":"This model's maximum context length is 10 tokens","type":"invalid_request_error","code":"context_length_exceeded"}}`}}, llm.CodeContextWindowExceeded, 1},
		{"retries exhausted", []llmtest.Response{{Empty: true}, {Empty: true}, {Empty: true}, {Empty: true}, {Empty: true}, {Empty: true}}, llm.CodeEmptyResponse, 6},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			h.srv.Enqueue(tc.script...)
			out := h.run(t.Context(), "hi")
			if out.Reason.Kind != session.EndError || out.Reason.Failure == nil || out.Reason.Failure.Code != tc.code {
				t.Fatalf("outcome %+v", out)
			}
			if n := h.srv.RequestCount(); n != tc.requests {
				t.Errorf("%d requests, want %d", n, tc.requests)
			}
			events := h.log.Events()
			checkBalanced(t, events)
			ends := eventsOf[session.TurnEnd](t, events, session.TypeTurnEnd)
			if ends[0].Reason.Failure.Code != tc.code {
				t.Errorf("logged turn end %+v", ends[0])
			}
			// The agent stays usable.
			h.srv.Enqueue(llmtest.Response{Text: "fine"})
			if out := h.run(t.Context(), "again"); out.Reason.Kind != session.EndCompleted || out.Turn != 2 {
				t.Errorf("next turn %+v", out)
			}
		})
	}
}

func TestToolErrorsDoNotEndTheTurn(t *testing.T) {
	h := newHarness(t)
	h.srv.Enqueue(
		llmtest.Response{ToolCalls: []llmtest.ToolCall{
			{Name: "bash", Arguments: `{"command": "echo hi"`},
			{Name: "no_such_tool", Arguments: `{}`},
			{Name: "bash", Arguments: `{"command": 42}`},
		}},
		llmtest.Response{Text: "handled"},
	)
	out := h.run(t.Context(), "hi")
	if out.Reason.Kind != session.EndCompleted || out.Text != "handled" {
		t.Fatalf("outcome %+v", out)
	}
	events := h.log.Events()
	checkBalanced(t, events)
	res := toolResults(t, events)
	want := []string{tool.CodeInvalidArgs, tool.CodeUnknownTool, tool.CodeInvalidArgs}
	for i, r := range res {
		if !r.IsError || r.Error == nil || r.Error.Code != want[i] {
			t.Errorf("result %d = %+v, want code %s", i, r, want[i])
		}
	}
	// The raw, invalid argument string is logged exactly as sent.
	calls := eventsOf[session.ToolCall](t, events, session.TypeToolCall)
	if calls[0].Arguments != `{"command": "echo hi"` {
		t.Errorf("logged arguments %q", calls[0].Arguments)
	}
}

func TestMaxTokensDropsToolCalls(t *testing.T) {
	h := newHarness(t)
	h.srv.Enqueue(llmtest.Response{Text: "truncated", ToolCalls: []llmtest.ToolCall{bashCall("echo should-not-run")}, FinishReason: "max-tokens"})
	out := h.run(t.Context(), "hi")
	if out.Reason.Kind != session.EndMaxTokens {
		t.Fatalf("outcome %+v", out)
	}
	events := h.log.Events()
	checkBalanced(t, events)
	if n := len(eventsOf[session.ToolCall](t, events, session.TypeToolCall)); n != 0 {
		t.Errorf("%d tool calls executed after max-tokens", n)
	}
}

func TestCancelMidStreamKeepsVisiblePrefix(t *testing.T) {
	h := newHarness(t)
	h.srv.Enqueue(llmtest.Response{Text: "hello there, this stream stalls", ChunkRunes: 6, StallAfter: 3})
	seen := make(chan struct{})
	var once atomic.Bool
	h.log.Observe(func(e session.Event) {
		if e.Type == session.TypeAssistantChunk && strings.Contains(string(e.Data), "text-delta") && once.CompareAndSwap(false, true) {
			close(seen)
		}
	})
	go func() {
		<-seen
		_ = h.agent.Cancel("user", true)
	}()
	out := h.run(t.Context(), "hi")
	if out.Reason.Kind != session.EndAborted || out.Reason.Cause != "user" {
		t.Fatalf("outcome %+v", out)
	}
	events := h.log.Events()
	checkBalanced(t, events)
	ams := eventsOf[session.AssistantMessage](t, events, session.TypeAssistantMsg)
	if len(ams) != 1 || !ams[0].Interrupted || !strings.HasPrefix("hello there, this stream stalls", ams[0].Message.Text()) || ams[0].Message.Text() == "" {
		t.Fatalf("interrupted message = %+v", ams)
	}
	// The next request contains what the user saw.
	h.srv.Enqueue(llmtest.Response{Text: "resumed"})
	if out := h.run(t.Context(), "continue"); out.Reason.Kind != session.EndCompleted {
		t.Fatalf("next turn %+v", out)
	}
	reqs := h.srv.Requests()
	msgs := reqs[len(reqs)-1].Messages()
	if msgText(msgs[2]) != ams[0].Message.Text() {
		t.Errorf("prefix not replayed: %v", msgs)
	}
}

func TestCancelDuringToolAbortsTheRest(t *testing.T) {
	h := newHarness(t)
	fifo, lines := proctest.Fifo(t)
	h.srv.Enqueue(llmtest.Response{ToolCalls: []llmtest.ToolCall{
		bashCall("echo started > " + fifo + "; sleep 30"),
		bashCall("echo never"),
	}})
	go func() {
		<-lines
		_ = h.agent.Cancel("user", true)
	}()
	out := h.run(t.Context(), "hi")
	if out.Reason.Kind != session.EndAborted {
		t.Fatalf("outcome %+v", out)
	}
	events := h.log.Events()
	checkBalanced(t, events)
	res := toolResults(t, events)
	if len(res) != 2 || res[0].Error == nil || res[0].Error.Code != tool.CodeAborted || res[1].Error == nil || res[1].Error.Code != tool.CodeAbortedBeforeDispatch {
		t.Fatalf("results = %+v", res)
	}
	if h.srv.RequestCount() != 1 {
		t.Errorf("model called again after cancel")
	}
}

func TestCancelWithoutKeepInboxDropsQueue(t *testing.T) {
	h := newHarness(t)
	if err := h.agent.Queue(agent.NewUserMessage("later")); err != nil {
		t.Fatal(err)
	}
	if err := h.agent.Cancel("user", false); err != nil {
		t.Fatal(err)
	}
	if nt, ns := h.agent.Pending(); nt != 0 || ns != 0 {
		t.Errorf("pending after cancel = %d,%d", nt, ns)
	}
	sp := eventsOf[session.InboxSpliced](t, h.log.Events(), session.TypeInboxSpliced)
	if len(sp) != 2 || sp[1].Outcome != "canceled" || sp[1].RemovedCount != 1 {
		t.Errorf("splices = %+v", sp)
	}
}

// barrierTool is concurrency-safe and returns only once n calls are in
// flight at the same time, so it proves the scheduler overlaps them.
func barrierTool(n int) tool.Definition {
	var inFlight atomic.Int32
	all := make(chan struct{})
	return tool.Definition{
		Name: "probe", Description: "test probe",
		Parameters:      json.RawMessage(`{"type":"object","properties":{"id":{"type":"string"}}}`),
		ConcurrencySafe: func(json.RawMessage) bool { return true },
		Execute: func(ctx context.Context, c *tool.Call) (tool.Result, error) {
			if inFlight.Add(1) == int32(n) {
				close(all)
			}
			select {
			case <-all:
			case <-ctx.Done():
				return tool.Result{}, ctx.Err()
			case <-time.After(10 * time.Second):
				return tool.Result{}, tool.Errorf("NOT_PARALLEL", "calls did not overlap")
			}
			var a struct{ ID string }
			_ = json.Unmarshal(c.Arguments, &a)
			return tool.Text("probe " + a.ID), nil
		},
	}
}

func TestConcurrencySafeCallsOverlapAndCommitInOrder(t *testing.T) {
	h := newHarness(t, barrierTool(3))
	h.srv.Enqueue(
		llmtest.Response{ToolCalls: []llmtest.ToolCall{
			{Name: "probe", Arguments: `{"id":"a"}`},
			{Name: "probe", Arguments: `{"id":"b"}`},
			{Name: "probe", Arguments: `{"id":"c"}`},
			bashCall("echo exclusive"),
		}},
		llmtest.Response{Text: "ok"},
	)
	out := h.run(t.Context(), "hi")
	if out.Reason.Kind != session.EndCompleted {
		t.Fatalf("outcome %+v", out)
	}
	events := h.log.Events()
	checkBalanced(t, events)
	res := toolResults(t, events)
	var got []string
	for _, r := range res {
		if r.IsError {
			t.Fatalf("result error: %+v", r)
		}
		got = append(got, strings.SplitN(resultText(r), "\n", 2)[0])
	}
	if strings.Join(got, "|") != "probe a|probe b|probe c|exclusive" {
		t.Errorf("results out of model order: %q", got)
	}
}

func TestSteerEntersTheRunningTurn(t *testing.T) {
	h := newHarness(t)
	fifo, lines := proctest.Fifo(t)
	// The command then blocks on a second FIFO until the steer is queued, so
	// the steer always lands while the turn is still running.
	gate := filepath.Join(t.TempDir(), "gate")
	if err := syscall.Mkfifo(gate, 0o600); err != nil {
		t.Fatal(err)
	}
	h.srv.Enqueue(
		llmtest.Response{ToolCalls: []llmtest.ToolCall{bashCall("echo go > " + fifo + "; read x < " + gate)}},
		llmtest.Response{Text: "steered"},
	)
	steered := make(chan error, 1)
	go func() {
		<-lines
		err := h.agent.Steer(agent.NewUserMessage("also do X"))
		// Opening for write blocks until the command opens the gate to read.
		if f, ferr := os.OpenFile(gate, os.O_WRONLY, 0); ferr == nil {
			_, _ = f.WriteString("go\n")
			f.Close()
		}
		steered <- err
	}()
	out := h.run(t.Context(), "hi")
	if err := <-steered; err != nil {
		t.Fatalf("steer: %v", err)
	}
	if out.Reason.Kind != session.EndCompleted || out.Turn != 1 {
		t.Fatalf("outcome %+v", out)
	}
	reqs := h.srv.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests", len(reqs))
	}
	msgs := reqs[1].Messages()
	if last := msgs[len(msgs)-1]; last["role"] != "user" || msgText(last) != "also do X" {
		t.Errorf("steered message not in step 2: %v", msgs)
	}
	checkBalanced(t, h.log.Events())
}

func TestResumeContinuesTheSession(t *testing.T) {
	h := newHarness(t)
	h.srv.Enqueue(llmtest.Response{Reasoning: "r", Text: "first"})
	h.run(t.Context(), "one")
	// A new agent over the same events, as after a restart.
	log2, err := session.NewLog(h.log.Header(), h.log.Events(), nil)
	if err != nil {
		t.Fatal(err)
	}
	h.log, h.agent = log2, h.newAgent(log2)
	h.srv.Enqueue(llmtest.Response{Text: "second"})
	out := h.run(t.Context(), "two")
	if out.Turn != 2 || out.Text != "second" {
		t.Fatalf("outcome %+v", out)
	}
	events := log2.Events()
	checkBalanced(t, events)
	hdrs := eventsOf[session.RequestHeader](t, events, session.TypeRequestHeader)
	if len(hdrs) != 2 || hdrs[1].Reason != "resume" {
		t.Errorf("headers = %+v", hdrs)
	}
	seeds := 0
	for _, e := range events {
		if e.Type == session.TypeEndSeed {
			seeds++
		}
	}
	if seeds != 1 {
		t.Errorf("%d session/end-seed events", seeds)
	}
	msgs := h.srv.Requests()[1].Messages()
	if len(msgs) != 4 || msgs[2]["reasoning_content"] != "r" {
		t.Errorf("resumed request history = %v", msgs)
	}
}

func TestRunWithEmptyInboxIsANoop(t *testing.T) {
	h := newHarness(t)
	out, err := h.agent.Run(t.Context())
	if err != nil || out.Reason.Kind != session.EndCompleted || h.log.Len() != 0 {
		t.Fatalf("out=%+v err=%v len=%d", out, err, h.log.Len())
	}
}

func TestServeWakesOnQueueAndSteerButNotInject(t *testing.T) {
	h := newHarness(t)
	outcomes := make(chan agent.Outcome, 4)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- h.agent.Serve(ctx, func(o agent.Outcome) { outcomes <- o }) }()

	// Injected context alone does not start a turn…
	if err := h.agent.Inject(agent.NewUserMessage("context only")); err != nil {
		t.Fatal(err)
	}
	// …but it rides along with the next woken turn.
	h.srv.Enqueue(llmtest.Response{Text: "one"}, llmtest.Response{Text: "two"})
	if err := h.agent.Queue(agent.NewUserMessage("queued")); err != nil {
		t.Fatal(err)
	}
	if o := <-outcomes; o.Text != "one" || o.Turn != 1 {
		t.Fatalf("first outcome %+v", o)
	}
	msgs := h.srv.Requests()[0].Messages()
	if len(msgs) != 3 || msgText(msgs[1]) != "context only" || msgText(msgs[2]) != "queued" {
		t.Errorf("first request messages %v", msgs)
	}
	if err := h.agent.Steer(agent.NewUserMessage("steer an idle agent")); err != nil {
		t.Fatal(err)
	}
	if o := <-outcomes; o.Text != "two" || o.Turn != 2 {
		t.Fatalf("second outcome %+v", o)
	}
	cancel()
	if err := <-done; err == nil {
		t.Error("Serve returned nil after cancel")
	}
	checkBalanced(t, h.log.Events())
}
