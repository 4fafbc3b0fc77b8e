package cli_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/dsh-dev/dsh/internal/llm/llmtest"
	"github.com/dsh-dev/dsh/internal/proc/proctest"
	"github.com/dsh-dev/dsh/internal/session"
)

func toolCall(name string, args map[string]any) llmtest.ToolCall {
	b, _ := json.Marshal(args)
	return llmtest.ToolCall{Name: name, Arguments: string(b)}
}

func writeFile(t *testing.T, path, content string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
}

// TestCodingTaskInRepository is the scripted end-to-end coding task: in a
// git repository with an AGENTS.md, the model reads a file, edits it,
// runs the test command with bash, and the file on disk ends up right.
// withoutExternalAgents disables the codex and claude-code rows, whose
// tools appear only where those executables are installed, so that a
// test asserting the exact tool list does not depend on the machine.
func withoutExternalAgents(t *testing.T, e *env) {
	writeFile(t, filepath.Join(e.home, "config.yaml"), `
profile:
  - {id: codex, module: codex, disabled: true}
  - {id: claude-code, module: claude-code, disabled: true}
`, 0o600)
}

func TestCodingTaskInRepository(t *testing.T) {
	e := newEnv(t)
	withoutExternalAgents(t, e)
	repo := e.cwd
	writeFile(t, filepath.Join(repo, ".git", "HEAD"), "ref: refs/heads/main\n", 0o644)
	writeFile(t, filepath.Join(repo, "AGENTS.md"), "Always run ./test.sh after editing.\n", 0o644)
	writeFile(t, filepath.Join(repo, "greeting.txt"), "hello world\n", 0o644)
	writeFile(t, filepath.Join(repo, "test.sh"), "#!/bin/sh\ngrep -qx 'hello dsh' greeting.txt && echo PASS || { echo FAIL; exit 1; }\n", 0o755)
	e.srv.Enqueue(
		llmtest.Response{ToolCalls: []llmtest.ToolCall{toolCall("read", map[string]any{"file_path": "greeting.txt"})}},
		llmtest.Response{ToolCalls: []llmtest.ToolCall{toolCall("edit", map[string]any{"file_path": "greeting.txt", "old_string": "hello world", "new_string": "hello dsh"})}},
		llmtest.Response{ToolCalls: []llmtest.ToolCall{bashCall("./test.sh")}},
		llmtest.Response{Text: "Changed the greeting; ./test.sh passes."},
	)
	out, stderr, code := e.dsh("", "run", "--json", "change the greeting to 'hello dsh'")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	events, res := parseJSONRun(t, out)
	if res.Status != "completed" {
		t.Fatalf("result %+v", res)
	}
	if got, _ := os.ReadFile(filepath.Join(repo, "greeting.txt")); string(got) != "hello dsh\n" {
		t.Errorf("greeting.txt = %q", got)
	}
	var results []session.ToolResult
	for _, ev := range events {
		if ev.Type == session.TypeToolResult {
			var r session.ToolResult
			_ = ev.Decode(&r)
			results = append(results, r)
		}
	}
	if len(results) != 3 {
		t.Fatalf("%d tool results", len(results))
	}
	for _, r := range results {
		if r.IsError {
			t.Errorf("%s failed: %+v", r.Name, r.Content)
		}
	}
	if txt := results[2].Content[0].Text; !strings.Contains(txt, "PASS") || !strings.Contains(txt, "[exit code: 0]") {
		t.Errorf("test run result %q", txt)
	}
	first := e.srv.Requests()[0]
	// lsp is offered when a language server is: gopls, found on PATH.
	lspTool := ""
	if _, err := exec.LookPath("gopls"); err == nil {
		lspTool = "lsp,"
	}
	if names := strings.Join(first.ToolNames(), ","); names != "ask_user_question,bash,create_goal,edit,exit_plan_mode,get_goal,glob,grep,interrupt_agent,job_kill,job_list,job_output,list_agents,list_subagent_models,"+lspTool+"ralph,read,read_image,send_message,skill,subagent,subagent_fork,todo_write,update_goal,web_fetch,web_search,write" {
		t.Errorf("standard tools = %s", names)
	}
	body := string(first.Body)
	if !strings.Contains(body, "Always run ./test.sh after editing.") || !strings.Contains(body, "system-reminder") {
		t.Error("AGENTS.md was not injected into the first request")
	}
	if !strings.Contains(body, "Git branch of the workspace: main") || !strings.Contains(body, "Current runtime context") {
		t.Error("runtime context snapshot missing from the first request")
	}
	// Injected once: later requests carry the reminder exactly once.
	if n := strings.Count(string(e.srv.Requests()[3].Body), "Always run ./test.sh after editing."); n != 1 {
		t.Errorf("AGENTS.md appears %d times in the last request", n)
	}
	// The system prompt and tools are byte-stable across requests.
	var sys0, sys3 string
	for i, r := range []llmtest.Request{first, e.srv.Requests()[3]} {
		s := r.Messages()[0]["content"].(string)
		if i == 0 {
			sys0 = s
		} else {
			sys3 = s
		}
	}
	if sys0 != sys3 || !strings.Contains(sys0, repo) {
		t.Error("system prompt changed between requests or lacks the cwd")
	}
}

func TestMinimalPresetIsKeptOnResume(t *testing.T) {
	e := newEnv(t)
	withoutExternalAgents(t, e)
	e.srv.Enqueue(llmtest.Response{Text: "a"}, llmtest.Response{Text: "b"})
	out, stderr, code := e.dsh("", "run", "--json", "--agent-preset", "minimal", "hi")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	_, res := parseJSONRun(t, out)
	req := e.srv.Requests()[0]
	if names := strings.Join(req.ToolNames(), ","); names != "bash,str_replace_based_edit_tool" {
		t.Errorf("minimal tools = %s", names)
	}
	sys := req.Messages()[0]["content"].(string)
	if !strings.HasPrefix(sys, "You are a coding agent working in "+e.cwd) || strings.Contains(sys, "You are dsh") {
		t.Errorf("minimal system prompt = %q", sys)
	}
	if _, _, code := e.dsh("", "run", "--continue", "again"); code != 0 {
		t.Fatal("continue failed")
	}
	if names := strings.Join(e.srv.Requests()[1].ToolNames(), ","); names != "bash,str_replace_based_edit_tool" {
		t.Errorf("resumed tools = %s", names)
	}
	if _, stderr, code := e.dsh("", "run", "--resume", res.SessionID, "--agent-preset", "standard", "x"); code != 2 || !strings.Contains(stderr, "keeps its preset") {
		t.Errorf("preset change on resume: %d %s", code, stderr)
	}
	list, _, _ := e.dsh("", "sessions", "list", "--json")
	if !strings.Contains(list, `"agentPreset": "minimal"`) {
		t.Errorf("header lacks the preset: %s", list)
	}
	if _, stderr, code := e.dsh("", "run", "--agent-preset", "nope", "x"); code != 2 || !strings.Contains(stderr, "unknown agent preset") {
		t.Errorf("unknown preset: %d %s", code, stderr)
	}
}

func TestConfigDumpAndPatches(t *testing.T) {
	e := newEnv(t)
	writeFile(t, filepath.Join(e.home, "config.yaml"), `
profile:
  - id: tool.read
    module: tool/read
    config: {max_lines: 5}
`, 0o600)
	patch := filepath.Join(t.TempDir(), "patch.yaml")
	writeFile(t, patch, "- id: tool.bash\n  module: tool/bash\n  config: {output_limit: 1234}\n", 0o600)
	out, stderr, code := e.dsh("", "config", "dump", "--patch", patch)
	if code != 0 {
		t.Fatalf("dump: %d %s", code, stderr)
	}
	for _, want := range []string{
		"# from built-in\n- id: model",
		"# from " + filepath.Join(e.home, "config.yaml") + "\n- id: tool.read",
		"max_lines: 5",
		"# from " + patch + "\n- id: tool.bash",
		"output_limit: 1234",
		"id: compaction",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("dump lacks %q:\n%s", want, out)
		}
	}
	// The patched bash limit reaches the tool: 3000 bytes of output are bounded.
	e.srv.Enqueue(llmtest.Response{ToolCalls: []llmtest.ToolCall{bashCall("seq 1 1000")}}, llmtest.Response{Text: "ok"})
	if _, stderr, code := e.dsh("", "run", "--patch", patch, "go"); code != 0 {
		t.Fatalf("run: %s", stderr)
	}
	msgs := e.srv.Requests()[1].Messages()
	if res := msgText(msgs[len(msgs)-1]); !strings.Contains(res, "elided") {
		t.Errorf("bash output not bounded by the patched limit: %.300s", res)
	}

	bad := filepath.Join(t.TempDir(), "bad.yaml")
	writeFile(t, bad, "- id: extra\n  module: no/such\n", 0o600)
	if _, stderr, code := e.dsh("", "config", "dump", "--patch", bad); code != 2 || !strings.Contains(stderr, bad+`, line `) || !strings.Contains(stderr, `profile row "extra": unknown module`) {
		t.Errorf("bad module: %d %s", code, stderr)
	}
	badCfg := filepath.Join(t.TempDir(), "badcfg.yaml")
	writeFile(t, badCfg, "- id: tool.read\n  module: tool/read\n  config: {max_lnes: 5}\n", 0o600)
	if _, stderr, code := e.dsh("", "run", "--patch", badCfg, "x"); code != 2 || !strings.Contains(stderr, `"tool.read"`) || !strings.Contains(stderr, "max_lnes") {
		t.Errorf("bad config: %d %s", code, stderr)
	}
	off := filepath.Join(t.TempDir(), "off.yaml")
	writeFile(t, off, "- id: tool.grep\n  module: tool/grep\n  disabled: true\n", 0o600)
	if _, stderr, code := e.dsh("", "run", "--patch", off, "x"); code != 2 || !strings.Contains(stderr, `names tool "grep"`) {
		t.Errorf("disabled tool in preset: %d %s", code, stderr)
	}
}

func msgText(m map[string]any) string {
	if s, ok := m["content"].(string); ok {
		return s
	}
	return fmt.Sprint(m["content"])
}

// TestCompactionThroughTheCLI runs a session on a model with a small
// context window: it compacts automatically and keeps going, the request
// after a compaction is smaller, `sessions show` still shows every
// original event, and `dsh compact` compacts by hand.
func TestCompactionThroughTheCLI(t *testing.T) {
	e := newEnv(t)
	writeFile(t, filepath.Join(e.home, "config.yaml"), fmt.Sprintf(`
model: tiny/small
providers:
  - id: tiny
    base_url: %s
    models:
      - id: small
        context_window: 6000
`, e.srv.URL()), 0o600)
	const steps = 8
	var mu sync.Mutex
	step := 0
	e.srv.SetFallback(func(r llmtest.Request) llmtest.Response {
		mu.Lock()
		defer mu.Unlock()
		msgs := r.Messages()
		if strings.Contains(msgText(msgs[len(msgs)-1]), "is about to be replaced by a summary") {
			return llmtest.Response{Text: "Summary: the user asked to print number ranges; several seq runs were done."}
		}
		if step == steps {
			return llmtest.Response{Text: "all done"}
		}
		step++
		i := step - 1
		// Usage as a provider would count this request: a token per 4
		// bytes. (Compaction triggers on the larger of the reported usage
		// and dsh's own estimate, so a usage far below the request's real
		// size would not keep it off.)
		return llmtest.Response{Text: fmt.Sprintf("step %d", i), ToolCalls: []llmtest.ToolCall{bashCall(fmt.Sprintf("seq %d %d", i*1000, i*1000+300))}, Usage: &llmtest.Usage{Input: len(r.Body) / 4, Output: 20}}
	})
	// The minimal preset (bash and the editor): the standard preset's
	// tool schemas alone would fill this small window.
	out, stderr, code := e.dsh("", "run", "--json", "--agent-preset", "minimal", "print number ranges")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	events, res := parseJSONRun(t, out)
	c := countTypes(events)
	if c[session.TypeCompactionStart] == 0 || c[session.TypeCompactionStart] != c[session.TypeCompactionEnd] {
		t.Fatalf("no balanced compaction: %v", c)
	}
	if c[session.TypeToolResult] != steps || res.Status != "completed" {
		t.Fatalf("session did not continue past the window: %v %+v", c, res)
	}
	// Find a conversation request right after a summary request and
	// check it is smaller than the one before the compaction.
	reqs := e.srv.Requests()
	shrunk := false
	for i := 1; i+1 < len(reqs); i++ {
		if strings.Contains(string(reqs[i].Body), "Summary: the user") || !strings.Contains(string(reqs[i+1].Body), "Summary of the earlier conversation") {
			continue
		}
		if len(reqs[i+1].Body) < len(reqs[i-1].Body) {
			shrunk = true
		}
	}
	if !shrunk {
		t.Error("no request after compaction was smaller than the one before")
	}
	shown, _, _ := e.dsh("", "sessions", "show", res.SessionID)
	for i := range steps {
		if !strings.Contains(shown, fmt.Sprintf(`seq %d %d`, i*1000, i*1000+300)) {
			t.Errorf("transcript lost step %d", i)
		}
	}
	if !strings.Contains(shown, "[compaction]") {
		t.Errorf("transcript does not show the compaction:\n%s", shown)
	}
	e.srv.SetFallback(func(llmtest.Request) llmtest.Response { return llmtest.Response{Text: "Manual summary."} })
	if out, stderr, code := e.dsh("", "compact", res.SessionID); code != 0 || !strings.Contains(out, "compacted") && !strings.Contains(out, "nothing to compact") {
		t.Errorf("dsh compact: %d %q %s", code, out, stderr)
	}
}

// TestBackgroundJobWakesTheHeadlessRun: a background bash job outlives
// the turn that started it; its completion notice starts another turn,
// and dsh run ends after answering it.
func TestBackgroundJobWakesTheHeadlessRun(t *testing.T) {
	e := newEnv(t)
	var mu sync.Mutex
	e.srv.SetFallback(func(r llmtest.Request) llmtest.Response {
		mu.Lock()
		defer mu.Unlock()
		switch body := string(r.Body); {
		case strings.Contains(body, "J42"): // only the job's output, not its command, says this
			return llmtest.Response{Text: "the job finished"}
		case r.ToolResultCount() == 0:
			return llmtest.Response{ToolCalls: []llmtest.ToolCall{toolCall("bash", map[string]any{"command": "sleep 0.2; echo J$((40+2))", "description": "slow", "run_in_background": true})}}
		default:
			return llmtest.Response{Text: "started it"}
		}
	})
	out, stderr, code := e.dsh("", "run", "--json", "--permission", "full-access", "start a job")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	events, res := parseJSONRun(t, out)
	if res.Text != "the job finished" {
		t.Fatalf("result %+v, events %v", res, countTypes(events))
	}
	reqs := e.srv.Requests()
	if last := string(reqs[len(reqs)-1].Body); !strings.Contains(last, "J42") || !strings.Contains(last, "bash-1") {
		t.Errorf("the completion notice did not reach the model: %.500s", last)
	}
}

// TestSubagentChildRunsInItsOwnSession: the parent delegates with the
// (continuable) subagent tool; the child runs in its own stored session
// (header with parent, origin and depth), and its answer reaches the
// parent as a settle notice that wakes it; dsh run waits for that.
func TestSubagentChildRunsInItsOwnSession(t *testing.T) {
	e := newEnv(t)
	var mu sync.Mutex
	e.srv.SetFallback(func(r llmtest.Request) llmtest.Response {
		mu.Lock()
		defer mu.Unlock()
		body := string(r.Body)
		switch {
		case strings.Contains(body, "CHILD TASK") && !strings.Contains(body, "delegate it"):
			// The child's fresh session knows only its own prompt.
			return llmtest.Response{Text: "child says hi"}
		case strings.Contains(body, "child says hi"):
			return llmtest.Response{Text: "parent done"}
		case r.ToolResultCount() == 0:
			return llmtest.Response{ToolCalls: []llmtest.ToolCall{toolCall("subagent", map[string]any{"description": "greeter", "prompt": "CHILD TASK: say hi"})}}
		default:
			return llmtest.Response{Text: "waiting for the child"}
		}
	})
	out, stderr, code := e.dsh("", "run", "--json", "delegate it")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !strings.Contains(stderr, `subagent "greeter" started`) || !strings.Contains(stderr, `subagent "greeter" completed`) {
		t.Errorf("no child activity on stderr: %s", stderr)
	}
	events, res := parseJSONRun(t, out)
	if res.Text != "parent done" {
		t.Fatalf("result %+v", res)
	}
	c := countTypes(events)
	if c[session.TypeSubagentStart] != 1 || c[session.TypeSubagentEnd] != 1 {
		t.Fatalf("lifecycle events %v", c)
	}
	rs := results(t, events)
	if len(rs) != 1 || rs[0].IsError || !strings.Contains(text(rs[0]), "Started agent") {
		t.Fatalf("subagent result %+v", rs)
	}
	if !strings.Contains(out, "settle-notice") {
		t.Error("no settle notice in the parent's log")
	}
	list, _, _ := e.dsh("", "sessions", "list", "--all", "--json")
	var headers []session.Header
	if err := json.Unmarshal([]byte(list), &headers); err != nil {
		t.Fatal(err)
	}
	var child *session.Header
	for i := range headers {
		if headers[i].ParentSession == res.SessionID {
			child = &headers[i]
		}
	}
	if child == nil || child.Origin != "subagent" || child.DelegationDepth != 1 || child.Cwd != e.cwd {
		t.Fatalf("child header %+v in %s", child, list)
	}
	// The child is titled from the task it was given; the table marks it
	// as the parent's child.
	for _, l := range listSessions(t, e, "--all") {
		if l.ID == child.ID && (l.Title != "CHILD TASK: say hi" || l.Turns != 1 || l.Status != "completed") {
			t.Errorf("child listed as %+v", l)
		}
		if l.ID == res.SessionID && l.Title != "delegate it" {
			t.Errorf("parent listed as %+v", l)
		}
	}
	if table, _, _ := e.dsh("", "sessions", "list", "--all"); !strings.Contains(table, "↳ CHILD TASK: say hi (child of "+res.SessionID[:8]) {
		t.Errorf("table:\n%s", table)
	}
	tree, _, code := e.dsh("", "sessions", "tree", res.SessionID)
	if code != 0 || !strings.Contains(tree, child.ID) || !strings.Contains(tree, "greeter") {
		t.Errorf("sessions tree: %d\n%s", code, tree)
	}
	_, childEvents, _ := exportEvents(t, e, child.ID)
	if countTypes(childEvents)[session.TypeSubagentDescriptor] != 1 || session.Closers(childEvents) != nil {
		t.Errorf("child log %v", countTypes(childEvents))
	}
}

// TestBackgroundSubagentNoticeWakesTheParent: a background subagent runs
// as a job; its answer reaches the parent as a completion notice that
// starts the parent's next turn.
func TestBackgroundSubagentNoticeWakesTheParent(t *testing.T) {
	e := newEnv(t)
	var mu sync.Mutex
	e.srv.SetFallback(func(r llmtest.Request) llmtest.Response {
		mu.Lock()
		defer mu.Unlock()
		body := string(r.Body)
		switch {
		case strings.Contains(body, "BG TASK") && !strings.Contains(body, "delegate in background"):
			return llmtest.Response{Text: "background child answer"}
		case strings.Contains(body, "background child answer"):
			return llmtest.Response{Text: "parent read the notice"}
		case r.ToolResultCount() == 0:
			return llmtest.Response{ToolCalls: []llmtest.ToolCall{toolCall("subagent", map[string]any{"description": "bg", "prompt": "BG TASK", "run_in_background": true})}}
		default:
			return llmtest.Response{Text: "started in background"}
		}
	})
	oneShot := filepath.Join(t.TempDir(), "one-shot.yaml")
	writeFile(t, oneShot, "- id: subagents\n  module: subagents\n  config: {mode: one-shot}\n", 0o600)
	out, stderr, code := e.dsh("", "run", "--json", "--patch", oneShot, "delegate in background")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	events, res := parseJSONRun(t, out)
	// The notice either woke the idle parent (a second turn) or, when the
	// child finished while the parent was still in its turn, was injected
	// into its next step; either way the parent answers it.
	if res.Text != "parent read the notice" {
		t.Fatalf("result %+v events %v", res, countTypes(events))
	}
	rs := results(t, events)
	if len(rs) != 1 || !strings.Contains(text(rs[0]), "job subagent-1") {
		t.Fatalf("background start result %+v", rs)
	}
}

// TestSendMessageColdResumesAChildAfterRestart: a continuable child from
// an earlier dsh process is continued with send_message from a resumed
// parent; the child is cold-resumed from storage with its history.
func TestSendMessageColdResumesAChildAfterRestart(t *testing.T) {
	e := newEnv(t)
	var mu sync.Mutex
	var childID string
	e.srv.SetFallback(func(r llmtest.Request) llmtest.Response {
		mu.Lock()
		defer mu.Unlock()
		body := string(r.Body)
		switch {
		case strings.Contains(body, "CHILD TASK") && !strings.Contains(body, "first run"):
			if strings.Contains(body, "second question") {
				return llmtest.Response{Text: "child answers again"}
			}
			return llmtest.Response{Text: "child first answer"}
		case strings.Contains(body, "child answers again"):
			return llmtest.Response{Text: "parent got the second answer"}
		case strings.Contains(body, "second run") && !strings.Contains(body, "second question"):
			return llmtest.Response{ToolCalls: []llmtest.ToolCall{toolCall("send_message", map[string]any{"agent_id": childID, "message": "second question"})}}
		case strings.Contains(body, "second run"):
			return llmtest.Response{Text: "sent"}
		case strings.Contains(body, "child first answer"):
			return llmtest.Response{Text: "first run done"}
		case r.ToolResultCount() == 0:
			return llmtest.Response{ToolCalls: []llmtest.ToolCall{toolCall("subagent", map[string]any{"description": "helper", "prompt": "CHILD TASK"})}}
		default:
			return llmtest.Response{Text: "waiting"}
		}
	})
	out, stderr, code := e.dsh("", "run", "--json", "first run")
	if code != 0 {
		t.Fatalf("first run: %d %s", code, stderr)
	}
	_, res := parseJSONRun(t, out)
	list, _, _ := e.dsh("", "sessions", "list", "--all", "--json")
	var headers []session.Header
	_ = json.Unmarshal([]byte(list), &headers)
	for _, h := range headers {
		if h.ParentSession == res.SessionID {
			mu.Lock()
			childID = h.ID
			mu.Unlock()
		}
	}
	if childID == "" {
		t.Fatal("no child session")
	}
	out, stderr, code = e.dsh("", "run", "--json", "--resume", res.SessionID, "second run")
	if code != 0 {
		t.Fatalf("second run: %d %s", code, stderr)
	}
	_, res2 := parseJSONRun(t, out)
	if res2.Text != "parent got the second answer" {
		_, ce, _ := exportEvents(t, e, childID)
		t.Fatalf("second run result %+v\n%s\nchild: %v\nparent stream types: %v", res2, stderr, countTypes(ce), countTypes(func() []session.Event { ev, _ := parseJSONRun(t, out); return ev }()))
	}
	_, childEvents, _ := exportEvents(t, e, childID)
	if c := countTypes(childEvents); c[session.TypeTurnStart] != 2 || c[session.TypeEndSeed] != 1 {
		t.Errorf("child was not resumed from storage: %v", c)
	}
}

// TestKill9ThenResumeChildFromStorage: the whole dsh process group is
// killed while a continuable child runs a tool; a resumed parent continues
// the child with send_message, which cold-resumes it from storage
// (repaired: its interrupted call gets TOOL_OUTCOME_UNKNOWN).
func TestKill9ThenResumeChildFromStorage(t *testing.T) {
	e := newEnv(t)
	fifo, lines := proctest.Fifo(t)
	var mu sync.Mutex
	var childID string
	e.srv.SetFallback(func(r llmtest.Request) llmtest.Response {
		mu.Lock()
		defer mu.Unlock()
		body := string(r.Body)
		switch {
		case strings.Contains(body, "CHILD TASK") && !strings.Contains(body, "first run"):
			switch {
			case strings.Contains(body, "second question"):
				return llmtest.Response{Text: "child answers after the crash"}
			case r.ToolResultCount() == 0:
				return llmtest.Response{ToolCalls: []llmtest.ToolCall{bashCall("echo started > " + fifo + "; sleep 60")}}
			default:
				return llmtest.Response{Text: "unexpected"}
			}
		case strings.Contains(body, "child answers after the crash"):
			return llmtest.Response{Text: "parent saw the child recover"}
		case strings.Contains(body, "second run") && !strings.Contains(body, "second question"):
			return llmtest.Response{ToolCalls: []llmtest.ToolCall{toolCall("send_message", map[string]any{"agent_id": childID, "message": "second question"})}}
		case strings.Contains(body, "second run"):
			return llmtest.Response{Text: "sent"}
		case r.ToolResultCount() == 0:
			return llmtest.Response{ToolCalls: []llmtest.ToolCall{toolCall("subagent", map[string]any{"description": "worker", "prompt": "CHILD TASK"})}}
		default:
			return llmtest.Response{Text: "waiting"}
		}
	})
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	c := e.cmd(ctx, "run", "--permission", "full-access", "first run")
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- c.Wait() }()
	select {
	case <-lines:
	case err := <-exited:
		t.Fatalf("dsh exited before the child's tool started: %v", err)
	}
	if err := syscall.Kill(-c.Process.Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-exited
	list, _, _ := e.dsh("", "sessions", "list", "--all", "--json")
	var headers []session.Header
	_ = json.Unmarshal([]byte(list), &headers)
	var parentID string
	for _, h := range headers {
		if h.ParentSession != "" {
			mu.Lock()
			childID, parentID = h.ID, h.ParentSession
			mu.Unlock()
		}
	}
	if childID == "" {
		t.Fatalf("no child session in %s", list)
	}
	out, stderr, code := e.dsh("", "run", "--json", "--resume", parentID, "second run")
	if code != 0 {
		t.Fatalf("second run: %d %s", code, stderr)
	}
	if _, res := parseJSONRun(t, out); res.Text != "parent saw the child recover" {
		t.Fatalf("second run result %+v\n%s", res, stderr)
	}
	_, childEvents, _ := exportEvents(t, e, childID)
	if session.Closers(childEvents) != nil {
		t.Fatal("child log not balanced")
	}
	found := false
	for _, r := range results(t, childEvents) {
		found = found || (r.Error != nil && r.Error.Code == session.CodeToolOutcomeUnknown)
	}
	if !found {
		t.Errorf("the child's interrupted call was not repaired: %v", countTypes(childEvents))
	}
}

// TestACPAgentAsSubagent: an ACP agent configured as a profile row is a
// delegation tool; it runs in the delegating session's cwd, in its own
// process group, and its streamed answer is the tool result.
func TestACPAgentAsSubagent(t *testing.T) {
	e := newEnv(t)
	cwdFile := filepath.Join(t.TempDir(), "cwd")
	writeFile(t, filepath.Join(e.home, "config.yaml"), fmt.Sprintf(`
profile:
  - id: acp.fake
    module: acp-agent
    config:
      name: fake
      command: [%q, "-cwd-file", %q]
`, fakeACPBin, cwdFile), 0o600)
	e.srv.Enqueue(
		llmtest.Response{ToolCalls: []llmtest.ToolCall{toolCall("subagent_fake", map[string]any{"description": "ask acp", "prompt": "ECHO hello"})}},
		llmtest.Response{Text: "done"},
	)
	out, stderr, code := e.dsh("", "run", "--json", "use the acp agent")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	events, res := parseJSONRun(t, out)
	rs := results(t, events)
	if res.Text != "done" || len(rs) != 1 || rs[0].IsError || !strings.Contains(text(rs[0]), "echo: ECHO hello") {
		t.Fatalf("result %+v / %+v", res, rs)
	}
	if got, _ := os.ReadFile(cwdFile); string(got) != e.cwd {
		t.Errorf("agent cwd %q, want %q", got, e.cwd)
	}
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	writeFile(t, bad, "- id: acp.bad\n  module: acp-agent\n  config: {name: Bad Name, command: [x]}\n", 0o600)
	if _, stderr, code := e.dsh("", "config", "dump", "--patch", bad); code != 2 || !strings.Contains(stderr, `"acp.bad"`) {
		t.Errorf("bad acp row: %d %s", code, stderr)
	}
}
