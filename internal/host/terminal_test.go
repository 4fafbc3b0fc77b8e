package host_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
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
  - id: tool.terminal
    module: tool/terminal
    config: {quiet: 60s, wait: 60s}
`)
	// The REPL is found by its working directory, a fresh one.
	dir := filepath.Join(f.cwd, fmt.Sprintf("repl-%d", time.Now().UnixNano()))
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	call := func(name string, args map[string]any) llmtest.Response {
		b, _ := json.Marshal(args)
		return llmtest.Response{ToolCalls: []llmtest.ToolCall{{Name: name, Arguments: string(b)}}}
	}
	f.srv.Enqueue(
		call("terminal_open", map[string]any{"type": "python", "cwd": dir}),
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
	pids := procsIn(dir)
	if len(pids) == 0 {
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
	for _, pid := range pids {
		if !proctest.WaitExit(pid, 30*time.Second) {
			t.Fatalf("terminal process %d outlived the disposed session (of %v)", pid, pids)
		}
	}
}

// procsIn lists the live processes whose working directory is dir.
func procsIn(dir string) []int {
	var pids []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if cwd, err := os.Readlink("/proc/" + e.Name() + "/cwd"); err == nil && cwd == dir && proctest.Alive(pid) {
			pids = append(pids, pid)
		}
	}
	return pids
}
