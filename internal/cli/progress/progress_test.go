package progress

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dsh-dev/dsh/internal/llm"
	"github.com/dsh-dev/dsh/internal/session"
	"github.com/dsh-dev/dsh/internal/subagent"
)

var update = flag.Bool("update", false, "rewrite golden files")

// script builds an event sequence as the agent logs it.
type script struct {
	t      *testing.T
	events []session.Event
	now    int64 // ms
}

func newScript(t *testing.T) *script { return &script{t: t, now: 1_000_000} }

func (s *script) add(typ string, data any) *script {
	b, err := json.Marshal(data)
	if err != nil {
		s.t.Fatal(err)
	}
	s.now += 10
	s.events = append(s.events, session.Event{Type: typ, Seq: int64(len(s.events)), Time: s.now, Data: b})
	return s
}

func (s *script) step(n int) *script {
	return s.add(session.TypeStepStart, session.StepRef{Turn: 1, Step: n})
}

func (s *script) chunk(c llm.Chunk) *script {
	return s.add(session.TypeAssistantChunk, session.AssistantChunk{Turn: 1, Step: 1, Chunk: c})
}

// stream sends a block as the adapters do: start, deltas, end.
func (s *script) stream(index int, typ llm.BlockType, parts ...string) *script {
	s.chunk(llm.Chunk{Type: llm.ChunkBlockStart, Index: index, BlockType: typ})
	delta := llm.ChunkTextDelta
	if typ == llm.BlockReasoning {
		delta = llm.ChunkReasoningDelta
	}
	for _, p := range parts {
		s.chunk(llm.Chunk{Type: delta, Index: index, Text: p})
	}
	return s.chunk(llm.Chunk{Type: llm.ChunkBlockEnd, Index: index, Block: &llm.Block{Type: typ, Text: strings.Join(parts, "")}})
}

func (s *script) message(u llm.Usage) *script {
	return s.add(session.TypeAssistantMsg, session.AssistantMessage{Turn: 1, Step: 1, Message: llm.Message{Role: llm.RoleAssistant}, Usage: &u})
}

func (s *script) tool(id, name, args string, res session.ToolResult, meta any) *script {
	s.add(session.TypeToolCall, session.ToolCall{Turn: 1, Step: 1, CallID: id, Name: name, Arguments: args})
	res.CallID, res.Name = id, name
	if meta != nil {
		res.Meta, _ = json.Marshal(meta)
	}
	return s.add(session.TypeToolResult, res)
}

func ok(text string) session.ToolResult {
	return session.ToolResult{Content: []llm.Block{llm.TextBlock(text)}}
}

var (
	plain    = Options{}
	terminal = Options{Color: true, Transient: true, Width: 72}
)

// golden compares out with testdata/name.golden (rewritten with -update).
func golden(t *testing.T, name string, out []byte) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, out, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if !bytes.Equal(out, want) {
		t.Errorf("%s differs from the golden file:\n--- got ---\n%s\n--- want ---\n%s", name, out, want)
	}
}

// visible spells out the control bytes of terminal output so that a
// golden file can be read and reviewed: ␛ for ESC, ␍ for CR.
func visible(b []byte) []byte {
	return []byte(strings.NewReplacer("\x1b", "␛", "\r", "␍").Replace(string(b)))
}

// each renders the script both plainly and as on a colour terminal.
func each(t *testing.T, name string, s *script) {
	t.Helper()
	golden(t, name+".plain", Render(plain, s.events))
	golden(t, name+".tty", visible(Render(terminal, s.events)))
}

func TestTextStreaming(t *testing.T) {
	s := newScript(t).step(1).
		stream(0, llm.BlockText, "Hello", ", wor", "ld.\nSecond line").
		message(llm.Usage{InputTokens: 200, OutputTokens: 12})
	each(t, "text", s)
}

func TestReasoning(t *testing.T) {
	s := newScript(t).step(1).
		stream(0, llm.BlockReasoning, "Let me think", " about it.\nMore thoughts.").
		stream(1, llm.BlockText, "The answer is 42.").
		message(llm.Usage{InputTokens: 100, OutputTokens: 30, ReasoningTokens: 20})
	each(t, "reasoning", s)
}

func TestBash(t *testing.T) {
	zero, one := 0, 1
	s := newScript(t).step(1).
		tool("c1", "bash", `{"command":"go test ./...","description":"run tests"}`, ok("ok\n[exit code: 0]"),
			resultMeta{ExitCode: &zero, DurationMs: 1234}).
		tool("c2", "bash", `{"command":"make lint\nmake vet"}`, ok("boom\n[exit code: 1]"),
			resultMeta{ExitCode: &one, DurationMs: 15_300, SandboxDenied: true}).
		tool("c3", "bash", `{"command":"sleep 999"}`, ok("[timed out]"),
			map[string]any{"exitCode": -1, "durationMs": 125_000, "timedOut": true}).
		tool("c4", "bash", `{"command":""}`, session.ToolResult{IsError: true,
			Content: []llm.Block{llm.TextBlock("Error: invalid arguments for bash: command is required")},
			Error:   &session.ToolError{Name: "ToolError", Code: "INVALID_ARGS"}}, nil)
	each(t, "bash", s)
}

func TestEditWithDiff(t *testing.T) {
	diff := "--- main.go\n+++ main.go\n@@ -1,5 +1,5 @@\n package main\n \n func main() {\n-\tprintln(\"helo\")\n+\tprintln(\"hello\")\n }\n"
	var long strings.Builder
	long.WriteString("--- big.txt\n+++ big.txt\n@@ -1,20 +1,20 @@\n")
	for i := range 20 {
		long.WriteString("-old " + string(rune('a'+i)) + "\n+new " + string(rune('a'+i)) + "\n")
	}
	s := newScript(t).step(1).
		tool("e1", "edit", `{"file_path":"main.go","old_string":"helo","new_string":"hello"}`, ok("edited"),
			map[string]any{"path": "main.go", "replacements": 1, "diff": diff}).
		tool("e2", "str_replace_based_edit_tool", `{"command":"str_replace","path":"big.txt"}`, ok("edited"),
			map[string]any{"command": "str_replace", "path": "big.txt", "diff": long.String()}).
		tool("w1", "write", `{"file_path":"notes.md","content":"x"}`, ok("written"),
			map[string]any{"path": "notes.md", "created": true, "bytes": 2048}).
		tool("e3", "edit", `{"file_path":"gone.go"}`, session.ToolResult{IsError: true,
			Error: &session.ToolError{Name: "ToolError", Code: "NOT_READ", Reason: "read the file before editing it"}}, nil)
	each(t, "edit", s)
}

func TestWebFetch(t *testing.T) {
	s := newScript(t).step(1).
		tool("f1", "web_fetch", `{"url":"https://go.dev/doc/"}`, ok("page"),
			map[string]any{"url": "https://go.dev/doc/", "status": 200, "chars": 48_213, "kind": "html"}).
		tool("f2", "web_fetch", `{"url":"https://example.com/missing"}`, ok("not found"),
			map[string]any{"url": "https://example.com/missing", "status": 404, "chars": 120}).
		tool("s1", "web_search", `{"query":"golang pty"}`, ok("results"),
			map[string]any{"query": "golang pty", "sources": []map[string]string{{"url": "a"}, {"url": "b"}, {"url": "c"}}})
	each(t, "web", s)
}

func TestSubagent(t *testing.T) {
	s := newScript(t).step(1).
		add(session.TypeSubagentStart, subagent.StartEvent{RunID: "r1", ChildID: "child-1", Label: "scan the tests", Mode: subagent.ModeOneShot, Depth: 1}).
		add(session.TypeSubagentStart, subagent.StartEvent{RunID: "r2", ChildID: "child-2", Label: "flaky", Mode: subagent.ModeOneShot, Depth: 1}).
		add(session.TypeSubagentEnd, subagent.EndEvent{RunID: "r1", ChildID: "child-1", StopReason: "completed", Usage: &llm.Usage{InputTokens: 3000, CacheReadTokens: 1000, OutputTokens: 250}}).
		add(session.TypeSubagentEnd, subagent.EndEvent{RunID: "r2", ChildID: "child-2", StopReason: "error", Diagnostic: "RATE_LIMITED: slow down\nmore"})
	each(t, "subagent", s)
}

func TestRetry(t *testing.T) {
	s := newScript(t).step(1).
		add(session.TypeLLMRetry, session.LLMRetry{RetryID: "x", Turn: 1, Step: 1, Provider: "deepseek", Retry: 1, MaxRetries: 4, DelayMs: 2000,
			Failure: &llm.Failure{Code: "RATE_LIMITED", Message: "too many requests", Status: 429}}).
		add(session.TypeLLMRetryStart, session.LLMRetryStarted{RetryID: "x", Turn: 1, Step: 1, Retry: 1}).
		stream(0, llm.BlockText, "Recovered.").
		message(llm.Usage{InputTokens: 10, OutputTokens: 2})
	each(t, "retry", s)
}

// TestUsageLine: the closing line sums every step's usage and shows the
// cache share of the whole prompt.
func TestUsageLine(t *testing.T) {
	s := newScript(t).step(1).
		stream(0, llm.BlockText, "one").
		message(llm.Usage{InputTokens: 1200, CacheReadTokens: 800, OutputTokens: 40}).
		step(2).
		stream(0, llm.BlockText, "two").
		message(llm.Usage{InputTokens: 300, CacheReadTokens: 1_500_000, CacheWriteTokens: 200, OutputTokens: 1960})
	each(t, "usage", s)
}

// TestWaitingLine: on a terminal a step shows an erasable waiting line,
// refreshed by Tick with the time waited, and erased by the first
// chunk; without a terminal there is no waiting line and Tick is silent.
func TestWaitingLine(t *testing.T) {
	s := newScript(t).step(1).add(session.TypeRequestContext, session.RequestContext{Provider: "deepseek", Model: "deepseek-v4-flash"})
	start := time.UnixMilli(s.now)
	for _, o := range []Options{plain, terminal} {
		r := New(o)
		var out []byte
		for _, e := range s.events {
			out = append(out, r.Event(e)...)
		}
		out = append(out, r.Tick(start.Add(3500*time.Millisecond))...)
		rest := newScript(t).stream(0, llm.BlockText, "hi").events
		for _, e := range rest {
			out = append(out, r.Event(e)...)
		}
		// Once the answer streams, ticks write nothing.
		out = append(out, r.Tick(start.Add(10*time.Second))...)
		out = append(out, r.Close()...)
		name := "waiting.plain"
		if o.Transient {
			name, out = "waiting.tty", visible(out)
		}
		golden(t, name, out)
	}
}

// TestWidth: status lines are cut to the terminal width, so a long
// command never wraps.
func TestWidth(t *testing.T) {
	zero := 0
	s := newScript(t).step(1).
		tool("c1", "bash", `{"command":"`+strings.Repeat("x", 200)+`"}`, ok(""), resultMeta{ExitCode: &zero})
	out := Render(Options{Width: 40}, s.events)
	for l := range strings.SplitSeq(strings.TrimRight(string(out), "\n"), "\n") {
		if n := len([]rune(l)); n > 40 {
			t.Errorf("line of %d runes exceeds the width: %q", n, l)
		}
	}
}

// TestBadEventsDoNotPanic: malformed payloads and unknown types render
// nothing rather than failing.
func TestBadEventsDoNotPanic(t *testing.T) {
	var events []session.Event
	for _, typ := range []string{session.TypeStepStart, session.TypeAssistantChunk, session.TypeAssistantMsg, session.TypeToolCall,
		session.TypeToolResult, session.TypeLLMRetry, session.TypeSubagentStart, session.TypeSubagentEnd, "x/unknown"} {
		events = append(events, session.Event{Type: typ, Data: json.RawMessage(`{"broken":`)})
	}
	events = append(events, session.Event{Type: session.TypeToolResult, Data: json.RawMessage(`{"callId":"z","name":"bash","meta":{"exitCode":"nope"}}`)})
	out := Render(terminal, events)
	if !bytes.Contains(out, []byte("1 tool call")) {
		t.Fatalf("closing line missing: %q", out)
	}
}

// TestRecordedEditSession renders the events a real dsh run logged
// (dsh run --json against the scripted fake model doing the README's
// edit task, docs/capture/script.json; the request and user events,
// which render nothing, are left out of the recording).
func TestRecordedEditSession(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("testdata", "recorded-edit.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var events []session.Event
	for l := range strings.SplitSeq(strings.TrimSpace(string(b)), "\n") {
		var e session.Event
		if err := json.Unmarshal([]byte(l), &e); err != nil {
			t.Fatalf("%q: %v", l, err)
		}
		events = append(events, e)
	}
	golden(t, "recorded-edit.plain", Render(plain, events))
	golden(t, "recorded-edit.tty", visible(Render(terminal, events)))
}

// TestControlBytesFromTheModelAreDropped: escape sequences in model text,
// tool arguments or tool output never reach the terminal.
func TestControlBytesFromTheModelAreDropped(t *testing.T) {
	zero := 0
	s := newScript(t).step(1).
		stream(0, llm.BlockReasoning, "think \x1b]0;pwned\x07").
		stream(1, llm.BlockText, "red \x1b[31mtext\x1b[0m\r\n").
		tool("c1", "bash", `{"command":"echo \u001b[2J"}`, ok(""), resultMeta{ExitCode: &zero}).
		tool("e1", "edit", `{"file_path":"a"}`, ok(""), map[string]any{"diff": "@@ -1 +1 @@\n-\x1b[2Jold\n+new\n"})
	for _, o := range []Options{plain, terminal} {
		out := string(Render(o, s.events))
		for _, bad := range []string{"\x1b]", "\x1b[31mtext", "\x1b[2J", "\x07"} {
			if strings.Contains(out, bad) {
				t.Errorf("%q reached the terminal: %q", bad, out)
			}
		}
		if !strings.Contains(out, "red [31mtext[0m") {
			t.Errorf("text lost: %q", out)
		}
	}
}

// TestNoRunningLineWhenApprovalsMayAsk: with the ask policy a call may
// put a prompt on the terminal, which a late status line would erase, so
// no "running" line is shown; with never it is.
func TestNoRunningLineWhenApprovalsMayAsk(t *testing.T) {
	zero := 0
	for policy, want := range map[string]bool{"ask": false, "never": true} {
		s := newScript(t).add(session.TypeApprovalPolicy, map[string]string{"policy": policy}).step(1).
			add(session.TypeToolCall, session.ToolCall{CallID: "c", Name: "bash", Arguments: `{"command":"ls"}`}).
			add(session.TypeApprovalAsked, map[string]string{"callId": "c"}).
			add(session.TypeToolResult, session.ToolResult{CallID: "c", Name: "bash", Meta: mustJSON(t, resultMeta{ExitCode: &zero})})
		out := string(Render(terminal, s.events))
		if got := strings.Contains(out, "running bash ls"); got != want {
			t.Errorf("policy %s: running line shown = %v, want %v:\n%q", policy, got, want, out)
		}
		if !strings.Contains(out, "bash ls\x1b[0m \x1b[2m— exit 0") {
			t.Errorf("policy %s: no result line:\n%q", policy, out)
		}
	}
}

func mustJSON(t *testing.T, v any) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestRetryCountdown: between a retry notice and the new attempt the
// transient line counts down to it; then it waits for the first byte.
func TestRetryCountdown(t *testing.T) {
	s := newScript(t).step(1).
		add(session.TypeLLMRetry, session.LLMRetry{Retry: 2, MaxRetries: 5, DelayMs: 4100,
			Failure: &llm.Failure{Code: "TRANSPORT", Message: "dial tcp 127.0.0.1:9: connect: connection refused"}})
	at := time.UnixMilli(s.now)
	r := New(terminal)
	var out []byte
	for _, e := range s.events {
		out = append(out, r.Event(e)...)
	}
	out = append(out, r.Tick(at.Add(1500*time.Millisecond))...)
	rest := newScript(t)
	rest.now = s.now + 4100
	rest.add(session.TypeLLMRetryStart, session.LLMRetryStarted{Retry: 2})
	for _, e := range rest.events {
		out = append(out, r.Event(e)...)
	}
	out = append(out, r.Tick(at.Add(6200*time.Millisecond))...)
	golden(t, "retry-countdown.tty", visible(out))
}
