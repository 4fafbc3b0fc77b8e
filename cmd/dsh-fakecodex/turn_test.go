package main

import (
	"encoding/json"

	"github.com/dsh-dev/dsh/internal/jsonrpc"
	"slices"
	"strings"
	"syscall"
	"testing"
)

func TestApprovalRoundTrip(t *testing.T) {
	script := map[string]any{"turns": []any{map[string]any{
		"items": []any{
			map[string]any{"type": "approval", "kind": "command", "command": "/bin/bash -lc 'echo hi'", "output": "hi\n"},
			map[string]any{"type": "approval", "kind": "fileChange", "path": "/p/x.txt", "diff": "x\n", "reason": "write x"},
		},
		"answer": "Done.",
	}}}
	e := newEnv(t, script)
	f := start(t, e)
	f.initialize()
	threadID := f.startThread(map[string]any{"cwd": "/p", "approvalPolicy": "untrusted"})
	f.setDecide(func(method string, _ json.RawMessage) any {
		if method == "item/commandExecution/requestApproval" {
			return map[string]any{"decision": "accept"}
		}
		return map[string]any{"decision": "decline"}
	})
	from := len(f.lines())
	turnID := f.startTurn(threadID, "go")
	end, turn := f.turnCompleted(turnID)
	if turn["status"] != "completed" {
		t.Fatalf("turn %v", turn)
	}
	lines := f.lines()[:end+1]
	want := []string{
		"warning", "response", "thread/status/changed", "turn/started", "item/started", "item/completed",
		"item/started", "thread/status/changed", "item/commandExecution/requestApproval", "serverRequest/resolved",
		"thread/status/changed", "item/commandExecution/outputDelta", "item/completed",
		"item/started", "thread/status/changed", "item/fileChange/requestApproval", "serverRequest/resolved",
		"thread/status/changed", "item/completed",
		"item/started", "item/agentMessage/delta", "item/agentMessage/delta", "item/completed",
		"thread/tokenUsage/updated", "account/rateLimits/updated", "thread/status/changed", "turn/completed",
	}
	if got := methods(lines, from); !slices.Equal(got, want) {
		t.Fatalf("frames\n got %v\nwant %v", got, want)
	}
	req0, req1 := lines[from+8], lines[from+15]
	if string(req0.ID) != "0" || string(req1.ID) != "1" {
		t.Fatalf("server request ids %s %s, want 0 1", req0.ID, req1.ID)
	}
	p := req0.param()
	if p["kind"] != "command" || p["threadId"] != threadID || p["turnId"] != turnID || p["command"] != "/bin/bash -lc 'echo hi'" || p["cwd"] != "/p" {
		t.Fatalf("command approval params %v", p)
	}
	if p := req1.param(); p["reason"] != "write x" || p["itemId"] == nil {
		t.Fatalf("fileChange approval params %v", p)
	}
	if flags := lines[from+7].param()["status"].(map[string]any)["activeFlags"].([]any); len(flags) != 1 || flags[0] != "waitingOnApproval" {
		t.Fatalf("waiting status %v", flags)
	}
	if r := lines[from+9].param(); r["requestId"].(float64) != 0 || r["threadId"] != threadID {
		t.Fatalf("resolved %v", r)
	}
	cmd := lines[from+12].param()["item"].(map[string]any)
	if cmd["status"] != "completed" || cmd["aggregatedOutput"] != "hi\n" || cmd["exitCode"].(float64) != 0 {
		t.Fatalf("accepted command %v", cmd)
	}
	fc := lines[from+18].param()["item"].(map[string]any)
	ch := fc["changes"].([]any)[0].(map[string]any)
	if fc["status"] != "declined" || ch["path"] != "/p/x.txt" || ch["kind"].(map[string]any)["type"] != "add" {
		t.Fatalf("declined file change %v", fc)
	}
	f.closeAndWait()

	// The client's answers are in the log, as sent.
	var answers []string
	for _, l := range e.logLines(t) {
		if _, ok := l["result"]; ok {
			b, _ := json.Marshal(l)
			answers = append(answers, string(b))
		}
	}
	if !slices.Equal(answers, []string{`{"id":0,"result":{"decision":"accept"}}`, `{"id":1,"result":{"decision":"decline"}}`}) {
		t.Fatalf("logged answers %v", answers)
	}
}

func TestApprovalCancelInterrupts(t *testing.T) {
	e := newEnv(t, map[string]any{"turns": []any{map[string]any{
		"items": []any{map[string]any{"type": "approval", "kind": "command", "command": "rm -rf x"}},
	}}})
	f := start(t, e)
	f.initialize()
	threadID := f.startThread(map[string]any{})
	f.setDecide(func(string, json.RawMessage) any { return map[string]any{"decision": "cancel"} })
	end, turn := f.turnCompleted(f.startTurn(threadID, "go"))
	if turn["status"] != "interrupted" || len(turn["items"].([]any)) != 0 {
		t.Fatalf("turn %v", turn)
	}
	if item := f.lines()[end-2].param()["item"].(map[string]any); f.lines()[end-2].Method != "item/completed" || item["status"] != "declined" {
		t.Fatalf("cancelled command %s", f.lines()[end-2].raw)
	}
}

func TestInterrupt(t *testing.T) {
	e := newEnv(t, map[string]any{"turns": []any{
		map[string]any{"wait_for_interrupt": true},
		map[string]any{"items": []any{map[string]any{"type": "approval", "kind": "fileChange", "path": "/x"}}},
	}})
	f := start(t, e)
	f.initialize()
	threadID := f.startThread(map[string]any{})

	// A held turn ends on interrupt.
	turnID := f.startTurn(threadID, "long")
	f.waitFor(0, "userMessage item/completed", isMethod("item/completed"))
	from := len(f.lines())
	if je := f.callErr("turn/start", map[string]any{"threadId": threadID, "input": textInput("x")}); !strings.Contains(je.Message, "turn in progress") {
		t.Fatalf("second turn/start: %+v", je)
	}
	f.mustCall("turn/interrupt", map[string]any{"threadId": threadID, "turnId": turnID})
	end, turn := f.turnCompleted(turnID)
	if turn["status"] != "interrupted" || turn["itemsView"] != "notLoaded" || len(turn["items"].([]any)) != 0 {
		t.Fatalf("interrupted turn %v", turn)
	}
	if got := methods(f.lines()[:end+1], from); !slices.Equal(got, []string{"response", "response", "thread/status/changed", "turn/completed"}) {
		t.Fatalf("frames %v", got)
	}

	// An interrupt while an approval is pending resolves the request.
	block := make(chan struct{})
	defer close(block)
	f.setDecide(func(string, json.RawMessage) any { <-block; return map[string]any{"decision": "accept"} })
	turnID = f.startTurn(threadID, "edit")
	i := f.waitFor(0, "approval request", isMethod("item/fileChange/requestApproval"))
	f.mustCall("turn/interrupt", map[string]any{"threadId": threadID, "turnId": turnID})
	end, turn = f.turnCompleted(turnID)
	if turn["status"] != "interrupted" {
		t.Fatalf("turn %v", turn)
	}
	got := methods(f.lines()[:end+1], i+1)
	if !slices.Equal(got, []string{"response", "serverRequest/resolved", "thread/status/changed", "turn/completed"}) {
		t.Fatalf("frames after the request %v", got)
	}
	// Interrupting a finished turn is harmless.
	f.mustCall("turn/interrupt", map[string]any{"threadId": threadID, "turnId": turnID})
}

func TestIgnoreInterruptAndHangExitOnEOF(t *testing.T) {
	for _, tc := range []struct {
		name   string
		script map[string]any
	}{
		{"ignore_interrupt", map[string]any{"ignore_interrupt": true, "turns": []any{map[string]any{"wait_for_interrupt": true}}}},
		{"hang_at_turn", map[string]any{"hang_at": "turn"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, tc.script)
			f := start(t, e)
			f.initialize()
			threadID := f.startThread(map[string]any{})
			turnID := f.startTurn(threadID, "x") // answered in both cases
			f.waitFor(0, "userMessage item/completed", isMethod("item/completed"))
			f.writeRaw(`{"method":"turn/interrupt","id":"raw-1","params":{"threadId":"` + threadID + `","turnId":"` + turnID + `"}}`)
			isAnswer := func(m wmsg) bool { return string(m.ID) == `"raw-1"` }
			if tc.name == "ignore_interrupt" {
				f.waitFor(0, "interrupt answer", isAnswer)
			}
			if code := f.closeAndWait(); code != 0 {
				t.Fatalf("exit %d", code)
			}
			for _, l := range f.lines() {
				if l.Method == "turn/completed" || (tc.name == "hang_at_turn" && isAnswer(l)) {
					t.Fatalf("unexpected after the interrupt: %s", l.raw)
				}
			}
			logs := e.logLines(t)
			if logs[len(logs)-2]["method"] != "turn/interrupt" {
				t.Fatalf("interrupt not logged: %v", logs[len(logs)-2])
			}
		})
	}

}

// runRaw feeds the fake a fixed stdin (so EOF follows the last line) and
// returns what it wrote and its exit status.
func runRaw(t *testing.T, e *env, lines ...string) ([]wmsg, string, int) {
	t.Helper()
	rec, stderr := newRecorder(), &syncBuffer{}
	code := run([]string{"app-server"}, strings.NewReader(strings.Join(lines, "\n")+"\n"), rec, stderr, e.getenv)
	out, _ := rec.snapshot()
	return out, stderr.String(), code
}

const (
	rawInit  = `{"method":"initialize","id":0,"params":{"clientInfo":{"name":"raw","version":"1"}}}`
	rawStart = `{"method":"thread/start","id":1,"params":{}}`
)

func TestHangAtPointsExitOnEOF(t *testing.T) {
	for _, point := range []string{"initialize", "thread/start", "turn/start"} {
		e := newEnv(t, map[string]any{"hang_at": point})
		out, _, code := runRaw(t, e, rawInit, `{"method":"initialized"}`, rawStart,
			`{"method":"turn/start","id":2,"params":{"threadId":"unused","input":[]}}`)
		if code != 0 {
			t.Fatalf("%s: exit %d", point, code)
		}
		for _, m := range out {
			if m.isResponse() && ((point == "initialize") || (point == "thread/start" && string(m.ID) != "0")) {
				t.Errorf("hang_at %s answered: %s", point, m.raw)
			}
		}
		logs := e.logLines(t)
		if last := logs[len(logs)-1]; last["reason"] != "hang" {
			t.Errorf("%s: last log line %v", point, last)
		}
	}
}

func TestExitAt(t *testing.T) {
	// A real process: the exit status and stderr of the script.
	e := newEnv(t, map[string]any{"exit_at": "initialize", "exit_code": 3, "stderr": "boom"})
	f := startProc(t, e)
	if _, err := f.call("initialize", map[string]any{"clientInfo": map[string]any{"name": "x", "version": "1"}}); err == nil {
		t.Fatal("initialize answered")
	}
	if code := f.waitExit(); code != 3 || f.stderr.String() != "boom\n" {
		t.Fatalf("exit %d stderr %q", code, f.stderr.String())
	}

	// Mid-turn: after turn/started and the user message, default status 1.
	e = newEnv(t, map[string]any{"exit_at": "turn", "stderr": "crash"})
	f = start(t, e)
	f.initialize()
	threadID := f.startThread(map[string]any{})
	f.startTurn(threadID, "x")
	if code := f.waitExit(); code != 1 || f.stderr.String() != "crash\n" {
		t.Fatalf("exit %d stderr %q", code, f.stderr.String())
	}
	got := methods(f.lines(), 0)
	if !slices.Contains(got, "turn/started") || slices.Contains(got, "turn/completed") {
		t.Fatalf("frames %v", got)
	}
	if logs := e.logLines(t); logs[len(logs)-1]["reason"] != "exit_at" {
		t.Fatalf("last log line %v", logs[len(logs)-1])
	}
}

func TestErrorTurn(t *testing.T) {
	e := newEnv(t, map[string]any{"turns": []any{map[string]any{
		"error": map[string]any{"message": "high demand", "codexErrorInfo": "internalServerError"},
	}}})
	f := start(t, e)
	f.initialize()
	threadID := f.startThread(map[string]any{})
	from := len(f.lines())
	turnID := f.startTurn(threadID, "x")
	end, turn := f.turnCompleted(turnID)
	want := []string{"warning", "response", "thread/status/changed", "turn/started", "item/started", "item/completed", "thread/status/changed", "error", "turn/completed"}
	if got := methods(f.lines()[:end+1], from); !slices.Equal(got, want) {
		t.Fatalf("frames\n got %v\nwant %v", got, want)
	}
	lines := f.lines()
	if st := lines[end-2].param()["status"].(map[string]any)["type"]; st != "systemError" {
		t.Fatalf("status %v", st)
	}
	ep := lines[end-1].param()
	if ep["willRetry"] != false || ep["turnId"] != turnID || ep["error"].(map[string]any)["codexErrorInfo"] != "internalServerError" {
		t.Fatalf("error notification %v", ep)
	}
	te := turn["error"].(map[string]any)
	if turn["status"] != "failed" || te["message"] != "high demand" || te["codexErrorInfo"] != "internalServerError" {
		t.Fatalf("failed turn %v", turn)
	}
}

func TestNotifyBeforeResponse(t *testing.T) {
	e := newEnv(t, map[string]any{"notify_before_response": true, "turns": []any{map[string]any{
		"items": []any{map[string]any{"type": "agentMessage", "text": "looking", "phase": "commentary"}},
	}}})
	f := start(t, e)
	f.initialize()
	threadID := f.startThread(map[string]any{})
	from := len(f.lines())
	turnID := f.startTurn(threadID, "x")
	end, _ := f.turnCompleted(turnID)
	got := methods(f.lines()[:end+1], from)
	resp := slices.Index(got, "response")
	if resp < 0 || resp < slices.Index(got, "turn/started") || resp < slices.Index(got, "item/completed") || got[resp+1] != "thread/status/changed" || len(got) != resp+3 {
		t.Fatalf("frames %v", got)
	}
}

func TestItemsUsageAndRateLimits(t *testing.T) {
	snap := map[string]any{"total": usage(10, 8, 2)}
	e := newEnv(t, map[string]any{"turns": []any{map[string]any{
		"items": []any{
			map[string]any{"type": "commandExecution", "command": "false", "exitCode": 1, "output": "no\n"},
			map[string]any{"type": "fileChange", "path": "/a", "kind": "update", "diff": "-a\n+b\n"},
			map[string]any{"type": "imageView", "path": "/shot.png"},
			map[string]any{"type": "mcpToolCall", "server": "s", "tool": "screenshot", "text": "cap", "image_base64": "aGk=", "mime": "image/jpeg"},
		},
		"answer": `{"answer":"x"}`, "answer_phase": nil,
		"usage":       []any{snap, snap, map[string]any{"turn_id": "other", "last": usage(1, 1, 0)}, map[string]any{"total": usage(20, 16, 4), "model_context_window": nil}},
		"rate_limits": map[string]any{"limitId": "codex", "primary": map[string]any{"usedPercent": 42, "windowDurationMins": 300, "resetsAt": 1}},
	}}})
	f := start(t, e)
	f.initialize()
	threadID := f.startThread(map[string]any{})
	turnID := f.startTurn(threadID, "x")
	end, turn := f.turnCompleted(turnID)
	completed := map[string]map[string]any{}
	var usages []map[string]any
	var rate map[string]any
	for _, l := range f.lines()[:end] {
		p := l.param()
		switch l.Method {
		case "item/completed":
			item := p["item"].(map[string]any)
			completed[item["type"].(string)] = item
		case "thread/tokenUsage/updated":
			usages = append(usages, p)
		case "account/rateLimits/updated":
			rate = p["rateLimits"].(map[string]any)
		}
	}
	if c := completed["commandExecution"]; c["status"] != "failed" || c["exitCode"].(float64) != 1 || c["commandActions"].([]any)[0].(map[string]any)["command"] != "false" {
		t.Errorf("command %v", c)
	}
	if k := completed["fileChange"]["changes"].([]any)[0].(map[string]any)["kind"].(map[string]any); k["type"] != "update" || k["move_path"] != nil {
		t.Errorf("file change kind %v", k)
	}
	if iv := completed["imageView"]; iv["path"] != "/shot.png" {
		t.Errorf("imageView %v", iv)
	}
	mcp := completed["mcpToolCall"]
	content := mcp["result"].(map[string]any)["content"].([]any)
	if mcp["status"] != "completed" || len(content) != 2 || content[1].(map[string]any)["type"] != "image" || content[1].(map[string]any)["mimeType"] != "image/jpeg" || content[1].(map[string]any)["data"] != "aGk=" {
		t.Errorf("mcpToolCall %v", mcp)
	}
	if a := completed["agentMessage"]; a["phase"] != nil || a["text"] != `{"answer":"x"}` {
		t.Errorf("answer %v", a)
	}
	if len(usages) != 4 || usages[0]["turnId"] != turnID || usages[1]["turnId"] != turnID || usages[2]["turnId"] == turnID {
		t.Fatalf("usage snapshots %v", usages)
	}
	if l := usages[3]["tokenUsage"].(map[string]any); l["last"].(map[string]any)["totalTokens"].(float64) != 10 || l["modelContextWindow"] != nil {
		t.Errorf("last snapshot %v", l)
	}
	if rate["primary"].(map[string]any)["usedPercent"].(float64) != 42 {
		t.Errorf("rate limits %v", rate)
	}
	if len(turn["items"].([]any)) != 1 {
		t.Errorf("turn items %v", turn["items"])
	}
}

func TestGrandchildSharesProcessGroup(t *testing.T) {
	e := newEnv(t, map[string]any{"grandchild": true})
	f := startProc(t, e)
	f.initialize()
	threadID := f.startThread(map[string]any{})
	f.turnCompleted(f.startTurn(threadID, "x"))
	if code := f.closeAndWait(); code != 0 {
		t.Fatalf("exit %d", code)
	}
	logs := e.logLines(t)
	if logs[0]["pid"].(float64) != float64(f.pid) || logs[0]["pgid"].(float64) != float64(f.pid) {
		t.Fatalf("start line %v (pid %d, own group)", logs[0], f.pid)
	}
	var child int
	for _, l := range logs {
		if l["fake"] == "grandchild" {
			child = int(l["pid"].(float64))
		}
	}
	pgid, err := syscall.Getpgid(child)
	if child == 0 || err != nil || pgid != f.pid {
		t.Fatalf("grandchild %d pgid %d (%v), want %d", child, pgid, err, f.pid)
	}
	// The cleanup kills the process group, grandchild included.
}

func TestRetryErrorDelayAndErrorAnswer(t *testing.T) {
	e := newEnv(t, map[string]any{"turns": []any{map[string]any{
		"items":    []any{map[string]any{"type": "approval", "kind": "command", "command": "make", "output": "built\n"}},
		"error":    map[string]any{"message": "reconnecting", "codexErrorInfo": map[string]any{"responseStreamDisconnected": map[string]any{"httpStatusCode": nil}}, "willRetry": true},
		"delay_ms": 1,
	}}})
	f := start(t, e)
	f.initialize()
	threadID := f.startThread(map[string]any{})
	f.setDecide(func(string, json.RawMessage) any { return &jsonrpc.Error{Code: -32603, Message: "no"} })
	end, turn := f.turnCompleted(f.startTurn(threadID, "x"))
	if turn["status"] != "completed" || turn["error"] != nil {
		t.Fatalf("turn %v", turn)
	}
	var sawError, sawDeclined bool
	for _, l := range f.lines()[:end] {
		p := l.param()
		switch l.Method {
		case "error":
			sawError = p["willRetry"] == true && p["error"].(map[string]any)["message"] == "reconnecting"
		case "item/completed":
			sawDeclined = sawDeclined || p["item"].(map[string]any)["status"] == "declined"
		case "item/commandExecution/outputDelta":
			t.Errorf("declined command produced output: %s", l.raw)
		}
	}
	if !sawError || !sawDeclined {
		t.Fatalf("retryable error %v, declined on error answer %v", sawError, sawDeclined)
	}
}
