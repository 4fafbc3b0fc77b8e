package cli_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dsh-dev/dsh/internal/llm/llmtest"
	"github.com/dsh-dev/dsh/internal/proc/proctest"
)

// terminalPatch offers the terminal tools in the standard preset.
const terminalPatch = `- id: preset.standard
  module: agent-preset
  config:
    name: standard
    tools: [bash, terminal_open, terminal_send, terminal_read, terminal_signal, terminal_list, terminal_close]
`

func termCall(name string, args map[string]any) llmtest.ToolCall {
	b, _ := json.Marshal(args)
	return llmtest.ToolCall{Name: name, Arguments: string(b)}
}

// A terminal opened by the real dsh runs a python REPL that is gone
// when dsh ends: at the end of a run (the session closes), and when dsh
// is killed with SIGKILL in the middle of one.
func TestTerminalREPLEndsWithDsh(t *testing.T) {
	for _, kill := range []bool{false, true} {
		t.Run(map[bool]string{false: "session-close", true: "kill-9"}[kill], func(t *testing.T) {
			e := newEnv(t)
			patch := filepath.Join(t.TempDir(), "patch.yaml")
			writeFile(t, patch, terminalPatch, 0o600)
			marker := fmt.Sprintf("dsh-term-%d", time.Now().UnixNano())
			fifo, lines := proctest.Fifo(t)
			open := termCall("terminal_open", map[string]any{"type": "command", "command": "exec python3 -q -i -c 'import sys' " + marker})
			send := termCall("terminal_send", map[string]any{"session_id": "term-1",
				"text": "x = 41; open(" + fmt.Sprintf("%q", fifo) + ", 'w').write('x=%d\\n' % (x + 1))"})
			read := termCall("terminal_send", map[string]any{"session_id": "term-1", "text": "print('value', x * 2)"})
			e.srv.Enqueue(llmtest.Response{ToolCalls: []llmtest.ToolCall{open}}, llmtest.Response{ToolCalls: []llmtest.ToolCall{send}},
				llmtest.Response{ToolCalls: []llmtest.ToolCall{read}})
			if kill {
				// dsh stays busy until it is killed.
				e.srv.Enqueue(llmtest.Response{ToolCalls: []llmtest.ToolCall{bashCall("sleep 1000")}})
			} else {
				e.srv.Enqueue(llmtest.Response{Text: "done"})
			}
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
			defer cancel()
			c := e.cmd(ctx, "run", "--patch", patch, "use a terminal")
			var stderr strings.Builder
			c.Stderr = &stderr
			if err := c.Start(); err != nil {
				t.Fatal(err)
			}
			select {
			case l := <-lines:
				if l != "x=42" {
					t.Fatalf("the REPL wrote %q", l)
				}
			case <-ctx.Done():
				_ = c.Process.Kill()
				_ = c.Wait()
				t.Fatalf("the REPL never wrote: %s", stderr.String())
			}
			if len(proctest.Marked(marker)) == 0 {
				t.Fatal("no process of the terminal found")
			}
			if kill {
				_ = syscall.Kill(c.Process.Pid, syscall.SIGKILL)
				_ = c.Wait()
			} else if err := c.Wait(); err != nil {
				t.Fatalf("dsh run: %v\n%s", err, stderr.String())
			}
			if left := proctest.Survivors(marker, 30*time.Second); len(left) > 0 {
				t.Fatalf("terminal processes outlived dsh: %v", left)
			}
			if !kill {
				// The second send read the REPL's state back.
				msgs := e.srv.Requests()[3].Messages()
				if res := msgText(msgs[len(msgs)-1]); !strings.Contains(res, "value 82") {
					t.Fatalf("the REPL did not keep x: %s", res)
				}
			}
		})
	}
}
