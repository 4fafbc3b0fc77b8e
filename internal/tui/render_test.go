package tui

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/dsh-dev/dsh/internal/host"
	"github.com/dsh-dev/dsh/internal/llm"
	"github.com/dsh-dev/dsh/internal/session"
	"github.com/dsh-dev/dsh/internal/subagent"
	"github.com/dsh-dev/dsh/internal/subagent/catalog"
)

// TestNarrowAndResizeNeverPanic renders every state at widths down to

func TestNarrowAndResizeNeverPanic(t *testing.T) {
	for _, w := range []int{200, 80, 50, 40, 30, 20, 1} {
		h := newHarness(t, w, 12)
		h.startTurn()
		h.chunk(llm.ChunkTextDelta, "```go\nfunc main() { println(\"a very long line that must be cut\") }\n```\n- item "+strings.Repeat("word ", 40))
		h.ev(session.TypeToolCall, session.ToolCall{CallID: "c1", Name: "bash", Arguments: `{"command":"` + strings.Repeat("x", 300) + `"}`})
		h.send(approvalsMsg{list: []host.Approval{approval("sess-1")}})
		_ = h.view()
		h.ev(session.TypeToolResult, session.ToolResult{CallID: "c1", Name: "bash", Content: []llm.Block{{Type: llm.BlockText, Text: "out"}}, Meta: json.RawMessage(`{"exitCode":0,"durationMs":5}`)})
		h.send(tea.WindowSizeMsg{Width: max(w/2, 1), Height: 8})
		for _, l := range strings.Split(h.view(), "\n") {
			if lw := ansi.StringWidth(l); lw > h.m.width {
				t.Errorf("width %d: line of %d columns: %q", h.m.width, lw, l)
			}
		}
	}
}

func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update)", err)
	}
	if string(want) != got {
		t.Errorf("%s differs (run with -update to accept):\n--- got\n%s\n--- want\n%s", name, got, want)
	}
}

// frame is the whole screen of the alt-screen view, trailing spaces cut.

func frameOf(h *harness) string {
	lines := strings.Split(h.view(), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(l, " ")
	}
	return strings.Join(lines, "\n") + "\n"
}

func TestGoldenFrames(t *testing.T) {
	streaming := func(w int) *harness {
		h := newHarness(t, w, 22)
		h.startTurn()
		h.ev(session.TypeAssistantMsg, session.AssistantMessage{Turn: 1, Step: 1, Message: llm.Message{Role: llm.RoleAssistant, Content: []llm.Block{
			{Type: llm.BlockText, Text: "Let me look at the files."}, {Type: llm.BlockToolCall, ID: "c1", Name: "read"}}}})
		h.ev(session.TypeToolCall, session.ToolCall{CallID: "c1", Name: "edit", Arguments: `{"file_path":"parser.go"}`})
		h.ev(session.TypeToolResult, session.ToolResult{CallID: "c1", Name: "edit", Content: []llm.Block{{Type: llm.BlockText, Text: "ok"}},
			Meta: json.RawMessage(`{"diff":"--- a/parser.go\n+++ b/parser.go\n@@ -1,2 +1,2 @@\n-func parse() {}\n+func parse() error { return nil }\n"}`)})
		h.ev(session.TypeToolCall, session.ToolCall{CallID: "c2", Name: "bash", Arguments: `{"command":"go test ./parser/..."}`})
		h.now = h.now.Add(1500 * time.Millisecond)
		h.ev(session.TypeSubagentStart, subagent.StartEvent{RunID: "r1", ChildID: "child-1", Provider: "deepseek", Label: "reviewer"})
		h.ev(session.TypeStepStart, session.StepRef{Turn: 1, Step: 2})
		h.chunk(llm.ChunkTextDelta, "## Findings\n\nThe `parse` function:\n\n```go\nfunc parse() error { return nil }\n```\n\n1. returns early\n2. never")
		h.now = h.now.Add(500 * time.Millisecond)
		return h
	}
	golden(t, "streaming-80", frameOf(streaming(80)))
	golden(t, "streaming-40", frameOf(streaming(40)))
	h := streaming(80)
	h.send(approvalsMsg{list: []host.Approval{approval("sess-1")}})
	golden(t, "approval-80", frameOf(h))
	h = newHarness(t, 60, 16)
	h.b.rows = []catalog.Row{{ID: "01a231e8-ade1-7c29", Depth: 1, Label: "reviewer", Provider: "deepseek", Activity: catalog.ActivityRunning},
		{ID: "01a231e8-bbbb-7c29", Depth: 2, Label: "test runner", Provider: "deepseek", Activity: catalog.ActivityInactive}}
	h.typeText("/tree")
	h.key("enter")
	golden(t, "tree-60", frameOf(h))
}

func TestLiveTail(t *testing.T) {
	text := "intro\n```go\nline1\nline2\nline3"
	if got := liveTail(text, 2); got != "```\nline2\nline3" {
		t.Errorf("cut inside a code block: %q", got)
	}
	if got := liveTail("a\nb\nc", 2); got != "b\nc" {
		t.Errorf("plain cut: %q", got)
	}
	if got := liveTail("x\n```\ncode\n```\n\nafter", 3); got != "after" {
		t.Errorf("cut on a closing fence: %q", got)
	}
	if got := liveTail("a\nb", 5); got != "a\nb" {
		t.Errorf("short text: %q", got)
	}
}

func TestMarkdownHighlightsCode(t *testing.T) {
	th := newTheme(true)
	out := th.markdown("# Title\n\n```go\nfunc f() string { return \"s\" } // why\n```\n- **bold** item", 60)
	for _, want := range []string{
		th.keyword.Render("func"), th.keyword.Render("return"), th.str.Render(`"s"`), th.comment.Render("// why"),
		th.heading.Render("Title"), th.bold.Render("bold"),
	} {
		if !strings.Contains(out, want) {
			t.Errorf("markdown lacks %q:\n%q", want, out)
		}
	}
	plain := newTheme(false).markdown("```go\nfunc f() {}\n```", 60)
	if strings.Contains(plain, "\x1b[3") {
		t.Errorf("colour without colour: %q", plain)
	}
}
