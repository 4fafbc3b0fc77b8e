package llmtest

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"
	"time"
)

func TestParseScript(t *testing.T) {
	in := `[
	  {"reasoning": "r", "text": "hi", "usage": {"input": 1, "output": 2, "cacheRead": 3, "cacheWrite": 4, "reasoning": 5},
	   "toolCalls": [{"name": "bash", "arguments": {"command": "ls"}}, {"id": "c1", "name": "read", "arguments": "{\"path\":"}],
	   "finishReason": "max-tokens", "chunkRunes": 2, "interleaveToolCalls": true, "usageInFinishChunk": true,
	   "comments": 1, "delayPerChunk": "5ms"},
	  {"status": 429, "retryAfter": "1", "errorBody": "{}", "headers": {"X-A": "b"}},
	  {"disconnectAfter": 3, "malformedAfter": -1, "stallAfter": 2, "empty": true, "noDone": true, "raw": "x",
	   "delayPerChunk": 1000}
	]`
	got, err := ParseScript(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	want := []Response{
		{Reasoning: "r", Text: "hi", Usage: &Usage{1, 2, 3, 4, 5},
			ToolCalls:    []ToolCall{{Name: "bash", Arguments: `{"command":"ls"}`}, {ID: "c1", Name: "read", Arguments: `{"path":`}},
			FinishReason: "max-tokens", ChunkRunes: 2, InterleaveToolCalls: true, UsageInFinishChunk: true,
			Comments: 1, DelayPerChunk: 5 * time.Millisecond},
		{Status: 429, RetryAfter: "1", ErrorBody: "{}", Headers: map[string]string{"X-A": "b"}},
		{DisconnectAfter: 3, MalformedAfter: AtStart, StallAfter: 2, Empty: true, NoDone: true, Raw: "x", DelayPerChunk: time.Microsecond},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got  %+v\nwant %+v", got, want)
	}

	// What Go marshals, ParseScript reads back.
	b, _ := json.Marshal(want)
	back, err := ParseScript(strings.NewReader(string(b)))
	if err != nil || !reflect.DeepEqual(back, want) {
		t.Fatalf("round trip: %v\n%+v", err, back)
	}
}

func TestParseScriptErrors(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"empty input", "", "JSON array"},
		{"object not array", `{"text":"hi"}`, "JSON array"},
		{"syntax", `[{"text":}]`, "invalid character"},
		{"unknown field", `[{"text":"a"},{"txt":"b"}]`, `response 1: json: unknown field "txt"`},
		{"unknown tool field", `[{"toolCalls":[{"name":"a","args":"{}"}]}]`, `unknown field "args"`},
		{"bad duration", `[{"delayPerChunk":"soon"}]`, "delayPerChunk"},
		{"bad duration type", `[{"delayPerChunk":true}]`, "delayPerChunk"},
		{"bad status", `[{"status":42}]`, "not an HTTP status"},
		{"negative chunk", `[{"chunkRunes":-2}]`, "chunkRunes"},
		{"bad fault count", `[{"stallAfter":-5}]`, "AtStart"},
		{"nameless tool", `[{"toolCalls":[{"arguments":"{}"}]}]`, "no name"},
		{"trailing data", `[] []`, "invalid character"},
		{"wrong type", `[{"text":3}]`, "response 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseScript(strings.NewReader(tt.in))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, want error containing %q", err, tt.want)
			}
		})
	}
	if _, err := ParseScript(iotest.ErrReader(errors.New("boom"))); err == nil || !strings.Contains(err.Error(), "boom") {
		t.Fatalf("read error: %v", err)
	}
}

func TestChunks(t *testing.T) {
	tests := []struct {
		s    string
		n    int
		want []string
	}{
		{"", 3, nil},
		{"abcdefghij", 0, []string{"abcdefgh", "ij"}},
		{"héllo", 2, []string{"hé", "ll", "o"}},
		{"日本語", 1, []string{"日", "本", "語"}},
	}
	for _, tt := range tests {
		if got := chunks(tt.s, tt.n); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("chunks(%q, %d) = %q, want %q", tt.s, tt.n, got, tt.want)
		}
	}
}
