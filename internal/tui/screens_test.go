package tui_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dsh-dev/dsh/internal/llm/llmtest"
)

// TestCaptureScreens saves the main states of the UI as text, for people
// to look at: DSH_TUI_SCREENS=DIR go test ./internal/tui -run Capture.
func TestCaptureScreens(t *testing.T) {
	dir := os.Getenv("DSH_TUI_SCREENS")
	if dir == "" {
		t.Skip("set DSH_TUI_SCREENS=DIR to save captures of the UI's main states")
	}
	save := func(name, text string) {
		if err := os.WriteFile(filepath.Join(dir, "tui-"+name+".txt"), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	answer := "## What changed\n\nThe parser now returns an **error** instead of panicking:\n\n```go\nfunc Parse(src string) (*File, error) {\n\t// a comment\n\treturn nil, fmt.Errorf(\"line %d: %w\", n, err)\n}\n```\n\n1. `Parse` checks its input\n2. the lexer reports positions\n3. tests cover the failures\n\nThat is all for now."
	t.Run("streaming", func(t *testing.T) {
		tm := newTerm(t)
		write, _ := json.Marshal(map[string]any{"file_path": "notes.md", "content": "# notes\n"})
		tm.srv.Enqueue(
			llmtest.Response{Reasoning: "The user wants a summary. I should look at the files first.", Text: "Let me look around first.",
				ToolCalls: []llmtest.ToolCall{bash("ls; echo done", nil), {Name: "write", Arguments: string(write)}}, Usage: &llmtest.Usage{Input: 5200, Output: 310}},
			llmtest.Response{Text: answer, ChunkRunes: 3, DelayPerChunk: 40 * time.Millisecond, Usage: &llmtest.Usage{Input: 6100, Output: 420}},
		)
		tm.start(100, 32, "tui")
		tm.waitFor("/help for commands")
		tm.typeLine("summarise the parser change")
		tm.waitFor("the lexer")
		save("streaming", tm.screen())
		tm.waitFor("That is all for now.")
		save("finished", tm.waitScreen("the turn to end", func(s string) bool { return !strings.Contains(s, "working") }))
		tm.typeLine("/help")
		tm.waitFor("approval: y allow once")
		save("help", tm.screen())
	})
	t.Run("approval", func(t *testing.T) {
		tm := newTerm(t)
		target := filepath.Join(t.TempDir(), "outside.txt")
		tm.srv.Enqueue(
			llmtest.Response{ToolCalls: []llmtest.ToolCall{bash("touch "+target, nil)}},
			llmtest.Response{ToolCalls: []llmtest.ToolCall{bash("touch "+target, map[string]any{
				"sandbox_permissions": "danger-full-access", "justification": "the file lies outside the workspace"})}},
			llmtest.Response{Text: "understood, leaving it"},
		)
		tm.start(100, 30, "tui", "--permission", "read-only")
		tm.waitFor("/help for commands")
		tm.typeLine("touch the file")
		tm.waitFor("Allow bash?")
		save("approval", tm.screen())
		tm.keys("e")
		tm.keys("-l", "use the workspace instead")
		tm.waitFor("instead▏")
		save("approval-feedback", tm.screen())
		tm.keys("Enter")
		tm.waitFor("understood")
		save("approval-denied", tm.screen())
	})
	t.Run("tree", func(t *testing.T) {
		tm := newTerm(t)
		var mu sync.Mutex
		release := make(chan struct{})
		tm.srv.SetFallback(func(r llmtest.Request) llmtest.Response {
			mu.Lock()
			body := string(r.Body)
			mu.Unlock()
			switch {
			case strings.Contains(body, "CHILD TASK") && !strings.Contains(body, "delegate it"):
				<-release
				return llmtest.Response{Text: "child says hi", Usage: &llmtest.Usage{Input: 900, Output: 40}}
			case strings.Contains(body, "child says hi"):
				return llmtest.Response{Text: "parent done: the greeter said hi"}
			case r.ToolResultCount() == 0:
				b, _ := json.Marshal(map[string]any{"description": "greeter", "prompt": "CHILD TASK: say hi"})
				return llmtest.Response{ToolCalls: []llmtest.ToolCall{{Name: "subagent", Arguments: string(b)}}}
			default:
				return llmtest.Response{Text: "waiting for the child"}
			}
		})
		tm.start(100, 30, "tui")
		tm.waitFor("/help for commands")
		tm.typeLine("delegate it")
		tm.waitFor("◆ subagent greeter")
		save("subagent-running", tm.screen())
		tm.typeLine("/tree")
		tm.waitFor("Subagents")
		save("tree-running", tm.screen())
		tm.keys("Escape")
		close(release)
		tm.waitFor("parent done")
		tm.waitScreen("the turn to end", func(s string) bool { return !strings.Contains(s, "working") })
		tm.typeLine("/tree")
		tm.waitFor("Subagents")
		save("tree", tm.screen())
		tm.keys("Enter")
		tm.waitFor("(read-only)")
		save("child-transcript", tm.screen())
	})
	t.Run("questions", func(t *testing.T) {
		tm := newTerm(t)
		tm.srv.Enqueue(
			llmtest.Response{Text: "Two choices before I start.", ToolCalls: []llmtest.ToolCall{askCall(
				map[string]any{"id": "db", "header": "Database", "question": "Which database should the service use?", "options": opts("Postgres", "SQLite")},
				map[string]any{"id": "checks", "header": "Checks", "question": "Which checks should CI run?", "multi_select": true, "options": opts("Unit tests", "Race detector", "Linters")})}},
			llmtest.Response{Text: "Noted. Planning next.", ToolCalls: []llmtest.ToolCall{planCall("## Plan\n\n1. Add `internal/store/sqlite` tables for the service.\n2. Wire **unit tests** and linters into CI.\n3. Document the setup in the README.\n\n- Nothing else changes.")}},
			llmtest.Response{Text: "Plan approved; starting."},
		)
		tm.start(100, 34, "tui")
		tm.waitFor("/help for commands")
		tm.typeLine("/plan")
		tm.waitFor("plan mode on")
		tm.typeLine("set up the service")
		tm.waitFor("dsh asks")
		save("question", tm.screen())
		tm.keys("2")
		tm.waitFor("Which checks should CI run?")
		tm.keys("Space", "Down", "Down", "Space")
		tm.waitFor("[x] 3. Linters")
		save("question-multi", tm.screen())
		tm.keys("Enter")
		tm.waitFor("Plan ready for review")
		save("plan", tm.screen())
		tm.keys("y")
		tm.waitFor("Plan approved; starting.")
		save("plan-approved", tm.waitScreen("the turn to end", func(s string) bool { return !strings.Contains(s, "working") }))
	})
	t.Run("narrow", func(t *testing.T) {
		tm := newTerm(t)
		tm.srv.Enqueue(llmtest.Response{Text: answer}, llmtest.Response{Text: answer})
		tm.start(100, 30, "tui")
		tm.waitFor("/help for commands")
		tm.typeLine("before the resize")
		tm.waitFor("That is all")
		if err := tm.tmux("resize-window", "-t", "m", "-x", "50", "-y", "30"); err != nil {
			t.Fatal(err)
		}
		tm.typeLine("after the resize")
		tm.waitScreen("the second answer", func(s string) bool {
			return strings.Contains(s, "› after the resize") && strings.Contains(s, "That is all for now.\n") && !strings.Contains(s, "working")
		})
		save("narrow-50", tm.screen())
		if err := tm.tmux("resize-window", "-t", "m", "-x", "40", "-y", "30"); err != nil {
			t.Fatal(err)
		}
		tm.waitScreen("the 40-column redraw", func(s string) bool { return strings.Contains(s, "\n"+strings.Repeat("─", 40)+"\n›") })
		tm.typeLine("/sessions")
		tm.waitFor("Sessions")
		save("narrow-40-sessions", tm.screen())
	})
}
