package llmtest

import (
	"context"
	"encoding/json"
	"io"
	"reflect"
	"strings"
	"testing"
)

type anthBlock struct {
	Type, Text, Signature, ID, Name, Input string
}

// anthResult is an Anthropic stream folded the way a client adapter would.
type anthResult struct {
	types      []string // event names in order
	model      string
	blocks     []anthBlock
	stop       string
	startUsage map[string]any
	output     int
	stopped    bool
}

// foldAnthropic checks event framing and assembles the content blocks.
func foldAnthropic(t *testing.T, evs []sseEvent) anthResult {
	t.Helper()
	var r anthResult
	open := -1
	for _, ev := range evs {
		m := decode(t, ev.Data)
		if str(m, "type") != ev.Name {
			t.Fatalf("event %q carries type %q", ev.Name, str(m, "type"))
		}
		r.types = append(r.types, ev.Name)
		idx := num(m, "index")
		switch ev.Name {
		case "message_start":
			r.model = str(m, "message", "model")
			r.startUsage = m["message"].(map[string]any)["usage"].(map[string]any)
			if !strings.HasPrefix(str(m, "message", "id"), "msg_") {
				t.Fatalf("message id: %s", ev.Data)
			}
		case "content_block_start":
			if open != -1 || idx != len(r.blocks) {
				t.Fatalf("block %d started while %d open: %s", idx, open, ev.Data)
			}
			open = idx
			cb := m["content_block"].(map[string]any)
			r.blocks = append(r.blocks, anthBlock{Type: str(cb, "type"), ID: str(cb, "id"), Name: str(cb, "name")})
		case "content_block_delta":
			if idx != open {
				t.Fatalf("delta for closed block: %s", ev.Data)
			}
			b := &r.blocks[idx]
			switch d := m["delta"].(map[string]any); str(d, "type") {
			case "thinking_delta":
				b.Text += str(d, "thinking")
			case "signature_delta":
				b.Signature += str(d, "signature")
			case "text_delta":
				b.Text += str(d, "text")
			case "input_json_delta":
				b.Input += str(d, "partial_json")
			default:
				t.Fatalf("unknown delta: %s", ev.Data)
			}
		case "content_block_stop":
			if idx != open {
				t.Fatalf("stop for closed block: %s", ev.Data)
			}
			open = -1
		case "message_delta":
			r.stop = str(m, "delta", "stop_reason")
			r.output = num(m, "usage", "output_tokens")
		case "message_stop":
			r.stopped = true
		}
	}
	return r
}

func TestAnthropicStream(t *testing.T) {
	calls := []ToolCall{{Name: "bash", Arguments: `{"command":"ls"}`}, {ID: "toolu_x", Name: "read", Arguments: `{"path":"a"}`}}
	tests := []struct {
		name  string
		resp  Response
		check func(t *testing.T, r anthResult)
	}{
		{"full", Response{Reasoning: "let me think", Text: "hello there", ToolCalls: calls, ChunkRunes: 4,
			Usage: &Usage{Input: 11, Output: 22, CacheRead: 33, CacheWrite: 44}},
			func(t *testing.T, r anthResult) {
				if r.model != "claude-test" || r.stop != "tool_use" || r.output != 22 || !r.stopped {
					t.Fatalf("got %+v", r)
				}
				if r.types[0] != "message_start" || r.types[1] != "ping" || r.types[len(r.types)-2] != "message_delta" {
					t.Fatalf("event order %v", r.types)
				}
				u := r.startUsage
				if num(u, "input_tokens") != 11 || num(u, "cache_read_input_tokens") != 33 ||
					num(u, "cache_creation_input_tokens") != 44 || num(u, "output_tokens") != 1 {
					t.Fatalf("start usage %v", u)
				}
				if len(r.blocks) != 4 {
					t.Fatalf("blocks %+v", r.blocks)
				}
				th, tx, t0, t1 := r.blocks[0], r.blocks[1], r.blocks[2], r.blocks[3]
				if th.Type != "thinking" || th.Text != "let me think" || !strings.HasPrefix(th.Signature, "sig-") {
					t.Fatalf("thinking %+v", th)
				}
				if tx.Type != "text" || tx.Text != "hello there" {
					t.Fatalf("text %+v", tx)
				}
				if t0.Type != "tool_use" || !strings.HasPrefix(t0.ID, "toolu_") || t0.Name != "bash" || t0.Input != calls[0].Arguments {
					t.Fatalf("tool %+v", t0)
				}
				if t1.ID != "toolu_x" || t1.Input != calls[1].Arguments {
					t.Fatalf("tool %+v", t1)
				}
			}},
		{"text only", Response{Text: "hi"}, func(t *testing.T, r anthResult) {
			want := []string{"message_start", "ping", "content_block_start", "content_block_delta",
				"content_block_stop", "message_delta", "message_stop"}
			if !reflect.DeepEqual(r.types, want) || r.stop != "end_turn" || num(r.startUsage, "input_tokens") != 0 {
				t.Fatalf("got %+v", r)
			}
		}},
		{"max tokens", Response{Text: "cut", FinishReason: "max-tokens"}, func(t *testing.T, r anthResult) {
			if r.stop != "max_tokens" {
				t.Fatalf("stop %q", r.stop)
			}
		}},
		{"empty", Response{Empty: true, Text: "ignored"}, func(t *testing.T, r anthResult) {
			want := []string{"message_start", "ping", "message_delta", "message_stop"}
			if !reflect.DeepEqual(r.types, want) || r.stop != "end_turn" {
				t.Fatalf("got %+v", r)
			}
		}},
		{"no stop reason", Response{Text: "hi", NoFinishReason: true}, func(t *testing.T, r anthResult) {
			if !r.stopped || r.stop != "" {
				t.Fatalf("got %+v", r)
			}
		}},
		{"no message_stop", Response{Text: "hi", NoDone: true}, func(t *testing.T, r anthResult) {
			if r.stopped || r.types[len(r.types)-1] != "message_delta" {
				t.Fatalf("got %v", r.types)
			}
		}},
	}
	s := New()
	defer s.Close()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s.Enqueue(tt.resp)
			hr := post(t, context.Background(), s, "/v1/messages", requestBody(FormatAnthropic, true))
			if hr.StatusCode != 200 || hr.Header.Get("Content-Type") != "text/event-stream" || hr.Header.Get("Request-Id") == "" {
				t.Fatalf("status %d headers %v", hr.StatusCode, hr.Header)
			}
			evs, err := newSSE(hr.Body).readAll()
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, foldAnthropic(t, evs))
		})
	}
}

func TestAnthropicNonStreaming(t *testing.T) {
	s := New()
	defer s.Close()
	s.Enqueue(Response{
		Reasoning: "think", Text: "hello",
		ToolCalls: []ToolCall{{Name: "bash", Arguments: `{"command":"true"}`}, {Name: "bad", Arguments: `{"x":`}},
		Usage:     &Usage{Input: 1, Output: 2, CacheRead: 3, CacheWrite: 4},
	})
	hr := post(t, context.Background(), s, "/messages", requestBody(FormatAnthropic, false))
	b, _ := io.ReadAll(hr.Body)
	var m struct {
		Type       string `json:"type"`
		Model      string `json:"model"`
		StopReason string `json:"stop_reason"`
		Content    []struct {
			Type, Text, Thinking, Signature, ID, Name string
			Input                                     json.RawMessage
		} `json:"content"`
		Usage map[string]int `json:"usage"`
	}
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
	c := m.Content
	if m.Type != "message" || m.Model != "claude-test" || m.StopReason != "tool_use" || len(c) != 4 ||
		c[0].Type != "thinking" || c[0].Thinking != "think" || c[0].Signature == "" ||
		c[1].Text != "hello" || c[2].Name != "bash" || string(c[2].Input) != `{"command":"true"}` ||
		string(c[3].Input) != `"{\"x\":"` || !strings.HasPrefix(c[2].ID, "toolu_") {
		t.Fatalf("got %s", b)
	}
	want := map[string]int{"input_tokens": 1, "output_tokens": 2, "cache_read_input_tokens": 3, "cache_creation_input_tokens": 4}
	if !reflect.DeepEqual(m.Usage, want) {
		t.Fatalf("usage %v", m.Usage)
	}
}
