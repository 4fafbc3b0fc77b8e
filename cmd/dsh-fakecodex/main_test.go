package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"
	"testing"
)

func TestVersionAndArgs(t *testing.T) {
	e := newEnv(t, nil)
	var out, errb bytes.Buffer
	if code := run([]string{"--version"}, strings.NewReader(""), &out, &errb, e.getenv); code != 0 || out.String() != "codex-cli 0.171.0\n" {
		t.Fatalf("--version: code %d out %q", code, out.String())
	}
	ok := [][]string{
		{"app-server"},
		{"-c", "model=x", "app-server", "--listen", "stdio://", "-c", "a.b=1"},
		{"app-server", "--listen=stdio://", "--config=x=y"},
	}
	for _, args := range ok {
		if code := run(args, strings.NewReader(""), &out, &errb, e.getenv); code != 0 {
			t.Errorf("%q: code %d, stderr %s", args, code, errb.String())
		}
	}
	bad := [][]string{{}, {"exec"}, {"app-server", "--listen", "ws://127.0.0.1:1"}, {"app-server", "-c"}}
	for _, args := range bad {
		errb.Reset()
		if code := run(args, strings.NewReader(""), &out, &errb, e.getenv); code != 2 || errb.Len() == 0 {
			t.Errorf("%q: code %d, stderr %q; want 2 and a message", args, code, errb.String())
		}
	}
	for _, script := range []string{`{"hang_at":"nowhere"}`, `{"turns":[{"items":[{"type":"bogus"}]}]}`, `{"unknown":1}`, `{`} {
		p := filepath.Join(e.home, "bad.json")
		if err := os.WriteFile(p, []byte(script), 0o644); err != nil {
			t.Fatal(err)
		}
		e.script = p
		errb.Reset()
		if code := run([]string{"app-server"}, strings.NewReader(""), &out, &errb, e.getenv); code != 2 || !strings.Contains(errb.String(), "script") {
			t.Errorf("script %s: code %d, stderr %q", script, code, errb.String())
		}
	}
}

func TestHandshake(t *testing.T) {
	e := newEnv(t, nil)
	f := start(t, e)
	if je := f.callErr("thread/start", map[string]any{}); je.Code != -32600 || je.Message != "Not initialized" {
		t.Fatalf("before initialize: %+v", je)
	}
	if je := f.callErr("initialize", map[string]any{"capabilities": nil}); je.Code != -32600 || je.Message != "Invalid request: missing field `clientInfo`" {
		t.Fatalf("initialize without clientInfo: %+v", je)
	}
	from := len(f.lines())
	res := f.mustCall("initialize", map[string]any{
		"clientInfo":   map[string]any{"name": "dsh_test", "version": "1.2.3"},
		"capabilities": map[string]any{"experimentalApi": false, "optOutNotificationMethods": []string{"item/agentMessage/delta"}},
	})
	if res["codexHome"] != e.home || res["platformFamily"] != "unix" || !strings.HasPrefix(res["userAgent"].(string), "dsh_test/0.171.0 ") {
		t.Fatalf("initialize result %v", res)
	}
	i := f.waitFor(from, "configWarning", isMethod("configWarning"))
	if got := methods(f.lines(), from)[:2]; got[0] != "response" || i != from+1 {
		t.Fatalf("configWarning must follow the initialize response: %v", got)
	}
	if err := f.conn.Notify("initialized", nil); err != nil {
		t.Fatal(err)
	}
	if je := f.callErr("initialize", map[string]any{"clientInfo": map[string]any{"name": "x", "version": "1"}}); je.Code != -32600 || je.Message != "Already initialized" {
		t.Fatalf("second initialize: %+v", je)
	}
	je := f.callErr("no/such/method", map[string]any{})
	if je.Code != -32600 || !strings.HasPrefix(je.Message, "Invalid request: unknown variant `no/such/method`, expected one of `initialize`") {
		t.Fatalf("unknown method: %+v", je)
	}
	// An unknown notification is ignored; the connection still answers.
	if err := f.conn.Notify("no/such/notification", map[string]any{}); err != nil {
		t.Fatal(err)
	}
	// Opted-out notifications are dropped.
	th := f.startThread(map[string]any{"cwd": "/w"})
	tid := f.startTurn(th, "say hi")
	f.turnCompleted(tid)
	for _, l := range f.lines() {
		if l.Method == "item/agentMessage/delta" {
			t.Fatal("opted-out item/agentMessage/delta was sent")
		}
	}
	if code := f.closeAndWait(); code != 0 {
		t.Fatalf("exit code %d after EOF", code)
	}

	logs := e.logLines(t)
	first := logs[0]
	if first["fake"] != "start" || int(first["pid"].(float64)) != os.Getpid() || int(first["pgid"].(float64)) != syscall.Getpgrp() {
		t.Fatalf("first log line %v", first)
	}
	if last := logs[len(logs)-1]; last["fake"] != "exit" || last["reason"] != "eof" || last["code"].(float64) != 0 {
		t.Fatalf("last log line %v", last)
	}
	var logged []string
	for _, l := range logs[1 : len(logs)-1] {
		m, _ := l["method"].(string)
		logged = append(logged, m)
	}
	want := []string{"thread/start", "initialize", "initialize", "initialized", "initialize", "no/such/method", "no/such/notification", "thread/start", "turn/start"}
	if !slices.Equal(logged, want) {
		t.Fatalf("logged methods %v, want %v", logged, want)
	}
}

// hiOrder is the frame order of a plain turn in the real transcript
// shared/protocols/codex-app-server/transcripts/hi.txt, from turn/start on.
var hiOrder = []string{
	"warning", "response", "thread/status/changed", "turn/started",
	"item/started", "item/completed", // userMessage
	"item/started", "item/agentMessage/delta", "item/agentMessage/delta", "item/completed", // agentMessage "hi"
	"thread/tokenUsage/updated", "account/rateLimits/updated",
	"thread/status/changed", "turn/completed",
}

func TestHappyPathOrder(t *testing.T) {
	e := newEnv(t, nil)
	f := start(t, e)
	f.initialize()
	from := len(f.lines())
	res := f.mustCall("thread/start", map[string]any{"cwd": "/home/u/p", "approvalPolicy": "never", "sandbox": "workspace-write", "model": "fake-model"})
	th := res["thread"].(map[string]any)
	f.waitFor(from, "thread/started", isMethod("thread/started"))
	if got := methods(f.lines(), from); !slices.Equal(got, []string{"response", "thread/started"}) {
		t.Fatalf("thread/start frames %v", got)
	}
	if res["approvalPolicy"] != "never" || res["approvalsReviewer"] != "user" || res["cwd"] != "/home/u/p" || res["reasoningEffort"] != nil {
		t.Fatalf("thread/start result %v", res)
	}
	if sb := res["sandbox"].(map[string]any); sb["type"] != "workspaceWrite" || sb["networkAccess"] != false {
		t.Fatalf("sandbox %v", sb)
	}
	if th["ephemeral"] != false || th["model"] != "fake-model" || len(th["turns"].([]any)) != 0 || th["status"].(map[string]any)["type"] != "idle" {
		t.Fatalf("thread %v", th)
	}
	threadID := th["id"].(string)

	from = len(f.lines())
	turnID := f.startTurn(threadID, "say hi")
	end, turn := f.turnCompleted(turnID)
	lines := f.lines()
	if got := methods(lines[:end+1], from); !slices.Equal(got, hiOrder) {
		t.Fatalf("turn frames\n got %v\nwant %v", got, hiOrder)
	}
	var text string
	for _, l := range lines[from : end+1] {
		if l.isResponse() {
			if l.EmittedAtMs != nil {
				t.Errorf("response with emittedAtMs: %s", l.raw)
			}
		} else if l.EmittedAtMs == nil || *l.EmittedAtMs == 0 {
			t.Errorf("notification without emittedAtMs: %s", l.raw)
		}
		if strings.Contains(l.raw, `"jsonrpc"`) {
			t.Errorf("frame carries jsonrpc: %s", l.raw)
		}
		p := l.param()
		if l.Method == "item/agentMessage/delta" {
			text += p["delta"].(string)
		}
		if l.Method == "item/started" || l.Method == "item/completed" {
			if p["threadId"] != threadID || p["turnId"] != turnID {
				t.Errorf("item frame ids: %s", l.raw)
			}
		}
	}
	if text != "hi" {
		t.Fatalf("deltas %q", text)
	}
	if st := lines[from+2].param()["status"].(map[string]any); st["type"] != "active" || st["activeFlags"] == nil || len(st["activeFlags"].([]any)) != 0 {
		t.Fatalf("active status %v", st)
	}
	if st := lines[end-1].param()["status"].(map[string]any); st["type"] != "idle" || len(st) != 1 {
		t.Fatalf("idle status %v", st)
	}
	final := lines[end-4].param()["item"].(map[string]any)
	if final["type"] != "agentMessage" || final["text"] != "hi" || final["phase"] != "final_answer" {
		t.Fatalf("final item %v", final)
	}
	if started := lines[from+6].param()["item"].(map[string]any); started["phase"] != nil || started["text"] != "" {
		t.Fatalf("agentMessage item/started %v", started)
	}
	items := turn["items"].([]any)
	if turn["status"] != "completed" || turn["error"] != nil || len(items) != 1 || items[0].(map[string]any)["text"] != "hi" || turn["itemsView"] != "summary" {
		t.Fatalf("turn/completed turn %v", turn)
	}
	if u := lines[end-3].param()["tokenUsage"].(map[string]any); u["total"].(map[string]any)["totalTokens"].(float64) != 106 {
		t.Fatalf("usage %v", u)
	}
}

// required lists the required members of a few v2 schema definitions
// (shared/protocols/codex-app-server/schema/codex_app_server_protocol.v2.schemas.json).
var required = map[string][]string{
	"ThreadStartResponse":                 {"approvalPolicy", "approvalsReviewer", "cwd", "model", "modelProvider", "sandbox", "thread"},
	"ThreadResumeResponse":                {"approvalPolicy", "approvalsReviewer", "cwd", "model", "modelProvider", "sandbox", "thread"},
	"Thread":                              {"cliVersion", "createdAt", "cwd", "ephemeral", "id", "modelProvider", "preview", "projectId", "sessionId", "source", "status", "turns", "updatedAt"},
	"TurnStartResponse":                   {"turn"},
	"Turn":                                {"id", "items", "status"},
	"TurnCompletedNotification":           {"threadId", "turn"},
	"ThreadTokenUsageUpdatedNotification": {"threadId", "tokenUsage", "turnId"},
	"ThreadTokenUsage":                    {"last", "total"},
	"TokenUsageBreakdown":                 {"cachedInputTokens", "inputTokens", "outputTokens", "reasoningOutputTokens", "totalTokens"},
	"ItemStartedNotification":             {"item", "startedAtMs", "threadId", "turnId"},
	"ItemCompletedNotification":           {"completedAtMs", "item", "threadId", "turnId"},
}

func hasRequired(t *testing.T, def string, v any) {
	t.Helper()
	obj, ok := v.(map[string]any)
	if !ok {
		t.Fatalf("%s: not an object: %v", def, v)
	}
	for _, k := range required[def] {
		if _, ok := obj[k]; !ok {
			t.Errorf("%s lacks required %q: %v", def, k, obj)
		}
	}
}

func TestShapesAgainstSchema(t *testing.T) {
	// With DSH_CODEX_SCHEMA_DIR pointing at the generated schema directory,
	// the hand-copied lists above are checked against it.
	if dir := os.Getenv("DSH_CODEX_SCHEMA_DIR"); dir != "" {
		b, err := os.ReadFile(filepath.Join(dir, "codex_app_server_protocol.v2.schemas.json"))
		if err != nil {
			t.Fatal(err)
		}
		var bundle struct {
			Definitions map[string]struct {
				Required []string `json:"required"`
			} `json:"definitions"`
		}
		if err := json.Unmarshal(b, &bundle); err != nil {
			t.Fatal(err)
		}
		for def, want := range required {
			got := append([]string(nil), bundle.Definitions[def].Required...)
			sort.Strings(got)
			if !slices.Equal(got, want) {
				t.Errorf("%s: schema requires %v, test lists %v", def, got, want)
			}
		}
	}

	e := newEnv(t, nil)
	f := start(t, e)
	f.initialize()
	res := f.mustCall("thread/start", map[string]any{"sandbox": "read-only"})
	hasRequired(t, "ThreadStartResponse", res)
	hasRequired(t, "Thread", res["thread"])
	if sb := res["sandbox"].(map[string]any); sb["type"] != "readOnly" {
		t.Errorf("read-only sandbox answered %v", sb)
	}
	threadID := res["thread"].(map[string]any)["id"].(string)
	ts := f.mustCall("turn/start", map[string]any{"threadId": threadID, "input": textInput("x")})
	hasRequired(t, "TurnStartResponse", ts)
	hasRequired(t, "Turn", ts["turn"])
	if turn := ts["turn"].(map[string]any); turn["status"] != "inProgress" || len(turn["items"].([]any)) != 0 {
		t.Errorf("turn/start turn %v", turn)
	}
	turnID := ts["turn"].(map[string]any)["id"].(string)
	end, _ := f.turnCompleted(turnID)
	for _, l := range f.lines()[:end+1] {
		switch l.Method {
		case "turn/completed":
			hasRequired(t, "TurnCompletedNotification", l.param())
			hasRequired(t, "Turn", l.param()["turn"])
		case "thread/tokenUsage/updated":
			p := l.param()
			hasRequired(t, "ThreadTokenUsageUpdatedNotification", p)
			u := p["tokenUsage"]
			hasRequired(t, "ThreadTokenUsage", u)
			hasRequired(t, "TokenUsageBreakdown", u.(map[string]any)["total"])
			hasRequired(t, "TokenUsageBreakdown", u.(map[string]any)["last"])
		case "item/started":
			hasRequired(t, "ItemStartedNotification", l.param())
		case "item/completed":
			hasRequired(t, "ItemCompletedNotification", l.param())
		}
	}

	// Enum and field errors, worded like serde's.
	cases := []struct {
		method string
		params map[string]any
		want   string
	}{
		{"thread/start", map[string]any{"sandbox": "workspaceWrite"}, "Invalid request: unknown variant `workspaceWrite`, expected one of `read-only`, `workspace-write`, `danger-full-access`"},
		{"thread/start", map[string]any{"approvalPolicy": "unlessTrusted"}, "Invalid request: unknown variant `unlessTrusted`, expected one of `untrusted`, `on-request`, `granular`, `never`"},
		{"turn/start", map[string]any{"threadId": threadID}, "Invalid request: missing field `input`"},
		{"turn/start", map[string]any{"threadId": threadID, "input": []any{map[string]any{"type": "audio"}}}, "Invalid request: unknown variant `audio`"},
		{"turn/start", map[string]any{"threadId": threadID, "input": textInput("x"), "sandboxPolicy": map[string]any{"type": "yolo"}}, "Invalid request: unknown variant `yolo`"},
		{"turn/start", map[string]any{"threadId": "nope", "input": textInput("x")}, "thread not found: nope"},
		{"thread/resume", map[string]any{}, "Invalid request: missing field `threadId`"},
	}
	for _, c := range cases {
		je := f.callErr(c.method, c.params)
		if je.Code != -32600 || !strings.HasPrefix(je.Message, c.want) {
			t.Errorf("%s %v: got %d %q, want -32600 %q", c.method, c.params, je.Code, je.Message, c.want)
		}
	}
}
