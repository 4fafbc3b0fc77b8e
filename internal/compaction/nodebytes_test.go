package compaction

import (
	"encoding/json"
	"testing"

	"github.com/dsh-dev/dsh/internal/llm"
	"github.com/dsh-dev/dsh/internal/session"
)

// TestNodeBytesIsPayloadBytes: measuring a surface event on the message
// the log derived from it gives what decoding its payload gives, for
// every surface type and block kind, so the meter's estimates (and when
// a compaction starts) do not depend on which way an event was measured.
func TestNodeBytesIsPayloadBytes(t *testing.T) {
	img := llm.Block{Type: llm.BlockImage, MediaType: "image/png", Data: "iVBORw0KGgo="}
	blocks := []llm.Block{llm.TextBlock("hello \"world\"\n"), img, {Type: llm.BlockToolCall, ID: "c1", Name: "bash", Arguments: `{"command":"ls"}`}}
	for _, tc := range []struct {
		typ  string
		data any
	}{
		{session.TypeUserMessage, llm.Message{ID: "u", Role: llm.RoleUser, Content: []llm.Block{llm.TextBlock("é and 😀"), img}}},
		{session.TypeAssistantMsg, session.AssistantMessage{Turn: 1, Step: 1, Message: llm.Message{ID: "a", Role: llm.RoleAssistant, Content: blocks}, Usage: &llm.Usage{InputTokens: 5}}},
		{session.TypeToolResult, session.ToolResult{Turn: 1, Step: 1, CallID: "c1", Name: "bash", Content: []llm.Block{llm.TextBlock("out\tput"), img}}},
		{session.TypeToolResult, session.ToolResult{Turn: 1, Step: 1, CallID: "c2", Name: "read", IsError: true, Content: nil}},
	} {
		raw, err := json.Marshal(tc.data)
		if err != nil {
			t.Fatal(err)
		}
		e := session.Event{Type: tc.typ, Data: raw, SurfaceOp: session.Append}
		msgs, err := session.DeriveMessages([]session.Event{e})
		if err != nil || len(msgs) != 1 {
			t.Fatalf("%s: %v, %d messages", tc.typ, err, len(msgs))
		}
		if got, want := nodeBytes(tc.typ, msgs[0]), payloadBytes(raw); got != want {
			t.Errorf("%s: nodeBytes %d, payloadBytes %d", tc.typ, got, want)
		}
	}
	if n := nodeBytes(session.TypeToolResult, llm.Message{Content: []llm.Block{llm.TextBlock("x")}}); n != -1 {
		t.Errorf("a tool result of another shape measured %d", n)
	}
}
