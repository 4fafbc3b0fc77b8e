package agent

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/dsh-dev/dsh/internal/llm"
	"github.com/dsh-dev/dsh/internal/session"
)

// TestRequestHeaderPayloadIsTheEncoding checks that the payload built
// around the header's encoding is byte for byte what encoding the
// request/header payload gives.
func TestRequestHeaderPayloadIsTheEncoding(t *testing.T) {
	headers := []session.RequestHeaderData{
		{},
		{Config: session.CallConfig{Provider: "p", Model: "m", Effort: "high", MaxTokens: 8}, System: "be <brief> & \"exact\"\n\u2028",
			Tools: []llm.ToolSchema{{Name: "bash", Description: "run <cmd>", Parameters: json.RawMessage(`{"type":"object","properties":{"command":{"type":"string"}}}`)}}},
	}
	for _, h := range headers {
		raw, err := json.Marshal(h)
		if err != nil {
			t.Fatal(err)
		}
		for _, reason := range []string{"initial", "resume", "change"} {
			want, err := json.Marshal(session.RequestHeader{Header: h, Reason: reason})
			if err != nil {
				t.Fatal(err)
			}
			if got := requestHeaderPayload(raw, reason); !bytes.Equal(got, want) {
				t.Errorf("got  %s\nwant %s", got, want)
			}
		}
	}
}
