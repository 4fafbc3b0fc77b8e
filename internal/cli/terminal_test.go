package cli_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dsh-dev/dsh/internal/llm/llmtest"
	"github.com/dsh-dev/dsh/internal/proc/proctest"
	"github.com/dsh-dev/dsh/internal/session"
)

// terminalPatch offers the terminal tools in the standard preset; sends
// settle on the prompt only (a loaded machine may pause the output).
const terminalPatch = `- id: preset.standard
  module: agent-preset
  config:
    name: standard
    tools: [bash, terminal_open, terminal_send, terminal_read, terminal_signal, terminal_list, terminal_close]
- id: tool.terminal
  module: tool/terminal
  config: {quiet: 60s, wait: 60s}
`

// procsIn lists the live processes whose working directory is dir (a
// process in a sandbox's mount namespace sees the same path: the
// workspace is bound at its own path).
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

// hasComm reports whether one of pids runs a program whose name starts
// with comm.
func hasComm(pids []int, comm string) bool {
	for _, pid := range pids {
		if b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm"); err == nil && strings.HasPrefix(strings.TrimSpace(string(b)), comm) {
			return true
		}
	}
	return false
}

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
			// The REPL is found by its working directory, a fresh one.
			dir := filepath.Join(e.cwd, fmt.Sprintf("repl-%d", time.Now().UnixNano()))
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			fifo, lines := proctest.Fifo(t)
			open := termCall("terminal_open", map[string]any{"type": "python", "cwd": dir})
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
			pids := procsIn(dir)
			if !hasComm(pids, "python3") {
				t.Fatalf("the REPL is not among the processes in its directory: %v", pids)
			}
			if kill {
				_ = syscall.Kill(c.Process.Pid, syscall.SIGKILL)
				_ = c.Wait()
			} else if err := c.Wait(); err != nil {
				t.Fatalf("dsh run: %v\n%s", err, stderr.String())
			}
			for _, pid := range pids {
				if !proctest.WaitExit(pid, 30*time.Second) {
					t.Fatalf("terminal process %d outlived dsh (of %v)", pid, pids)
				}
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

// The minimal preset's bash is one shell for the session: cd and a
// variable set in one call are there in the next.
func TestMinimalPresetBashIsPersistent(t *testing.T) {
	e := newEnv(t)
	e.srv.Enqueue(llmtest.Response{ToolCalls: []llmtest.ToolCall{bashCall("mkdir -p deep/er && cd deep/er && N=7")}},
		llmtest.Response{ToolCalls: []llmtest.ToolCall{bashCall("echo \"$N in $(basename \"$PWD\")\"")}},
		llmtest.Response{Text: "done"})
	if _, stderr, code := e.dsh("", "run", "--agent-preset", "minimal", "go"); code != 0 {
		t.Fatalf("run: %d %s", code, stderr)
	}
	msgs := e.srv.Requests()[2].Messages()
	if res := msgText(msgs[len(msgs)-1]); !strings.Contains(res, "7 in er\n") || !strings.Contains(res, "[exit code: 0]") {
		t.Fatalf("the second call did not see the first's state: %s", res)
	}
	// The standard preset's bash is still one shell per call.
	e.srv.Enqueue(llmtest.Response{ToolCalls: []llmtest.ToolCall{bashCall("N=7")}},
		llmtest.Response{ToolCalls: []llmtest.ToolCall{bashCall("echo \"[${N:-unset}]\"")}},
		llmtest.Response{Text: "done"})
	if _, stderr, code := e.dsh("", "run", "go"); code != 0 {
		t.Fatalf("run: %d %s", code, stderr)
	}
	msgs = e.srv.Requests()[5].Messages()
	if res := msgText(msgs[len(msgs)-1]); !strings.Contains(res, "[unset]") {
		t.Fatalf("standard bash kept state: %s", res)
	}
}

// Text typed into a terminal is a command to the permission rules and
// the approval service: a deny rule refuses it, an ask rule puts the
// exact text to the approver (here the policy never: refused).
func TestTerminalSendGoesThroughRules(t *testing.T) {
	e := newEnv(t)
	writeFile(t, filepath.Join(e.home, "config.yaml"), `
profile:
  - id: permissions
    module: permissions
    config:
      rules:
        - {tool: terminal_send, command_prefix: "git push", action: deny, reason: "no pushing"}
        - {tool: terminal_send, command_prefix: rm, action: ask}
`, 0o600)
	patch := filepath.Join(t.TempDir(), "patch.yaml")
	writeFile(t, patch, terminalPatch, 0o600)
	e.srv.Enqueue(llmtest.Response{ToolCalls: []llmtest.ToolCall{termCall("terminal_open", map[string]any{"type": "shell"})}},
		llmtest.Response{ToolCalls: []llmtest.ToolCall{termCall("terminal_send", map[string]any{"session_id": "term-1", "text": "git push origin main"})}},
		llmtest.Response{ToolCalls: []llmtest.ToolCall{termCall("terminal_send", map[string]any{"session_id": "term-1", "text": "rm -rf build"})}},
		llmtest.Response{ToolCalls: []llmtest.ToolCall{termCall("terminal_send", map[string]any{"session_id": "term-1", "text": "echo ok-$((6*7))"})}},
		llmtest.Response{Text: "done"})
	// --approval never: nobody answers (a run on a terminal would ask
	// there), and the question is still logged.
	stdout, stderr, code := e.dsh("", "run", "--json", "--approval", "never", "--patch", patch, "go")
	if code != 0 {
		t.Fatalf("run: %d %s\n%s", code, stderr, stdout)
	}
	events, _ := parseJSONRun(t, stdout)
	var results []session.ToolResult
	var asked []map[string]any
	for _, ev := range events {
		switch ev.Type {
		case session.TypeToolResult:
			var r session.ToolResult
			_ = ev.Decode(&r)
			results = append(results, r)
		case session.TypeApprovalAsked:
			var a map[string]any
			_ = ev.Decode(&a)
			asked = append(asked, a)
		}
	}
	if len(results) != 4 {
		t.Fatalf("results: %+v", results)
	}
	if r := results[1]; r.Error == nil || r.Error.Code != "PERMISSION_DENIED" {
		t.Errorf("git push: %+v", r)
	}
	if r := results[2]; !r.IsError || len(asked) != 1 || asked[0]["command"] != "rm -rf build" || asked[0]["toolName"] != "terminal_send" {
		t.Errorf("rm: %+v, asked %v", r, asked)
	}
	if r := results[3]; r.IsError || !strings.Contains(fmt.Sprint(r.Content), "ok-42") {
		t.Errorf("echo: %+v", r)
	}
}
