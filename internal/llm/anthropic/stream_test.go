package anthropic

import (
	"context"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/dsh-dev/dsh/internal/llm"
)

const messageStart = `{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","content":[],"model":"claude","stop_reason":null,"usage":{"input_tokens":12,"cache_creation_input_tokens":300,"cache_read_input_tokens":4000,"output_tokens":1}}}`

const ping = `{"type":"ping"}`

func blockStart(i int, cb string) string {
	return fmt.Sprintf(`{"type":"content_block_start","index":%d,"content_block":%s}`, i, cb)
}

func blockDelta(i int, d string) string {
	return fmt.Sprintf(`{"type":"content_block_delta","index":%d,"delta":%s}`, i, d)
}

func blockStop(i int) string { return fmt.Sprintf(`{"type":"content_block_stop","index":%d}`, i) }

func messageDelta(reason string, out int) string {
	return fmt.Sprintf(`{"type":"message_delta","delta":{"stop_reason":"%s","stop_sequence":null},"usage":{"output_tokens":%d}}`, reason, out)
}

const messageStop = `{"type":"message_stop"}`

func textEvents(text, reason string) []string {
	return []string{
		messageStart,
		blockStart(0, `{"type":"text","text":""}`),
		blockDelta(0, `{"type":"text_delta","text":"`+text+`"}`),
		blockStop(0),
		messageDelta(reason, 5),
		messageStop,
	}
}

func TestStreamThinkingTextAndToolUse(t *testing.T) {
	srv, _ := server(t, sseBody(
		messageStart,
		blockStart(0, `{"type":"thinking","thinking":"","signature":""}`),
		blockDelta(0, `{"type":"thinking_delta","thinking":"I should "}`),
		ping,
		blockDelta(0, `{"type":"thinking_delta","thinking":"read it."}`),
		blockDelta(0, `{"type":"signature_delta","signature":"EqQBCgIYAhIM"}`),
		blockStop(0),
		blockStart(1, `{"type":"redacted_thinking","data":"ENCRYPTED"}`),
		blockStop(1),
		blockStart(2, `{"type":"text","text":""}`),
		blockDelta(2, `{"type":"text_delta","text":"Reading."}`),
		blockStop(2),
		blockStart(3, `{"type":"tool_use","id":"toolu_1","name":"read","input":{}}`),
		blockDelta(3, `{"type":"input_json_delta","partial_json":""}`),
		blockDelta(3, `{"type":"input_json_delta","partial_json":"{\"path\": "}`),
		blockDelta(3, `{"type":"input_json_delta","partial_json":"\"a.go\"}"}`),
		blockStop(3),
		blockStart(4, `{"type":"tool_use","id":"toolu_2","name":"now","input":{}}`),
		blockStop(4),
		blockStart(5, `{"type":"server_tool_use","id":"srv_1","name":"web_search","input":{}}`),
		blockDelta(5, `{"type":"input_json_delta","partial_json":"{}"}`),
		blockStop(5),
		messageDelta("tool_use", 90),
		messageStop,
	))
	res := drain(t, t.Context(), client(t, srv, Config{}), llm.Request{Model: "claude"})
	if res.Failure != nil {
		t.Fatalf("failure: %v", res.Failure)
	}
	want := []llm.Block{
		{Type: llm.BlockReasoning, Text: "I should read it.", Signature: "EqQBCgIYAhIM"},
		{Type: llm.BlockReasoning, Signature: "ENCRYPTED"},
		{Type: llm.BlockText, Text: "Reading."},
		{Type: llm.BlockToolCall, ID: "toolu_1", Name: "read", Arguments: `{"path": "a.go"}`},
		{Type: llm.BlockToolCall, ID: "toolu_2", Name: "now", Arguments: `{}`},
	}
	if got := res.Asm.Blocks(); !reflect.DeepEqual(got, want) {
		t.Errorf("blocks:\n got %+v\nwant %+v", got, want)
	}
	if f := res.Finish(); f.Reason != llm.FinishToolCalls {
		t.Errorf("finish = %+v; want tool-calls", f)
	}
	wantUsage := &llm.Usage{InputTokens: 12, CacheWriteTokens: 300, CacheReadTokens: 4000, OutputTokens: 90}
	if got := res.Usage(); !reflect.DeepEqual(got, wantUsage) {
		t.Errorf("usage = %+v; want %+v", got, wantUsage)
	}
	n := len(res.Chunks)
	if res.Chunks[n-2].Type != llm.ChunkUsage || res.Chunks[n-1].Type != llm.ChunkFinish {
		t.Errorf("tail = %s, %s; want usage, finish", res.Chunks[n-2].Type, res.Chunks[n-1].Type)
	}
	// The server tool block got no chunk index: indexes stay dense.
	for _, c := range res.Chunks {
		if c.Index > 4 {
			t.Errorf("chunk %+v has index beyond the 5 neutral blocks", c)
		}
	}
}

func TestStreamStopReasons(t *testing.T) {
	tests := []struct {
		reason   string
		want     llm.FinishReason
		failCode llm.Code
	}{
		{"end_turn", llm.FinishStop, ""},
		{"stop_sequence", llm.FinishStop, ""},
		{"max_tokens", llm.FinishMaxTokens, ""},
		{"model_context_window_exceeded", llm.FinishMaxTokens, ""},
		{"refusal", llm.FinishError, llm.CodeInvalidRequest},
		{"pause_turn", llm.FinishError, llm.CodeServer},
	}
	for _, tt := range tests {
		t.Run(tt.reason, func(t *testing.T) {
			srv, _ := server(t, sseBody(textEvents("hi", tt.reason)...))
			res := drain(t, t.Context(), client(t, srv, Config{}), llm.Request{Model: "claude"})
			if res.Failure != nil {
				t.Fatalf("failure: %v", res.Failure)
			}
			f := res.Finish()
			if f.Reason != tt.want {
				t.Fatalf("finish = %+v; want %s", f, tt.want)
			}
			if (f.Failure == nil) != (tt.failCode == "") || (f.Failure != nil && (f.Failure.Code != tt.failCode || !strings.Contains(f.Failure.Message, tt.reason))) {
				t.Errorf("finish failure = %v; want %q naming %s", f.Failure, tt.failCode, tt.reason)
			}
		})
	}
}

func TestStreamFailures(t *testing.T) {
	tests := []struct {
		name   string
		handle func(http.ResponseWriter, *http.Request)
		code   llm.Code
		msg    string
	}{
		{"overloaded error event", sseBody(messageStart, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`), llm.CodeServer, "Overloaded"},
		{"rate limit error event", sseBody(messageStart, `{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}`), llm.CodeRateLimit, "slow down"},
		{"invalid request error event", sseBody(`{"type":"error","error":{"type":"invalid_request_error","message":"bad"}}`), llm.CodeInvalidRequest, "bad"},
		{"auth error event", sseBody(`{"type":"error","error":{"type":"authentication_error","message":"key"}}`), llm.CodeAuth, "key"},
		{"unknown error event", sseBody(`{"type":"error","error":{"type":"new_error","message":"odd"}}`), llm.CodeServer, "odd"},
		{"malformed event", func(w http.ResponseWriter, r *http.Request) {
			sseBody(messageStart)(w, r)
			fmt.Fprint(w, "event: content_block_start\ndata: {\"type\":\"content_block_start\",\n\n")
		}, llm.CodeMalformedResponse, "invalid content_block_start event"},
		{"empty response", sseBody(messageStart, messageDelta("end_turn", 1), messageStop), llm.CodeEmptyResponse, "end_turn"},
		{"message_stop with a block open", sseBody(messageStart,
			blockStart(0, `{"type":"text","text":""}`), blockDelta(0, `{"type":"text_delta","text":"cut"}`), messageStop), llm.CodeMalformedResponse, "still open"},
		{"nothing, message_stop without stop reason", sseBody(messageStart, messageStop), llm.CodeEmptyResponse, "end_turn"},
		{"EOF before message_delta", sseBody(textEvents("hi", "end_turn")[:3]...), llm.CodeStreamClosed, ""},
		{"connection dropped mid-stream", func(w http.ResponseWriter, r *http.Request) {
			sseBody(textEvents("hi", "end_turn")[:3]...)(w, r)
			conn, _, err := w.(http.Hijacker).Hijack()
			if err != nil {
				panic(err)
			}
			conn.Close()
		}, llm.CodeTransport, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, _ := server(t, tt.handle)
			res := drain(t, t.Context(), client(t, srv, Config{}), llm.Request{Model: "claude"})
			f := wantCode(t, res, tt.code)
			if !strings.Contains(f.Message, tt.msg) || !strings.HasPrefix(f.Message, "test: ") {
				t.Errorf("message = %q; want provider prefix and %q", f.Message, tt.msg)
			}
		})
	}
}

// TestStreamThinkingOnly: thinking (or redacted thinking) and nothing
// else is a complete answer, not EMPTY_RESPONSE.
func TestStreamThinkingOnly(t *testing.T) {
	for _, tt := range []struct {
		name   string
		events []string
		want   llm.Block
	}{
		{"thinking", []string{blockStart(0, `{"type":"thinking","thinking":""}`), blockDelta(0, `{"type":"thinking_delta","thinking":"hm"}`),
			blockDelta(0, `{"type":"signature_delta","signature":"sig"}`), blockStop(0)},
			llm.Block{Type: llm.BlockReasoning, Text: "hm", Signature: "sig"}},
		{"redacted", []string{blockStart(0, `{"type":"redacted_thinking","data":"ENC"}`), blockStop(0)},
			llm.Block{Type: llm.BlockReasoning, Signature: "ENC"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			events := append([]string{messageStart}, tt.events...)
			srv, _ := server(t, sseBody(append(events, messageDelta("end_turn", 1), messageStop)...))
			res := drain(t, t.Context(), client(t, srv, Config{}), llm.Request{Model: "claude"})
			if res.Failure != nil {
				t.Fatalf("failure: %v", res.Failure)
			}
			if f := res.Finish(); f.Reason != llm.FinishStop || f.Failure != nil {
				t.Errorf("finish = %+v; want stop", f)
			}
			if got := res.Asm.Blocks(); !reflect.DeepEqual(got, []llm.Block{tt.want}) {
				t.Errorf("blocks = %+v; want %+v", got, tt.want)
			}
		})
	}
}

// TestStreamMessageStopWithoutStopReason: message_stop after every block
// closed, with no stop reason ever sent, is a normal end_turn, as [DONE]
// without a finish_reason is for Chat Completions.
func TestStreamMessageStopWithoutStopReason(t *testing.T) {
	srv, _ := server(t, sseBody(messageStart,
		blockStart(0, `{"type":"text","text":""}`), blockDelta(0, `{"type":"text_delta","text":"hi"}`), blockStop(0),
		messageStop))
	res := drain(t, t.Context(), client(t, srv, Config{}), llm.Request{Model: "claude"})
	if res.Failure != nil {
		t.Fatalf("failure: %v", res.Failure)
	}
	if f := res.Finish(); f.Reason != llm.FinishStop || f.Failure != nil {
		t.Errorf("finish = %+v; want stop", f)
	}
	if got := res.Asm.Blocks(); !reflect.DeepEqual(got, []llm.Block{llm.TextBlock("hi")}) {
		t.Errorf("blocks = %+v", got)
	}
}

// TestStreamEndsAfterMessageDelta: with the stop reason known, losing
// only message_stop still completes the call.
func TestStreamEndsAfterMessageDelta(t *testing.T) {
	events := textEvents("hi", "end_turn")
	for _, drop := range []bool{false, true} {
		srv, _ := server(t, func(w http.ResponseWriter, r *http.Request) {
			sseBody(events[:len(events)-1]...)(w, r)
			if drop {
				conn, _, _ := w.(http.Hijacker).Hijack()
				conn.Close()
			}
		})
		res := drain(t, t.Context(), client(t, srv, Config{}), llm.Request{Model: "claude"})
		if res.Failure != nil || res.Finish().Reason != llm.FinishStop {
			t.Errorf("drop=%v: got %v; want stop", drop, res.Failure)
		}
	}
}

// TestIdleTimeout runs each case in a synctest bubble over in-memory
// connections: the idle limit is measured on the fake clock, so the
// failure comes exactly one limit after the last byte, and pings whose
// gaps stay under the limit keep the stream alive, both independent of
// the machine's load.
func TestIdleTimeout(t *testing.T) {
	t.Run("stall mid-stream", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			lastByte := make(chan time.Time, 1)
			c := pipeClient(t, func(w http.ResponseWriter, r *http.Request) {
				sseBody(textEvents("hi", "end_turn")[:3]...)(w, r)
				lastByte <- time.Now()
				<-r.Context().Done()
			}, Config{IdleTimeout: 100 * time.Millisecond})
			res := drain(t, t.Context(), c, llm.Request{Model: "claude"})
			wantCode(t, res, llm.CodeTimeout)
			if d := time.Since(<-lastByte); d != 100*time.Millisecond {
				t.Errorf("timed out %v after the last byte, want exactly 100ms", d)
			}
		})
	})
	t.Run("pings keep a slow stream alive", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			start := time.Now()
			c := pipeClient(t, func(w http.ResponseWriter, r *http.Request) {
				sseBody(messageStart)(w, r)
				// 8 x 149 ms: far past the 150 ms limit in all, each gap under it.
				for range 8 {
					time.Sleep(149 * time.Millisecond)
					sseBody(ping)(w, r)
				}
				sseBody(textEvents("hi", "end_turn")[1:]...)(w, r)
			}, Config{IdleTimeout: 150 * time.Millisecond})
			res := drain(t, t.Context(), c, llm.Request{Model: "claude"})
			if res.Failure != nil || res.Finish().Reason != llm.FinishStop {
				t.Fatalf("got %v; want stop", res.Failure)
			}
			if d := time.Since(start); d != 8*149*time.Millisecond {
				t.Errorf("stream took %v, want exactly %v", d, 8*149*time.Millisecond)
			}
		})
	})
	noLeaks(t)
}

func TestCancelMidStream(t *testing.T) {
	srv, _ := server(t, func(w http.ResponseWriter, r *http.Request) {
		sseBody(textEvents("partial", "end_turn")[:3]...)(w, r)
		<-r.Context().Done()
	})
	c := client(t, srv, Config{})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	asm := &llm.Assembler{}
	var errs []error
	for ch, err := range c.Stream(ctx, llm.Request{Model: "claude"}) {
		if err != nil {
			errs = append(errs, err)
			continue
		}
		asm.Add(ch)
		if ch.Type == llm.ChunkTextDelta {
			cancel()
		}
	}
	if len(errs) != 1 || llm.AsFailure(errs[0]).Code != llm.CodeAborted {
		t.Fatalf("errors = %v; want one ABORTED", errs)
	}
	if got := asm.InterruptedBlocks(); len(got) != 1 || got[0].Text != "partial" {
		t.Errorf("interrupted blocks = %+v", got)
	}
	noLeaks(t)
}

func TestBreakEarly(t *testing.T) {
	srv, _ := server(t, func(w http.ResponseWriter, r *http.Request) {
		sseBody(textEvents("a", "end_turn")[:3]...)(w, r)
		<-r.Context().Done()
	})
	n := 0
	for range client(t, srv, Config{}).Stream(t.Context(), llm.Request{Model: "claude"}) {
		n++
		break
	}
	if n != 1 {
		t.Fatalf("got %d chunks after break", n)
	}
	noLeaks(t)
}
