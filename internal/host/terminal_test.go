package host_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/dsh-dev/dsh/internal/host"
	"github.com/dsh-dev/dsh/internal/llm/llmtest"
	"github.com/dsh-dev/dsh/internal/proc/proctest"
	"github.com/dsh-dev/dsh/internal/session"
)

// A hosted session's terminal lives across turns and ends when the host
// disposes of the session.
func TestTerminalEndsWithDisposedSession(t *testing.T) {
	needSandbox(t)
	f := newFixtureWith(t, host.Config{}, `
profile:
  - id: preset.standard
    module: agent-preset
    config:
      name: standard
      tools: [terminal_open, terminal_send, terminal_list, terminal_close]
`)
	marker := fmt.Sprintf("dsh-host-term-%d", time.Now().UnixNano())
	call := func(name string, args map[string]any) llmtest.Response {
		b, _ := json.Marshal(args)
		return llmtest.Response{ToolCalls: []llmtest.ToolCall{{Name: name, Arguments: string(b)}}}
	}
	f.srv.Enqueue(
		call("terminal_open", map[string]any{"type": "command", "command": "exec python3 -q -i -c 'import sys' " + marker}),
		call("terminal_send", map[string]any{"session_id": "term-1", "text": "v = 'kept'"}),
		llmtest.Response{Text: "opened"},
		call("terminal_send", map[string]any{"session_id": "term-1", "text": "print(v.upper())"}),
		llmtest.Response{Text: "read it"},
	)
	id := f.create(host.CreateRequest{}).Header.ID
	s, err := f.h.Follow(t.Context(), id, -1)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ends := 0
	turnEnd := func(e session.Event) bool {
		if e.Type == session.TypeTurnEnd {
			ends++
		}
		return e.Type == session.TypeTurnEnd
	}
	f.send(id, "open a python terminal", host.DeliveryQueue)
	until(t, s, turnEnd)
	if len(proctest.Marked(marker)) == 0 {
		t.Fatal("the terminal's REPL is not running between turns")
	}
	f.send(id, "read the variable", host.DeliveryQueue)
	events := until(t, s, turnEnd)
	found := false
	for _, e := range events {
		var r session.ToolResult
		if e.Type == session.TypeToolResult && e.Decode(&r) == nil && r.Name == "terminal_send" {
			for _, b := range r.Content {
				found = found || strings.Contains(b.Text, "KEPT")
			}
		}
	}
	if !found {
		t.Fatalf("the second turn did not read the REPL's state: %d turns", ends)
	}
	f.dispose(id)
	if left := proctest.Survivors(marker, 30*time.Second); len(left) > 0 {
		t.Fatalf("terminal processes outlived the disposed session: %v", left)
	}
}
