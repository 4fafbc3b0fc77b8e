package cli_test

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dsh-dev/dsh/internal/llm/llmtest"
	"github.com/dsh-dev/dsh/internal/peers"
)

// hooksDoc is one hooks configuration for both agents: every hook records
// its stdin (one JSON line) in $HOOKREC/events.jsonl; PreToolUse blocks
// one command with exit 2 and another with a JSON deny; Stop blocks once
// (forcing one more step), then lets the turn end.
const hooksDoc = `{"hooks":{
 "SessionStart":[{"hooks":[{"type":"command","command":"{ cat; echo; } >> \"$HOOKREC/events.jsonl\""}]}],
 "UserPromptSubmit":[{"hooks":[{"type":"command","command":"{ cat; echo; } >> \"$HOOKREC/events.jsonl\""}]}],
 "PreToolUse":[{"matcher":"Bash","hooks":[{"type":"command","command":"in=$(cat); printf '%s\\n' \"$in\" >> \"$HOOKREC/events.jsonl\"; case \"$in\" in *blocked-by-exit2*) echo 'denied by exit 2' >&2; exit 2;; *blocked-by-json*) echo '{\"hookSpecificOutput\":{\"hookEventName\":\"PreToolUse\",\"permissionDecision\":\"deny\",\"permissionDecisionReason\":\"denied by json\"}}';; esac"}]}],
 "PostToolUse":[{"matcher":"Bash","hooks":[{"type":"command","command":"{ cat; echo; } >> \"$HOOKREC/events.jsonl\""}]}],
 "Stop":[{"hooks":[{"type":"command","command":"{ cat; echo; } >> \"$HOOKREC/events.jsonl\"; if [ ! -e \"$HOOKREC/stopped-once\" ]; then touch \"$HOOKREC/stopped-once\"; echo 'one more step please' >&2; exit 2; fi"}]}],
 "SessionEnd":[{"hooks":[{"type":"command","command":"{ cat; echo; } >> \"$HOOKREC/events.jsonl\""}]}]
}}`

// recorded reads the hook payloads a run left.
func recorded(t *testing.T, dir string) []map[string]any {
	t.Helper()
	f, err := os.Open(filepath.Join(dir, "events.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []map[string]any
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("hook stdin is not JSON: %v: %s", err, line)
		}
		out = append(out, m)
	}
	return out
}

// recordedFiles reads one payload per file, in the order of their names.
func recordedFiles(t *testing.T, dir string) []map[string]any {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(names)
	var out []map[string]any
	for _, n := range names {
		b, err := os.ReadFile(n)
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatalf("hook stdin is not JSON: %v: %s", err, b)
		}
		out = append(out, m)
	}
	return out
}

func keys(m map[string]any) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// script is the same scripted session for both agents; tool is the
// agent's name of its shell tool.
func script(tool string) []llmtest.Response {
	call := func(cmd string) llmtest.Response {
		b, _ := json.Marshal(map[string]string{"command": cmd, "description": "test"})
		return llmtest.Response{ToolCalls: []llmtest.ToolCall{{Name: tool, Arguments: string(b)}}}
	}
	return []llmtest.Response{
		call("echo allowed-one"),
		call("echo blocked-by-exit2"),
		call("echo blocked-by-json"),
		{Text: "first stop"},
		{Text: "final answer"},
	}
}

// TestHooksMatchClaudeCode runs the same scripted session through dsh and
// through the real Claude Code (both against the fake model server), with
// the same hooks: the same events fire in the same order with the same
// payload keys, exit 2 and a JSON deny block the call in both, and the
// Stop hook forces one more step in both.
func TestHooksMatchClaudeCode(t *testing.T) {
	bin, err := peers.Find("claude")
	if err != nil {
		t.Skip(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()

	// Claude Code.
	csrv := llmtest.New()
	defer csrv.Close()
	csrv.Enqueue(script("Bash")...)
	chome, crec, ccwd := t.TempDir(), t.TempDir(), t.TempDir()
	cfgDir := filepath.Join(chome, ".claude")
	if err := os.MkdirAll(cfgDir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(cfgDir, "settings.json"), []byte(hooksDoc), 0o600); err != nil {
		t.Fatal(err)
	}
	cc := exec.CommandContext(ctx, bin, "-p", "run the checks", "--output-format", "stream-json", "--verbose",
		"--model", "claude-fake-model", "--allowedTools", "Bash")
	cc.Dir = ccwd
	cc.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + chome, "CLAUDE_CONFIG_DIR=" + cfgDir,
		"ANTHROPIC_BASE_URL=" + csrv.URL(), "ANTHROPIC_API_KEY=dummy", "DISABLE_AUTOUPDATER=1",
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "HOOKREC=" + crec}
	cout, err := cc.CombinedOutput()
	if err != nil {
		t.Fatalf("claude: %v\n%s", err, cout)
	}

	// dsh.
	e := newEnv(t)
	e.srv.Enqueue(script("bash")...)
	drec := t.TempDir()
	if err := os.WriteFile(filepath.Join(e.home, "hooks.json"), []byte(hooksDoc), 0o600); err != nil {
		t.Fatal(err)
	}
	dc := e.cmd(ctx, "run", "--approval", "never", "run the checks")
	dc.Env = append(dc.Env, "HOOKREC="+drec)
	dout, err := dc.CombinedOutput()
	if err != nil {
		t.Fatalf("dsh run: %v\n%s", err, dout)
	}
	if !strings.Contains(string(dout), "final answer") {
		t.Errorf("dsh did not take the forced step:\n%s", dout)
	}

	claude, dsh := recorded(t, crec), recorded(t, drec)
	seq := func(evs []map[string]any) []string {
		var out []string
		for _, m := range evs {
			s, _ := m["hook_event_name"].(string)
			if in, ok := m["tool_input"].(map[string]any); ok {
				s += ":" + strings.TrimPrefix(in["command"].(string), "echo ")
			}
			out = append(out, s)
		}
		return out
	}
	if os.Getenv("DSH_TEST_DUMP_HOOKS") != "" {
		for _, m := range claude {
			b, _ := json.Marshal(m)
			t.Logf("claude payload: %s", b)
		}
	}
	t.Logf("claude: %q", seq(claude))
	t.Logf("dsh:    %q", seq(dsh))
	want := []string{"SessionStart", "UserPromptSubmit", "PreToolUse:allowed-one", "PostToolUse:allowed-one",
		"PreToolUse:blocked-by-exit2", "PreToolUse:blocked-by-json", "Stop", "Stop", "SessionEnd"}
	if !slices.Equal(seq(claude), want) {
		t.Errorf("claude's events %q, want %q", seq(claude), want)
	}
	if !slices.Equal(seq(dsh), seq(claude)) {
		t.Fatalf("dsh's events %q, claude's %q", seq(dsh), seq(claude))
	}
	for i := range claude {
		ck, dk := keys(claude[i]), keys(dsh[i])
		if !slices.Equal(ck, dk) {
			t.Errorf("%s: payload keys differ:\n claude %q\n dsh    %q", seq(claude)[i], ck, dk)
		}
	}
	// Stop: the forced step is visible to the second Stop hook.
	if dsh[6]["stop_hook_active"] != false || dsh[7]["stop_hook_active"] != true ||
		claude[6]["stop_hook_active"] != false || claude[7]["stop_hook_active"] != true {
		t.Errorf("stop_hook_active: claude %v %v, dsh %v %v", claude[6]["stop_hook_active"], claude[7]["stop_hook_active"], dsh[6]["stop_hook_active"], dsh[7]["stop_hook_active"])
	}
	// Both models saw the blocked calls' reasons and made five requests.
	for name, srv := range map[string]*llmtest.Server{"claude": csrv, "dsh": e.srv} {
		reqs := srv.Requests()
		var n int
		body := ""
		for _, r := range reqs {
			if r.Format == llmtest.FormatAnthropic || name == "dsh" {
				n++
				body = string(r.Body)
			}
		}
		if n != 5 {
			t.Errorf("%s: %d model requests, want 5", name, n)
		}
		for _, s := range []string{"denied by exit 2", "denied by json", "one more step please"} {
			if !strings.Contains(body, s) {
				t.Errorf("%s: the last request lacks %q", name, s)
			}
		}
		if strings.Contains(body, "blocked-by-exit2\\n") {
			t.Errorf("%s: a blocked command ran", name)
		}
	}
}

// TestHooksEveryEvent drives dsh through every event it fires: a failing
// tool call (PostToolUseFailure), a bash call a rule sends to approval that
// a PermissionRequest hook allows, a delegation (SubagentStart/Stop), the
// end of the turn (Notification), then a manual compaction of the stored
// session (SessionStart "resume", PreCompact/PostCompact). Every run is
// logged as hook/invoked and hook/result.
func TestHooksEveryEvent(t *testing.T) {
	e := newEnv(t)
	rec := t.TempDir()
	// One file per run (observation hooks run beside the others, so a
	// shared file could interleave), named by the time of the run.
	record := `cat > \"$HOOKREC/$(date +%s%N).$$.json\"`
	var groups []string
	for _, ev := range []string{"SessionStart", "UserPromptSubmit", "PreToolUse", "PostToolUse", "PostToolUseFailure", "PreCompact",
		"PostCompact", "Stop", "SubagentStart", "SubagentStop", "SessionEnd", "Notification"} {
		groups = append(groups, `"`+ev+`":[{"hooks":[{"type":"command","command":"`+record+`"}]}]`)
	}
	allow := `{\"hookSpecificOutput\":{\"hookEventName\":\"PermissionRequest\",\"decision\":{\"behavior\":\"allow\"}}}`
	groups = append(groups, `"PermissionRequest":[{"matcher":"Bash","hooks":[{"type":"command","command":"`+record+`; echo '`+allow+`'"}]}]`)
	if err := os.WriteFile(filepath.Join(e.home, "hooks.json"), []byte(`{"hooks":{`+strings.Join(groups, ",")+`}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := "profile:\n  - id: permissions\n    module: permissions\n    config:\n      rules:\n        - {tool: bash, action: ask, reason: check it}\n"
	if err := os.WriteFile(filepath.Join(e.home, "config.yaml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	e.srv.SetFallback(func(r llmtest.Request) llmtest.Response {
		mu.Lock()
		defer mu.Unlock()
		body := string(r.Body)
		switch n := r.ToolResultCount(); {
		case strings.Contains(body, "is about to be replaced by a summary"):
			return llmtest.Response{Text: "SUMMARY of the session"}
		case strings.Contains(body, "CHILD TASK") && !strings.Contains(body, "exercise the hooks"):
			return llmtest.Response{Text: "child says hi"}
		case n == 0:
			return llmtest.Response{ToolCalls: []llmtest.ToolCall{toolCall("read", map[string]any{"path": filepath.Join(e.cwd, "missing.txt")})}}
		case n == 1:
			return llmtest.Response{ToolCalls: []llmtest.ToolCall{bashCall("echo approved-by-hook")}}
		case n == 2:
			return llmtest.Response{ToolCalls: []llmtest.ToolCall{toolCall("subagent", map[string]any{"description": "greeter", "prompt": "CHILD TASK: say hi"})}}
		default:
			return llmtest.Response{Text: "all done"}
		}
	})
	c := e.cmd(t.Context(), "run", "--json", "exercise the hooks")
	c.Env = append(c.Env, "HOOKREC="+rec)
	var o, se strings.Builder
	c.Stdout, c.Stderr = &o, &se
	if err := c.Run(); err != nil {
		t.Fatalf("dsh run: %v\n%s", err, se.String())
	}
	events, res := parseJSONRun(t, o.String())
	// dsh compact resumes the stored session: SessionStart "resume" and the
	// compaction hooks.
	cc := e.cmd(t.Context(), "compact", res.SessionID)
	cc.Env = append(cc.Env, "HOOKREC="+rec)
	if out, err := cc.CombinedOutput(); err != nil {
		t.Fatalf("dsh compact: %v\n%s", err, out)
	}
	got := recordedFiles(t, rec)
	var names []string
	byName := map[string][]map[string]any{}
	for _, m := range got {
		n := m["hook_event_name"].(string)
		names = append(names, n)
		byName[n] = append(byName[n], m)
	}
	t.Logf("events: %q", names)
	for _, want := range []string{"SessionStart", "UserPromptSubmit", "PreToolUse", "PostToolUse", "PostToolUseFailure", "PermissionRequest",
		"SubagentStart", "SubagentStop", "Stop", "Notification", "SessionEnd", "PreCompact", "PostCompact"} {
		if len(byName[want]) == 0 {
			t.Errorf("%s did not fire", want)
		}
	}
	if f := byName["PostToolUseFailure"]; len(f) == 0 || f[0]["tool_name"] != "read" || f[0]["error"] == "" {
		t.Errorf("PostToolUseFailure %v", f)
	}
	if p := byName["PermissionRequest"]; len(p) != 1 || p[0]["tool_name"] != "bash" {
		t.Errorf("PermissionRequest %v", p)
	}
	if !strings.Contains(o.String(), "approved-by-hook\\n") {
		t.Error("the call the PermissionRequest hook allowed did not run")
	}
	if s := byName["SessionStart"]; len(s) != 2 || s[0]["source"] != "startup" || s[1]["source"] != "resume" {
		t.Errorf("SessionStart %v", s)
	}
	if p := byName["PreCompact"]; len(p) != 1 || p[0]["trigger"] != "manual" {
		t.Errorf("PreCompact %v", p)
	}
	if n := byName["Notification"]; len(n) == 0 || n[0]["notification_type"] != "turn_finished" {
		t.Errorf("Notification %v", n)
	}
	// The child's own tool calls would meet the hooks, but it has no
	// session lifecycle of its own: one UserPromptSubmit, the parent's.
	if len(byName["UserPromptSubmit"]) != 1 {
		t.Errorf("UserPromptSubmit fired %d times", len(byName["UserPromptSubmit"]))
	}
	// Every run is in the log.
	_, stored, _ := exportEvents(t, e, res.SessionID)
	inv, done := 0, 0
	for _, ev := range stored {
		switch ev.Type {
		case "hook/invoked":
			inv++
		case "hook/result":
			done++
			var r struct {
				Event      string `json:"event"`
				Command    string `json:"command"`
				ExitCode   *int   `json:"exitCode"`
				DurationMs *int64 `json:"durationMs"`
			}
			if err := json.Unmarshal(ev.Data, &r); err != nil || r.Event == "" || r.Command == "" || r.ExitCode == nil || r.DurationMs == nil {
				t.Errorf("hook/result %s", ev.Data)
			}
		}
	}
	if inv == 0 || inv != done || inv < len(got)-2 {
		t.Errorf("hook/invoked %d, hook/result %d, hook runs %d", inv, done, len(got))
	}
	_ = events
}

// TestHooksCommands: a project hooks file is ignored (and said so) until
// "dsh hooks trust"; "dsh hooks list" names its source; "dsh hooks test"
// runs the matching hooks on a sample payload and prints the decision.
func TestHooksCommands(t *testing.T) {
	e := newEnv(t)
	if err := os.MkdirAll(filepath.Join(e.cwd, ".dsh"), 0o700); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(e.cwd, ".dsh", "hooks.json")
	doc := `{"hooks":{"PreToolUse":[{"matcher":"Bash","hooks":[{"type":"command","command":"echo no pushing >&2; exit 2"}]}]}}`
	if err := os.WriteFile(file, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := e.dsh("", "hooks", "list")
	if code != 0 || !strings.Contains(out, "no hooks") || !strings.Contains(errOut, "ignored until trusted") {
		t.Fatalf("untrusted list: %d %q %q", code, out, errOut)
	}
	if out, errOut, code = e.dsh("", "hooks", "trust"); code != 0 || !strings.Contains(out, "trusted "+file) {
		t.Fatalf("trust: %d %q %q", code, out, errOut)
	}
	out, _, _ = e.dsh("", "hooks", "list", "--json")
	var rows []map[string]any
	if err := json.Unmarshal([]byte(out), &rows); err != nil || len(rows) != 1 || rows[0]["source"] != file || rows[0]["event"] != "PreToolUse" {
		t.Fatalf("list: %v %s", err, out)
	}
	out, errOut, code = e.dsh("", "hooks", "test", "PreToolUse", "--tool", "bash", "--input", `{"command":"git push"}`)
	if code != 0 || !strings.Contains(out, "1 hook(s) ran; decision: deny (no pushing)") {
		t.Fatalf("test: %d %q %q", code, out, errOut)
	}
	if _, errOut, code = e.dsh("", "hooks", "test", "Nope"); code != 2 || !strings.Contains(errOut, "unknown hook event") {
		t.Errorf("unknown event: %d %s", code, errOut)
	}
	if _, errOut, code = e.dsh("", "hooks", "test", "PreToolUse", "--input", "{bad"); code != 2 || !strings.Contains(errOut, "not valid JSON") {
		t.Errorf("bad input: %d %s", code, errOut)
	}
}

// TestHookDecisionsInDsh: a UserPromptSubmit exit 2 blocks the turn before
// any model call; SessionStart and UserPromptSubmit output reach the model
// as context; a PostToolUse block replaces the result with its reason.
func TestHookDecisionsInDsh(t *testing.T) {
	e := newEnv(t)
	doc := `{"hooks":{
 "SessionStart":[{"hooks":[{"type":"command","command":"echo SESSION-CONTEXT-1"}]}],
 "UserPromptSubmit":[{"hooks":[{"type":"command","command":"in=$(cat); case \"$in\" in *forbidden*) echo 'prompt refused' >&2; exit 2;; esac; echo '{\"hookSpecificOutput\":{\"hookEventName\":\"UserPromptSubmit\",\"additionalContext\":\"PROMPT-CONTEXT-2\"}}'"}]}],
 "PostToolUse":[{"matcher":"Bash","hooks":[{"type":"command","command":"echo '{\"decision\":\"block\",\"reason\":\"POST-BLOCKED-3\"}'"}]}]}}`
	if err := os.WriteFile(filepath.Join(e.home, "hooks.json"), []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	out, errOut, _ := e.dsh("", "run", "--json", "a forbidden thing")
	events, res := parseJSONRun(t, out)
	blocked := false
	for _, ev := range events {
		if ev.Type == "turn/end" && strings.Contains(string(ev.Data), `"kind":"blocked"`) {
			blocked = true
		}
	}
	if !blocked || len(e.srv.Requests()) != 0 {
		t.Fatalf("blocked prompt: %+v, %d model requests\n%s", res, len(e.srv.Requests()), errOut)
	}
	e.srv.Enqueue(llmtest.Response{ToolCalls: []llmtest.ToolCall{bashCall("echo tool-ran")}}, llmtest.Response{Text: "ok"})
	_, errOut, code := e.dsh("", "run", "--json", "--approval", "never", "a fine thing")
	if code != 0 {
		t.Fatalf("run: %d %s", code, errOut)
	}
	reqs := e.srv.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d model requests", len(reqs))
	}
	first, last := string(reqs[0].Body), string(reqs[1].Body)
	for _, s := range []string{"SESSION-CONTEXT-1", "PROMPT-CONTEXT-2"} {
		if !strings.Contains(first, s) {
			t.Errorf("the first request lacks %s", s)
		}
	}
	if !strings.Contains(last, "POST-BLOCKED-3") {
		t.Error("the PostToolUse block did not reach the model")
	}
	// continue:false from a PreToolUse hook ends the turn (aborted by
	// "hook") without running the call.
	stopDoc := `{"hooks":{"PreToolUse":[{"hooks":[{"type":"command","command":"echo '{\"continue\":false,\"stopReason\":\"halt now\"}'"}]}]}}`
	if err := os.WriteFile(filepath.Join(e.home, "hooks.json"), []byte(stopDoc), 0o600); err != nil {
		t.Fatal(err)
	}
	e.srv.Enqueue(llmtest.Response{ToolCalls: []llmtest.ToolCall{bashCall("echo must-not-run")}}, llmtest.Response{Text: "unreachable"})
	out, _, _ = e.dsh("", "run", "--json", "--approval", "never", "try it")
	events, _ = parseJSONRun(t, out)
	aborted := false
	for _, ev := range events {
		if ev.Type == "turn/end" && strings.Contains(string(ev.Data), `"cause":"hook"`) {
			aborted = true
		}
	}
	if !aborted || strings.Contains(out, "must-not-run\\n") || len(e.srv.Requests()) != 3 {
		t.Errorf("continue:false: aborted %v, %d model requests\n%s", aborted, len(e.srv.Requests()), out)
	}
}
