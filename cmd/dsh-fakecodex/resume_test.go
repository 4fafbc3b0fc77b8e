package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func usage(total, in, out int) map[string]any {
	return map[string]any{"totalTokens": total, "inputTokens": in, "cachedInputTokens": 0, "outputTokens": out, "reasoningOutputTokens": 0}
}

func TestResumeReplaysPersistedThread(t *testing.T) {
	script := map[string]any{"turns": []any{
		map[string]any{"answer": "first", "usage": []any{
			map[string]any{"total": usage(50, 45, 5)},
			map[string]any{"total": usage(120, 110, 10), "last": usage(70, 65, 5)},
		}},
	}}
	e := newEnv(t, script)

	f := start(t, e)
	f.initialize()
	threadID := f.startThread(map[string]any{"cwd": "/p", "model": "m1", "approvalPolicy": "never", "sandbox": "workspace-write"})
	// No turn yet: nothing persisted, so another server cannot resume it.
	if _, err := os.Stat(filepath.Join(e.home, "fake-threads", threadID+".json")); !os.IsNotExist(err) {
		t.Fatalf("thread persisted before its first turn: %v", err)
	}
	from := len(f.lines())
	f.mustCall("thread/name/set", map[string]any{"threadId": threadID, "name": "probe thread"})
	i := f.waitFor(from, "thread/name/updated", isMethod("thread/name/updated"))
	if p := f.lines()[i].param(); p["threadId"] != threadID || p["threadName"] != "probe thread" || i != from+1 {
		t.Fatalf("thread/name/updated %v at %d (from %d)", p, i, from)
	}
	turnID := f.mustCall("turn/start", map[string]any{"threadId": threadID, "input": textInput("say hi"), "effort": "high"})["turn"].(map[string]any)["id"].(string)
	f.turnCompleted(turnID)
	if code := f.closeAndWait(); code != 0 {
		t.Fatalf("exit %d", code)
	}

	var rec threadRecord
	b, err := os.ReadFile(filepath.Join(e.home, "fake-threads", threadID+".json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &rec); err != nil {
		t.Fatal(err)
	}
	if rec.TurnCount != 1 || *rec.Name != "probe thread" || rec.Model != "m1" || rec.Usage.Total.TotalTokens != 120 || rec.Usage.TurnID != turnID {
		t.Fatalf("persisted %s", b)
	}

	// A new process (whose script starts over) resumes it with overrides.
	eg := *e
	eg.script = writeScript(t, e.home, map[string]any{"turns": []any{map[string]any{"answer": "second"}}})
	g := start(t, &eg)
	g.initialize()
	from = len(g.lines())
	res := g.mustCall("thread/resume", map[string]any{"threadId": threadID, "model": "m2", "sandbox": "read-only"})
	hasRequired(t, "ThreadResumeResponse", res)
	th := res["thread"].(map[string]any)
	hasRequired(t, "Thread", th)
	if res["model"] != "m2" || res["sandbox"].(map[string]any)["type"] != "readOnly" || res["approvalPolicy"] != "never" || res["cwd"] != "/p" || res["reasoningEffort"] != "high" {
		t.Fatalf("resume result %v", res)
	}
	turns := th["turns"].([]any)
	if th["name"] != "probe thread" || th["preview"] != "say hi" || len(turns) != 1 {
		t.Fatalf("resumed thread %v", th)
	}
	t0 := turns[0].(map[string]any)
	items := t0["items"].([]any)
	if t0["id"] != turnID || t0["status"] != "completed" || len(items) != 2 || items[1].(map[string]any)["text"] != "first" {
		t.Fatalf("resumed turn %v", t0)
	}
	j := g.waitFor(from, "usage replay", isMethod("thread/tokenUsage/updated"))
	got := methods(g.lines()[:j+1], from)
	if !slices.Equal(got, []string{"deprecationNotice", "response", "thread/tokenUsage/updated"}) {
		t.Fatalf("resume frames %v", got)
	}
	replay := g.lines()[j].param()
	if replay["turnId"] != turnID || replay["threadId"] != threadID ||
		replay["tokenUsage"].(map[string]any)["total"].(map[string]any)["totalTokens"].(float64) != 120 ||
		replay["tokenUsage"].(map[string]any)["last"].(map[string]any)["totalTokens"].(float64) != 70 {
		t.Fatalf("replay %v", replay)
	}
	// The next turn continues the cumulative total (default last: 106).
	turn2 := g.startTurn(threadID, "again")
	end, done := g.turnCompleted(turn2)
	if done["items"].([]any)[0].(map[string]any)["text"] != "second" {
		t.Fatalf("second turn %v", done)
	}
	if u := g.lines()[end-3].param()["tokenUsage"].(map[string]any)["total"].(map[string]any); u["totalTokens"].(float64) != 226 {
		t.Fatalf("cumulative total %v", u)
	}
	for _, l := range g.lines() {
		if l.Method == "thread/started" {
			t.Fatal("thread/resume sent thread/started")
		}
	}
	g.closeAndWait()

	// resume_ignore_overrides answers the persisted settings; excludeTurns
	// drops the history and the deprecation notice.
	e2 := *e
	e2.script = writeScript(t, e.home, map[string]any{"resume_ignore_overrides": true})
	h := start(t, &e2)
	h.initialize()
	from = len(h.lines())
	res = h.mustCall("thread/resume", map[string]any{"threadId": threadID, "model": "m3", "cwd": "/elsewhere", "sandbox": "danger-full-access", "excludeTurns": true})
	if res["model"] != "m2" || res["cwd"] != "/p" || res["sandbox"].(map[string]any)["type"] != "readOnly" || len(res["thread"].(map[string]any)["turns"].([]any)) != 0 {
		t.Fatalf("resume ignoring overrides %v", res)
	}
	j = h.waitFor(from, "usage replay", isMethod("thread/tokenUsage/updated"))
	if got := methods(h.lines()[:j+1], from); !slices.Equal(got, []string{"response", "thread/tokenUsage/updated"}) {
		t.Fatalf("resume frames %v", got)
	}
}

func writeScript(t *testing.T, dir string, script any) string {
	t.Helper()
	b, err := json.Marshal(script)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.CreateTemp(dir, "script-*.json")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return f.Name()
}

func TestResumeNoRollout(t *testing.T) {
	e := newEnv(t, nil)
	f := start(t, e)
	f.initialize()
	const unknown = "00000000-0000-0000-0000-000000000000"
	if je := f.callErr("thread/resume", map[string]any{"threadId": unknown}); je.Code != -32600 || je.Message != "no rollout found for thread id "+unknown {
		t.Fatalf("unknown thread: %+v", je)
	}
	if je := f.callErr("thread/resume", map[string]any{"threadId": "../../etc/passwd"}); !strings.HasPrefix(je.Message, "no rollout found") {
		t.Fatalf("path-like id: %+v", je)
	}
	// Started but no turn yet: another server finds no rollout.
	threadID := f.startThread(map[string]any{})
	g := start(t, e)
	g.initialize()
	if je := g.callErr("thread/resume", map[string]any{"threadId": threadID}); je.Message != "no rollout found for thread id "+threadID {
		t.Fatalf("turnless thread: %+v", je)
	}
	// Ephemeral threads are never persisted.
	eph := f.startThread(map[string]any{"ephemeral": true})
	f.turnCompleted(f.startTurn(eph, "x"))
	if je := g.callErr("thread/resume", map[string]any{"threadId": eph}); !strings.HasPrefix(je.Message, "no rollout found") {
		t.Fatalf("ephemeral thread: %+v", je)
	}
}

func TestActiveWriterTwoProcesses(t *testing.T) {
	e := newEnv(t, nil)
	a := startProc(t, e)
	a.initialize()
	threadID := a.startThread(map[string]any{"cwd": "/p"})
	a.turnCompleted(a.startTurn(threadID, "hi"))

	b := startProc(t, e)
	b.initialize()
	for _, c := range []struct {
		method string
		params map[string]any
	}{
		{"thread/resume", map[string]any{"threadId": threadID}},
		{"turn/start", map[string]any{"threadId": threadID, "input": textInput("x")}},
		{"thread/name/set", map[string]any{"threadId": threadID, "name": "n"}},
	} {
		je := b.callErr(c.method, c.params)
		if !strings.Contains(je.Message, "already has an active writer") {
			t.Fatalf("%s while another process holds the thread: %+v", c.method, je)
		}
	}
	if code := a.closeAndWait(); code != 0 {
		t.Fatalf("writer exit %d", code)
	}
	res := b.mustCall("thread/resume", map[string]any{"threadId": threadID})
	if res["thread"].(map[string]any)["id"] != threadID {
		t.Fatalf("resume after the writer exited: %v", res)
	}
	b.turnCompleted(b.startTurn(threadID, "more"))
	if code := b.closeAndWait(); code != 0 {
		t.Fatalf("exit %d", code)
	}
}
