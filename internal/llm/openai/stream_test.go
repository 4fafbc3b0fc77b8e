package openai

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

func deltaEv(d string) string {
	return `{"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":` + d + `,"finish_reason":null}]}`
}

func finishChunk(reason string) string {
	return `{"id":"c1","choices":[{"index":0,"delta":{},"finish_reason":"` + reason + `"}],"usage":null}`
}

const usageChunk = `{"id":"c1","choices":[],"usage":{"prompt_tokens":100,"completion_tokens":20,"prompt_cache_hit_tokens":60,"prompt_cache_miss_tokens":40,"completion_tokens_details":{"reasoning_tokens":7}}}`

var textOnly = []string{deltaEv(`{"role":"assistant","content":""}`), deltaEv(`{"content":"hi"}`), finishChunk("stop"), usageChunk, "[DONE]"}

func TestStreamTextReasoningAndInterleavedToolCalls(t *testing.T) {
	srv, _ := server(t, sseBody(
		deltaEv(`{"role":"assistant","content":null,"reasoning_content":""}`),
		deltaEv(`{"reasoning_content":"Let me "}`),
		deltaEv(`{"reasoning_content":"think."}`),
		deltaEv(`{"content":"Reading "}`),
		deltaEv(`{"content":"both."}`),
		deltaEv(`{"tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"read","arguments":""}}]}`),
		deltaEv(`{"tool_calls":[{"index":1,"id":"call_b","type":"function","function":{"name":"grep","arguments":"{\"pat"}}]}`),
		deltaEv(`{"tool_calls":[{"index":0,"function":{"arguments":"{\"path\":"}}]}`),
		deltaEv(`{"tool_calls":[{"index":1,"function":{"arguments":"tern\":\"x\"}"}}]}`),
		deltaEv(`{"tool_calls":[{"index":0,"function":{"arguments":"\"a.go\"}"}}]}`),
		finishChunk("tool_calls"),
		usageChunk,
		"[DONE]",
	))
	res := drain(t, t.Context(), client(t, srv, Config{DeepSeek: true}), llm.Request{Model: "m"})
	if res.Failure != nil {
		t.Fatalf("failure: %v", res.Failure)
	}
	want := []llm.Block{
		{Type: llm.BlockReasoning, Text: "Let me think."},
		{Type: llm.BlockText, Text: "Reading both."},
		{Type: llm.BlockToolCall, ID: "call_a", Name: "read", Arguments: `{"path":"a.go"}`},
		{Type: llm.BlockToolCall, ID: "call_b", Name: "grep", Arguments: `{"pattern":"x"}`},
	}
	if got := res.Asm.Blocks(); !reflect.DeepEqual(got, want) {
		t.Errorf("blocks:\n got %+v\nwant %+v", got, want)
	}
	if f := res.Finish(); f == nil || f.Reason != llm.FinishToolCalls {
		t.Errorf("finish = %+v; want tool-calls", f)
	}
	// Block indexes follow first appearance, and the stream's tail is
	// block-ends, then usage, then finish.
	var starts []string
	for _, c := range res.Chunks {
		if c.Type == llm.ChunkBlockStart {
			starts = append(starts, fmt.Sprintf("%d:%s", c.Index, c.BlockType))
		}
	}
	if got, want := strings.Join(starts, " "), "0:reasoning 1:text 2:tool-call 3:tool-call"; got != want {
		t.Errorf("starts = %s; want %s", got, want)
	}
	n := len(res.Chunks)
	if res.Chunks[n-1].Type != llm.ChunkFinish || res.Chunks[n-2].Type != llm.ChunkUsage {
		t.Errorf("tail = %s, %s; want usage, finish", res.Chunks[n-2].Type, res.Chunks[n-1].Type)
	}
	// The first delta of each call names it.
	for _, c := range res.Chunks {
		if c.Type == llm.ChunkToolCallDelta && c.Index == 3 {
			if c.ID != "call_b" || c.Name != "grep" {
				t.Errorf("first delta of call 1 = %+v; want id and name", c)
			}
			break
		}
	}
}

func TestStreamUsage(t *testing.T) {
	tests := []struct {
		name   string
		events []string
		want   *llm.Usage
	}{
		{
			name:   "usage after finish in empty-choices chunk, DeepSeek cache hit",
			events: []string{deltaEv(`{"content":"x"}`), finishChunk("stop"), usageChunk, "[DONE]"},
			want:   &llm.Usage{InputTokens: 40, CacheReadTokens: 60, OutputTokens: 20, ReasoningTokens: 7},
		},
		{
			name: "usage inside the finish chunk, OpenAI cached_tokens",
			events: []string{deltaEv(`{"content":"x"}`),
				`{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":{"prompt_tokens":50,"completion_tokens":5,"prompt_tokens_details":{"cached_tokens":30}}}`,
				"[DONE]"},
			want: &llm.Usage{InputTokens: 20, CacheReadTokens: 30, OutputTokens: 5},
		},
		{
			name:   "no usage",
			events: []string{deltaEv(`{"content":"x"}`), finishChunk("stop"), "[DONE]"},
		},
		{
			name:   "clean EOF after finish without DONE",
			events: []string{deltaEv(`{"content":"x"}`), finishChunk("stop"), usageChunk},
			want:   &llm.Usage{InputTokens: 40, CacheReadTokens: 60, OutputTokens: 20, ReasoningTokens: 7},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, _ := server(t, sseBody(tt.events...))
			res := drain(t, t.Context(), client(t, srv, Config{}), llm.Request{Model: "m"})
			if res.Failure != nil {
				t.Fatalf("failure: %v", res.Failure)
			}
			if got := res.Usage(); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("usage = %+v; want %+v", got, tt.want)
			}
			if f := res.Finish(); f.Reason != llm.FinishStop {
				t.Errorf("finish = %+v; want stop", f)
			}
		})
	}
}

func TestStreamFinishReasons(t *testing.T) {
	tests := []struct {
		name     string
		events   []string
		reason   llm.FinishReason
		failCode llm.Code // on the finish chunk
	}{
		{"stop", textOnly, llm.FinishStop, ""},
		{"length", []string{deltaEv(`{"content":"trunc"}`), finishChunk("length"), "[DONE]"}, llm.FinishMaxTokens, ""},
		{"length with truncated call", []string{
			deltaEv(`{"tool_calls":[{"index":0,"id":"c","function":{"name":"f","arguments":"{\"a"}}]}`),
			finishChunk("length"), "[DONE]"}, llm.FinishMaxTokens, ""},
		{"stop with tool calls", []string{
			deltaEv(`{"tool_calls":[{"index":0,"id":"c","function":{"name":"f","arguments":"{}"}}]}`),
			finishChunk("stop"), "[DONE]"}, llm.FinishToolCalls, ""},
		{"content_filter", []string{deltaEv(`{"content":"x"}`), finishChunk("content_filter"), "[DONE]"}, llm.FinishError, llm.CodeInvalidRequest},
		{"insufficient_system_resource", []string{finishChunk("insufficient_system_resource"), "[DONE]"}, llm.FinishError, llm.CodeServer},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, _ := server(t, sseBody(tt.events...))
			res := drain(t, t.Context(), client(t, srv, Config{}), llm.Request{Model: "m"})
			if res.Failure != nil {
				t.Fatalf("failure: %v", res.Failure)
			}
			f := res.Finish()
			if f.Reason != tt.reason {
				t.Fatalf("finish = %+v; want %s", f, tt.reason)
			}
			if tt.failCode == "" {
				if f.Failure != nil {
					t.Errorf("finish failure = %v; want none", f.Failure)
				}
				return
			}
			if f.Failure == nil || f.Failure.Code != tt.failCode || !strings.Contains(f.Failure.Message, tt.name) {
				t.Errorf("finish failure = %v; want %s naming %s", f.Failure, tt.failCode, tt.name)
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
		{"malformed chunk", sseBody(deltaEv(`{"content":"x"}`), `{"choices":[`), llm.CodeMalformedResponse, "invalid stream event"},
		{"error object in stream", sseBody(deltaEv(`{"content":"x"}`), `{"error":{"message":"Rate limit hit","type":"rate_limit_error"}}`), llm.CodeRateLimit, "Rate limit hit"},
		{"unknown error object", sseBody(`{"error":{"message":"boom"}}`), llm.CodeServer, "boom"},
		{"empty completion", sseBody(deltaEv(`{"role":"assistant","content":"","reasoning_content":""}`), finishChunk("stop"), usageChunk, "[DONE]"), llm.CodeEmptyResponse, ""},
		{"EOF without finish", sseBody(deltaEv(`{"content":"x"}`)), llm.CodeStreamClosed, ""},
		{"no content, DONE without finish", sseBody(deltaEv(`{"role":"assistant","content":""}`), "[DONE]"), llm.CodeEmptyResponse, ""},
		{"connection dropped mid-stream", func(w http.ResponseWriter, r *http.Request) {
			sseBody(deltaEv(`{"content":"partial"}`))(w, r)
			conn, _, err := w.(http.Hijacker).Hijack()
			if err != nil {
				panic(err)
			}
			conn.Close()
		}, llm.CodeTransport, ""},
		{"JSON body with 200", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"error":{"message":"model not found","type":"invalid_request_error"}}`)
		}, llm.CodeInvalidRequest, "model not found"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, _ := server(t, tt.handle)
			res := drain(t, t.Context(), client(t, srv, Config{}), llm.Request{Model: "m"})
			f := wantCode(t, res, tt.code)
			if !strings.Contains(f.Message, tt.msg) || !strings.HasPrefix(f.Message, "test: ") {
				t.Errorf("message = %q; want provider prefix and %q", f.Message, tt.msg)
			}
		})
	}
}

// TestStreamDoneWithoutFinishReason: gateways and local servers that end
// with [DONE] but never send a finish_reason complete normally; only an
// end of input without [DONE] stays STREAM_CLOSED (see TestStreamFailures).
func TestStreamDoneWithoutFinishReason(t *testing.T) {
	tests := []struct {
		name   string
		events []string
		want   llm.FinishReason
		blocks []llm.Block
	}{
		{"text", []string{deltaEv(`{"role":"assistant","content":"the "}`), deltaEv(`{"content":"answer"}`), usageChunk, "[DONE]"},
			llm.FinishStop, []llm.Block{{Type: llm.BlockText, Text: "the answer"}}},
		{"null finish chunk", []string{deltaEv(`{"content":"x"}`), `{"choices":[{"index":0,"delta":{},"finish_reason":null}]}`, "[DONE]"},
			llm.FinishStop, []llm.Block{{Type: llm.BlockText, Text: "x"}}},
		{"tool call", []string{deltaEv(`{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"read","arguments":"{}"}}]}`), "[DONE]"},
			llm.FinishToolCalls, []llm.Block{{Type: llm.BlockToolCall, ID: "call_1", Name: "read", Arguments: "{}"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, _ := server(t, sseBody(tt.events...))
			res := drain(t, t.Context(), client(t, srv, Config{}), llm.Request{Model: "m"})
			if res.Failure != nil {
				t.Fatalf("failure: %v", res.Failure)
			}
			if f := res.Finish(); f.Reason != tt.want || f.Failure != nil {
				t.Errorf("finish = %+v; want %s", f, tt.want)
			}
			if got := res.Asm.Blocks(); !reflect.DeepEqual(got, tt.blocks) {
				t.Errorf("blocks = %+v; want %+v", got, tt.blocks)
			}
		})
	}
}

// TestStreamReasoningOnly: a reply with reasoning and nothing else is a
// complete answer, not EMPTY_RESPONSE.
func TestStreamReasoningOnly(t *testing.T) {
	for _, field := range []string{"reasoning_content", "reasoning"} {
		t.Run(field, func(t *testing.T) {
			srv, _ := server(t, sseBody(deltaEv(`{"`+field+`":"nothing to add"}`), finishChunk("stop"), usageChunk, "[DONE]"))
			res := drain(t, t.Context(), client(t, srv, Config{}), llm.Request{Model: "m"})
			if res.Failure != nil {
				t.Fatalf("failure: %v", res.Failure)
			}
			if f := res.Finish(); f.Reason != llm.FinishStop || f.Failure != nil {
				t.Errorf("finish = %+v; want stop", f)
			}
			want := []llm.Block{{Type: llm.BlockReasoning, Text: "nothing to add"}}
			if got := res.Asm.Blocks(); !reflect.DeepEqual(got, want) {
				t.Errorf("blocks = %+v; want %+v", got, want)
			}
		})
	}
}

// TestStreamDropAfterFinish: losing the connection after the finish
// reason loses only the usage chunk, so the call still succeeds.
func TestStreamDropAfterFinish(t *testing.T) {
	srv, _ := server(t, func(w http.ResponseWriter, r *http.Request) {
		sseBody(deltaEv(`{"content":"done"}`), finishChunk("stop"))(w, r)
		conn, _, _ := w.(http.Hijacker).Hijack()
		conn.Close()
	})
	res := drain(t, t.Context(), client(t, srv, Config{}), llm.Request{Model: "m"})
	if res.Failure != nil || res.Finish().Reason != llm.FinishStop {
		t.Fatalf("got %v, %+v; want stop", res.Failure, res.Finish())
	}
}

// TestIdleTimeout runs each case in a synctest bubble over in-memory
// connections: the idle limit is measured on the fake clock, so the
// failure comes exactly one limit after the last byte, and a stream whose
// gaps stay under the limit lives however long it lasts in total, both
// independent of the machine's load.
func TestIdleTimeout(t *testing.T) {
	t.Run("stall mid-stream", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			lastByte := make(chan time.Time, 1)
			c := pipeClient(t, func(w http.ResponseWriter, r *http.Request) {
				sseBody(deltaEv(`{"content":"x"}`))(w, r)
				lastByte <- time.Now()
				<-r.Context().Done() // the client gives up and closes the connection
			}, Config{IdleTimeout: 100 * time.Millisecond})
			res := drain(t, t.Context(), c, llm.Request{Model: "m"})
			wantCode(t, res, llm.CodeTimeout)
			if d := time.Since(<-lastByte); d != 100*time.Millisecond {
				t.Errorf("timed out %v after the last byte, want exactly 100ms", d)
			}
		})
	})
	t.Run("stall before headers", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			start := time.Now()
			c := pipeClient(t, func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() },
				Config{IdleTimeout: 100 * time.Millisecond})
			res := drain(t, t.Context(), c, llm.Request{Model: "m"})
			wantCode(t, res, llm.CodeTimeout)
			if d := time.Since(start); d != 100*time.Millisecond {
				t.Errorf("timed out after %v, want exactly 100ms", d)
			}
		})
	})
	t.Run("comments keep a slow stream alive", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			start := time.Now()
			c := pipeClient(t, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/event-stream")
				// 8 x 149 ms is far past the 150 ms idle limit in total,
				// but no single gap reaches it.
				for range 8 {
					fmt.Fprint(w, ": keep-alive\n\n")
					w.(http.Flusher).Flush()
					time.Sleep(149 * time.Millisecond)
				}
				sseBody(textOnly...)(w, r)
			}, Config{IdleTimeout: 150 * time.Millisecond})
			res := drain(t, t.Context(), c, llm.Request{Model: "m"})
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
		sseBody(deltaEv(`{"content":"partial"}`))(w, r)
		<-r.Context().Done()
	})
	c := client(t, srv, Config{})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	res := result{Asm: &llm.Assembler{}}
	var errs []error
	for ch, err := range c.Stream(ctx, llm.Request{Model: "m"}) {
		if err != nil {
			errs = append(errs, err)
			continue
		}
		res.Asm.Add(ch)
		if ch.Type == llm.ChunkTextDelta {
			cancel() // the user presses Esc while text streams
		}
	}
	if len(errs) != 1 {
		t.Fatalf("errors = %v; want exactly one", errs)
	}
	res.Failure = llm.AsFailure(errs[0])
	wantCode(t, res, llm.CodeAborted)
	if got := res.Asm.InterruptedBlocks(); len(got) != 1 || got[0].Text != "partial" {
		t.Errorf("interrupted blocks = %+v", got)
	}
	noLeaks(t)
}

func TestCancelBeforeStart(t *testing.T) {
	srv, _ := server(t, sseBody(textOnly...))
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	wantCode(t, drain(t, ctx, client(t, srv, Config{}), llm.Request{Model: "m"}), llm.CodeAborted)
}

// TestBreakEarly: a consumer that stops ranging gets nothing more, and
// the connection is released.
func TestBreakEarly(t *testing.T) {
	srv, _ := server(t, func(w http.ResponseWriter, r *http.Request) {
		sseBody(deltaEv(`{"content":"a"}`), deltaEv(`{"content":"b"}`))(w, r)
		<-r.Context().Done()
	})
	n := 0
	for range client(t, srv, Config{}).Stream(t.Context(), llm.Request{Model: "m"}) {
		n++
		break
	}
	if n != 1 {
		t.Fatalf("got %d chunks after break", n)
	}
	noLeaks(t)
}
