package host_test

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dsh-dev/dsh/internal/host"
	"github.com/dsh-dev/dsh/internal/llm/llmtest"
	"github.com/dsh-dev/dsh/internal/lsp/lsptest"
	"github.com/dsh-dev/dsh/internal/proc/proctest"
	"github.com/dsh-dev/dsh/internal/session"
)

// TestLSPServerStopsWithSession: the language server a session started
// (through the model's lsp call) stops when that session is disposed,
// while the host and the process live on.
func TestLSPServerStopsWithSession(t *testing.T) {
	lsptest.Gopls(t)
	marker := filepath.Join(t.TempDir(), fmt.Sprintf("gopls-%d.log", time.Now().UnixNano()))
	f := newFixtureWith(t, host.Config{}, `
profile:
  - id: tool.lsp
    module: tool/lsp
    config:
      start_timeout: 5m
      request_timeout: 5m
      servers:
        .go: {command: [gopls, serve, -logfile, `+marker+`]}
`)
	lsptest.WriteModule(t, f.cwd)
	l, c := lsptest.At(t, lsptest.ShapeSrc, "Total", 0)
	args, _ := json.Marshal(map[string]any{"operation": "hover", "file_path": "shape/shape.go", "line": l, "character": c})
	f.srv.Enqueue(
		llmtest.Response{ToolCalls: []llmtest.ToolCall{{Name: "lsp", Arguments: string(args)}}},
		llmtest.Response{Text: "Total sums the areas."},
	)
	id := f.create(host.CreateRequest{}).Header.ID
	f.send(id, "what is Total?", host.DeliveryQueue)
	f.runIdle(id)
	var hover session.ToolResult
	for _, ev := range f.stored(id) {
		if ev.Type == session.TypeToolResult {
			_ = ev.Decode(&hover)
		}
	}
	if hover.IsError || len(hover.Content) == 0 || !strings.Contains(hover.Content[0].Text, "func Total(xs ...Shape) float64") {
		t.Fatalf("hover result = %+v", hover)
	}
	if len(proctest.Marked(marker)) != 1 {
		t.Fatalf("gopls processes while the session is live: %v", proctest.Marked(marker))
	}
	f.dispose(id)
	if left := proctest.Survivors(marker, time.Minute); len(left) > 0 {
		t.Fatalf("gopls still runs after the session was disposed: %v", left)
	}
}
