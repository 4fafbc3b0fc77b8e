package session

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/dsh-dev/dsh/internal/llm"
)

var peekSeeds = []string{
	`{"turn":3,"step":1,"message":{"id":"m","role":"assistant","content":[{"type":"text","text":"hi \"there\" }]"}]},"usage":{"inputTokens":10,"cacheReadTokens":2,"cacheWriteTokens":0,"outputTokens":5}}`,
	`{"turn":1,"step":2,"message":{"id":"m","role":"assistant","content":[]},"interrupted":true}`,
	`{"turn":1,"message":{"id":"m","content":null},"usage":null}`,
	`{"turn":1,"message":null}`,
	`{"turn":1}`,
	`{ "turn" : 7 , "message" : { "content" : [ ] } , "usage" : { "outputTokens" : 1 } }`,
	`{"Turn":2,"message":{"content":[]}}`,
	`{"turn":2,"message":{"Content":[{"type":"text"}]}}`,
	`{"t\u0075rn":2}`,
	`{"turn":2.5}`,
	`{"turn":-4,"message":{"content":[1]}}`,
	`{"turn":"x"}`,
	`{"turn":1,"message":"text"}`,
	`{"turn":1,"usage":{"inputTokens":"many"}}`,
	`{"turn":1,"message":{"content":[{"a":[1,{"b":"]}"}]}]},"usage":{"inputTokens":1e2}}`,
	`{"turn":99999999999999999999}`,
	`[]`,
	`{"turn":1,"usage":{"inputTokens":1,"InputTokens":2}}`,
	`{"turn":1,"usage":{"inputTokens":null,"other":{"x":[1]},"reasoningTokens":-3}}`,
	`{"turn":1,"usage":{"outputTokens":5} }`,
	`{"turn":1,"usage":[]}`,
	`{"turn":1,"extra":{"nested":[true,false,null,"\\\""]},"message":{"content":[{}]}}`,
}

func TestPeekAssistantAgreesWithEncodingJSON(t *testing.T) {
	for _, s := range peekSeeds {
		checkPeek(t, []byte(s))
	}
	// The payloads the log writes.
	for _, p := range []AssistantMessage{
		{Turn: 4, Step: 2, Message: llm.Message{ID: "a", Role: llm.RoleAssistant, Content: []llm.Block{llm.TextBlock("x")}}, Usage: &llm.Usage{InputTokens: 9, OutputTokens: 1}},
		{Turn: 5, Message: llm.Message{ID: "b", Role: llm.RoleAssistant}, Interrupted: true},
	} {
		raw, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		checkPeek(t, raw)
		if _, ok := peekAssistant(raw); !ok {
			t.Errorf("json.Marshal's layout took the slow path: %s", raw)
		}
	}
}

func checkPeek(t *testing.T, data []byte) {
	t.Helper()
	if CheckLossless(data) != nil {
		return // the log never holds it
	}
	want, werr := decodeAssistantMeta(data)
	got, gerr := PeekAssistant(data)
	if (werr != nil) != (gerr != nil) || !reflect.DeepEqual(got, want) {
		t.Errorf("%s:\n got %+v, %v\nwant %+v, %v", data, got, gerr, want, werr)
	}
}

func FuzzPeekAssistant(f *testing.F) {
	for _, s := range peekSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(checkPeek)
}
