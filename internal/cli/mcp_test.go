package cli_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dsh-dev/dsh/internal/llm"
	"github.com/dsh-dev/dsh/internal/llm/llmtest"
	"github.com/dsh-dev/dsh/internal/mcp"
	"github.com/dsh-dev/dsh/internal/mcp/mcptest"
	"github.com/dsh-dev/dsh/internal/session"
)

// mcpConfig writes config.yaml with the given mcp_servers entries (and
// the external agents off, so the tool lists do not depend on the
// machine); extra is added at the top level.
func mcpConfig(t *testing.T, e *env, servers, extra string) {
	writeFile(t, filepath.Join(e.home, "config.yaml"), extra+`
profile:
  - {id: codex, module: codex, disabled: true}
  - {id: claude-code, module: claude-code, disabled: true}
mcp_servers:
`+servers, 0o600)
}

func toolResults(t *testing.T, events []session.Event) []session.ToolResult {
	t.Helper()
	var out []session.ToolResult
	for _, ev := range events {
		if ev.Type == session.TypeToolResult {
			var r session.ToolResult
			if err := ev.Decode(&r); err != nil {
				t.Fatal(err)
			}
			out = append(out, r)
		}
	}
	return out
}

func blocksText(bs []llm.Block) string {
	var parts []string
	for _, b := range bs {
		if b.Type == llm.BlockText {
			parts = append(parts, b.Text)
		}
	}
	return strings.Join(parts, "\n")
}

func requestTools(r llmtest.Request) []string {
	var names []string
	tools, _ := r.JSON["tools"].([]any)
	for _, tl := range tools {
		m, _ := tl.(map[string]any)
		if f, ok := m["function"].(map[string]any); ok {
			names = append(names, fmt.Sprint(f["name"]))
		}
	}
	return names
}

// TestMCPEchoRoundTrip: the scripted model calls an MCP tool by its
// bridged name; the server's answer is the logged tool result, and the
// tool was offered in the first request.
func TestMCPEchoRoundTrip(t *testing.T) {
	bin := mcptest.Everything(t)
	e := newEnv(t)
	mcpConfig(t, e, fmt.Sprintf("  - {name: everything, command: %s, approval: auto}\n", bin), "")
	e.srv.Enqueue(
		llmtest.Response{ToolCalls: []llmtest.ToolCall{toolCall("mcp__everything__echo", map[string]any{"message": "hi from the model"})}},
		llmtest.Response{Text: "The server echoed."},
	)
	out, stderr, code := e.dsh("", "run", "--json", "echo something")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	events, res := parseJSONRun(t, out)
	if res.Status != "completed" {
		t.Fatalf("result %+v", res)
	}
	rs := toolResults(t, events)
	if len(rs) != 1 || rs[0].IsError || blocksText(rs[0].Content) != "Echo: hi from the model" {
		t.Fatalf("tool results %+v", rs)
	}
	if tools := requestTools(e.srv.Requests()[0]); !contains(tools, "mcp__everything__echo") || !contains(tools, "mcp_read_resource") {
		t.Errorf("first request's tools: %v", tools)
	}
	if countTypes(events)[session.TypeApprovalAsked] != 0 {
		t.Error("an approval: auto server asked")
	}
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// TestMCPFilesystemWriteNeedsApproval: a write through server-filesystem
// asks under approval: ask, so with --approval never it is refused and
// nothing is written; under approval: auto it runs; under the read-only
// preset even the auto server asks.
func TestMCPFilesystemWriteNeedsApproval(t *testing.T) {
	bin := mcptest.Filesystem(t)
	e := newEnv(t)
	root := filepath.Join(e.cwd, "served")
	if err := os.Mkdir(root, 0o755); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(root, "out.txt")
	write := llmtest.Response{ToolCalls: []llmtest.ToolCall{toolCall("mcp__fs__write_file", map[string]any{"path": target, "content": "from the model"})}}

	for _, tc := range []struct {
		approval, flags string
		written         bool
	}{
		{"ask", "--approval never", false},
		{"auto", "--permission read-only --approval never", false},
		{"auto", "", true},
	} {
		mcpConfig(t, e, fmt.Sprintf("  - {name: fs, command: %s, args: [%s], approval: %s}\n", bin, root, tc.approval), "")
		e.srv.Enqueue(write, llmtest.Response{Text: "done"})
		args := append([]string{"run", "--json"}, strings.Fields(tc.flags)...)
		out, stderr, code := e.dsh("", append(args, "write the file")...)
		if code != 0 {
			t.Fatalf("%+v: exit %d: %s", tc, code, stderr)
		}
		events, _ := parseJSONRun(t, out)
		rs := toolResults(t, events)
		_, err := os.Stat(target)
		if (err == nil) != tc.written || len(rs) != 1 || rs[0].IsError == tc.written {
			t.Fatalf("%+v: written=%v, results %+v", tc, err == nil, rs)
		}
		asked := 0
		for _, ev := range events {
			if ev.Type == session.TypeApprovalAsked {
				asked++
				if !strings.Contains(string(ev.Data), `mcp:fs`) {
					t.Errorf("%+v: approval/asked %s", tc, ev.Data)
				}
			}
		}
		if want := !tc.written; (asked == 1) != want {
			t.Errorf("%+v: %d approvals asked", tc, asked)
		}
		if !tc.written && (rs[0].Error == nil || rs[0].Error.Code != "TOOL_DENIED") {
			t.Errorf("%+v: error %+v", tc, rs[0].Error)
		}
	}
	if b, _ := os.ReadFile(target); string(b) != "from the model" {
		t.Errorf("file = %q", b)
	}
}

// TestMCPServerEnvironmentIsScrubbed: a secret in dsh's environment does
// not reach the server; a variable the configuration hands over by name
// does.
func TestMCPServerEnvironmentIsScrubbed(t *testing.T) {
	bin := mcptest.Everything(t)
	e := newEnv(t)
	mcpConfig(t, e, fmt.Sprintf("  - {name: everything, command: %s, approval: auto, env: {HANDED_OVER: '${DSH_TEST_HANDED}'}}\n", bin), "")
	e.srv.Enqueue(
		llmtest.Response{ToolCalls: []llmtest.ToolCall{toolCall("mcp__everything__get-env", map[string]any{})}},
		llmtest.Response{Text: "ok"},
	)
	c := e.cmd(t.Context(), "run", "--json", "show the environment")
	c.Env = append(c.Env, "GITHUB_TOKEN=ghp_secret_never_share", "DSH_TEST_HANDED=visible-on-purpose")
	out, err := c.Output()
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	events, _ := parseJSONRun(t, string(out))
	rs := toolResults(t, events)
	if len(rs) != 1 || rs[0].IsError {
		t.Fatalf("results %+v", rs)
	}
	env := blocksText(rs[0].Content)
	if strings.Contains(env, "ghp_secret") || strings.Contains(env, "GITHUB_TOKEN") || strings.Contains(env, "DEEPSEEK_API_KEY") {
		t.Errorf("the server saw dsh's secrets:\n%s", env)
	}
	if !strings.Contains(env, `"HANDED_OVER": "visible-on-purpose"`) {
		t.Errorf("the handed-over variable is missing:\n%s", env)
	}
}

// TestMCPImageWithAndWithoutImageRoute: an image from a server becomes
// an image block on a route that accepts images and a note otherwise.
func TestMCPImageWithAndWithoutImageRoute(t *testing.T) {
	bin := mcptest.Everything(t)
	e := newEnv(t)
	for _, images := range []bool{true, false} {
		mcpConfig(t, e, fmt.Sprintf("  - {name: everything, command: %s, approval: auto}\n", bin), fmt.Sprintf(`
model: fake/m
providers:
  - id: fake
    base_url: %s
    models:
      - id: m
        images: %v
`, e.srv.URL(), images))
		e.srv.Enqueue(
			llmtest.Response{ToolCalls: []llmtest.ToolCall{toolCall("mcp__everything__get-tiny-image", map[string]any{})}},
			llmtest.Response{Text: "seen"},
		)
		out, stderr, code := e.dsh("", "run", "--json", "show me the image")
		if code != 0 {
			t.Fatalf("images=%v: exit %d: %s", images, code, stderr)
		}
		events, _ := parseJSONRun(t, out)
		rs := toolResults(t, events)
		if len(rs) != 1 || rs[0].IsError {
			t.Fatalf("images=%v: %+v", images, rs)
		}
		var img int
		for _, b := range rs[0].Content {
			if b.Type == llm.BlockImage {
				img++
			}
			if strings.Contains(b.Text, "iVBOR") {
				t.Errorf("base64 inside text: %q", b.Text)
			}
		}
		if images && img != 1 {
			t.Errorf("image route: %d image blocks", img)
		}
		if !images && (img != 0 || !strings.Contains(blocksText(rs[0].Content), "the model route does not accept images")) {
			t.Errorf("text route: %+v", rs[0].Content)
		}
	}
}

// TestMCPCommands: dsh mcp list shows each server's state and source,
// dsh mcp call runs one tool, dsh doctor reports the servers, and dsh
// run --mcp-prompt sends a rendered prompt as the user message.
func TestMCPCommands(t *testing.T) {
	bin := mcptest.Everything(t)
	e := newEnv(t)
	mcpConfig(t, e, fmt.Sprintf(`  - {name: everything, command: %s}
  - {name: broken, command: /nonexistent/mcp-server}
  - {name: later, command: x, disabled: true}
`, bin), "")
	out, stderr, code := e.dsh("", "mcp", "list", "--json")
	if code != 0 {
		t.Fatalf("mcp list: %d %s", code, stderr)
	}
	var st []mcp.Status
	if err := json.Unmarshal([]byte(out), &st); err != nil || len(st) != 3 {
		t.Fatalf("mcp list --json: %v\n%s", err, out)
	}
	if st[0].State != mcp.StateConnected || len(st[0].Tools) == 0 || !st[0].Resources || !strings.Contains(st[0].Source, "config.yaml (row mcp.everything)") {
		t.Errorf("everything: %+v", st[0])
	}
	if st[1].State != mcp.StateFailed || !strings.Contains(st[1].LastError, "MCP_START") || st[2].State != mcp.StateDisabled {
		t.Errorf("broken, disabled: %+v %+v", st[1], st[2])
	}
	out, _, _ = e.dsh("", "mcp", "list")
	if !strings.Contains(out, "everything") || !strings.Contains(out, "connected") || !strings.Contains(out, "failed") {
		t.Errorf("mcp list:\n%s", out)
	}

	out, stderr, code = e.dsh("", "mcp", "call", "everything", "get-sum", `{"a":20,"b":22}`)
	if code != 0 || !strings.Contains(out, "42") {
		t.Errorf("mcp call: %d %q %s", code, out, stderr)
	}
	_, stderr, code = e.dsh("", "mcp", "call", "everything", "no-such-tool")
	if code != 1 || !strings.Contains(stderr, "MCP_") {
		t.Errorf("mcp call of a missing tool: %d %s", code, stderr)
	}

	out, _, code = e.dsh("", "doctor")
	if code != 1 || !strings.Contains(out, "mcp everything") || !strings.Contains(out, "mcp broken") {
		t.Errorf("doctor (%d):\n%s", code, out)
	}

	e.srv.Enqueue(llmtest.Response{Text: "ok"})
	_, stderr, code = e.dsh("", "run", "--json", "--mcp-prompt", "everything:simple-prompt", "and then some")
	if code != 0 {
		t.Fatalf("run --mcp-prompt: %d %s", code, stderr)
	}
	found := false
	for _, m := range e.srv.Requests()[len(e.srv.Requests())-1].Messages() {
		txt := msgText(m)
		found = found || (m["role"] == "user" && strings.HasPrefix(txt, "This is a simple prompt without arguments.\n\nand then some"))
	}
	if !found {
		t.Errorf("no user message with the rendered prompt: %v", e.srv.Requests()[len(e.srv.Requests())-1].Messages())
	}
	_, _, code = e.dsh("", "run", "--mcp-prompt", "nowhere:x")
	if code != 2 {
		t.Errorf("unknown server: exit %d", code)
	}
}

// TestMCPCallReviewedUnderAutoPreset: under the auto preset a call to an
// approval: ask server goes to the automatic reviewer, whose refusal the
// model reads; nothing is written.
func TestMCPCallReviewedUnderAutoPreset(t *testing.T) {
	bin := mcptest.Filesystem(t)
	e := newEnv(t)
	root := filepath.Join(e.cwd, "served")
	if err := os.Mkdir(root, 0o755); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(root, "out.txt")
	mcpConfig(t, e, fmt.Sprintf("  - {name: fs, command: %s, args: [%s]}\n", bin, root), "")
	e.srv.Enqueue(
		llmtest.Response{ToolCalls: []llmtest.ToolCall{toolCall("mcp__fs__write_file", map[string]any{"path": target, "content": "x"})}},
		llmtest.Response{Text: `{"risk":"high","reason":"writes outside what the task needs"}`},
		llmtest.Response{Text: "understood"},
	)
	out, stderr, code := e.dsh("", "run", "--json", "--permission", "auto", "write the file")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	events, _ := parseJSONRun(t, out)
	rs := toolResults(t, events)
	if len(rs) != 1 || !rs[0].IsError || !strings.Contains(blocksText(rs[0].Content), "rejected by the automatic reviewer: high risk") {
		t.Fatalf("results %+v", rs)
	}
	if _, err := os.Stat(target); err == nil {
		t.Error("the reviewed-away write happened")
	}
	decided := false
	for _, ev := range events {
		decided = decided || (ev.Type == session.TypeApprovalDecided && strings.Contains(string(ev.Data), `"by":"reviewer"`))
	}
	if !decided {
		t.Error("no approval/decided by the reviewer")
	}
}

// TestMCPTimeout: a call past the server's tool_timeout ends with
// MCP_TIMEOUT in the log, and the run goes on.
func TestMCPTimeout(t *testing.T) {
	bin := mcptest.Everything(t)
	e := newEnv(t)
	mcpConfig(t, e, fmt.Sprintf("  - {name: everything, command: %s, approval: auto, tool_timeout: 1s}\n", bin), "")
	e.srv.Enqueue(
		llmtest.Response{ToolCalls: []llmtest.ToolCall{toolCall("mcp__everything__trigger-long-running-operation", map[string]any{"duration": 30, "steps": 30})}},
		llmtest.Response{Text: "it timed out"},
	)
	out, stderr, code := e.dsh("", "run", "--json", "run the long operation")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	events, res := parseJSONRun(t, out)
	rs := toolResults(t, events)
	if res.Status != "completed" || len(rs) != 1 || !rs[0].IsError || rs[0].Error == nil || rs[0].Error.Code != "MCP_TIMEOUT" {
		t.Fatalf("result %+v, tool results %+v", res, rs)
	}
}
