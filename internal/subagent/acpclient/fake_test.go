package acpclient_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/dsh-dev/dsh/internal/jsonrpc"
	"github.com/dsh-dev/dsh/internal/leakcheck"
)

// The test binary doubles as a fake ACP agent when fakeEnv is set; its
// value is a comma-separated list of behaviours:
//
//	perm        ask session/request_permission first and echo the answer
//	wait        block until session/cancel, then answer "cancelled"
//	hang        print the pid to fakeFifo and block forever, ignoring cancel
//	grandchild  start "sleep" in the group and print its pid to fakeFifo
//	exit        write to stderr and exit 3 during the prompt
//	die         announce tool call c1, then write to stderr and exit 3
//	badinit     exit 2 during initialize
//	tools       play toolsScript (every update variant, tool calls
//	            started, updated, finished and left in_progress, plans,
//	            messages, malformed and foreign updates) and end the turn
//	late        answer the prompt, then keep announcing tool calls
//	            late-0, late-1, … until writing fails
//	deaf        stop reading standard input for good after its first
//	            64 KiB (inside a large prompt) and print "deaf" to fakeFifo
//
// When fakeResult is set, its value (raw JSON) is the prompt's result
// instead of end_turn with usage.
const (
	fakeEnv    = "ACPCLIENT_FAKE"
	fakeFifo   = "ACPCLIENT_FIFO"
	fakeResult = "ACPCLIENT_RESULT"
)

// toolsScript is the update sequence of the "tools" behaviour, in wire
// order; entries with a "sessionId" key are sent for that session instead
// of s1. toolsProgress and toolsDiagnostic are what the client must make of
// it.
var toolsScript = []map[string]any{
	{"sessionUpdate": "available_commands_update", "availableCommands": []any{map[string]any{"name": "review", "description": "Review", "input": map[string]string{"hint": "what"}}}},
	{"sessionUpdate": "current_mode_update", "currentModeId": "auto"},
	{"sessionUpdate": "user_message_chunk", "content": map[string]string{"type": "text", "text": "do it"}},
	{"sessionUpdate": "agent_thought_chunk", "content": map[string]string{"type": "text", "text": "hmm"}, "messageId": "t1"},
	{"sessionUpdate": "agent_message_chunk", "content": map[string]string{"type": "text", "text": "Let me look"}, "messageId": "m1"},
	{"sessionUpdate": "agent_message_chunk", "content": map[string]string{"type": "text", "text": " at it."}, "messageId": "m1"},
	{"sessionUpdate": "tool_call", "toolCallId": "c1", "title": "read a.go", "kind": "read", "status": "pending",
		"locations": []any{map[string]any{"path": "/w/a.go", "line": 1}}, "rawInput": map[string]any{"path": "a.go"}},
	{"sessionUpdate": "tool_call_update", "toolCallId": "c1", "status": "in_progress"},
	{"sessionUpdate": "tool_call_update", "toolCallId": "c1", "content": []any{map[string]any{"type": "content", "content": map[string]string{"type": "text", "text": "package a"}}}},
	{"sessionUpdate": "tool_call_update", "toolCallId": "c1", "status": "completed", "rawOutput": map[string]any{"bytes": 9}},
	{"sessionUpdate": "plan", "entries": []any{
		map[string]string{"content": "Read code", "priority": "high", "status": "completed"},
		map[string]string{"content": "Edit\ncode", "priority": "medium", "status": "in_progress"},
		"not an entry",
		map[string]string{"content": "Run tests", "priority": "low", "status": "pending"},
	}},
	{"sessionUpdate": "plan", "entries": []any{
		map[string]string{"content": "Read code", "priority": "high", "status": "completed"},
		map[string]string{"content": "Edit\ncode", "priority": "medium", "status": "in_progress"},
		map[string]string{"content": "Run tests", "priority": "low", "status": "pending"},
	}},
	{"sessionUpdate": "plan", "entries": "bogus"},
	{"sessionUpdate": "usage_update", "used": 110, "size": 258400, "cost": map[string]any{"amount": 0.01, "currency": "USD"}},
	{"sessionUpdate": "agent_message_chunk", "content": map[string]string{"type": "text", "text": "Now editing."}, "messageId": "m2"},
	{"sessionUpdate": "agent_message_chunk", "content": map[string]string{"type": "text", "text": "Second\nthought."}, "messageId": "m3"},
	{"sessionUpdate": "tool_call", "toolCallId": "c2", "title": "edit\nb.go", "kind": "edit", "status": "in_progress",
		"content": []any{map[string]any{"type": "diff", "path": "/w/b.go", "oldText": nil, "newText": "x\n"}}},
	{"sessionId": "other", "sessionUpdate": "tool_call", "toolCallId": "x9", "title": "foreign", "status": "in_progress"},
	{"sessionUpdate": "tool_call_update", "toolCallId": "c2", "status": "failed", "kind": nil, "title": nil},
	{"sessionUpdate": "tool_call", "toolCallId": "c4", "title": 42, "kind": "execute", "status": "pending"},
	{"sessionUpdate": "tool_call_update", "toolCallId": "c4", "title": "ls", "status": "completed",
		"content": []any{map[string]any{"type": "terminal", "terminalId": "t1"}}},
	{"sessionUpdate": "tool_call_update", "toolCallId": "c4", "status": "completed"},
	{"sessionUpdate": "tool_call", "toolCallId": "c3", "title": "make test", "kind": "execute", "status": "in_progress"},
	{"sessionUpdate": "config_option_update", "configOptions": []any{}},
	{"sessionUpdate": "session_info_update", "title": "t"},
	{"sessionUpdate": "future_variant", "x": 1},
	{"sessionUpdate": "agent_message_chunk", "content": map[string]string{"type": "image", "data": "AA==", "mimeType": "image/png"}, "messageId": "m4"},
	{"sessionUpdate": "agent_message_chunk", "content": map[string]string{"type": "text", "text": "Done."}, "messageId": "m4"},
}

var toolsProgress = []string{
	"agent: Let me look at it.",
	"tool c1 [read] read a.go: started",
	"tool c1 read a.go: completed",
	"plan: [x] Read code; [>] Edit code; [ ] Run tests",
	"agent: Now editing.",
	"agent: Second thought.",
	"tool c2 [edit] edit b.go: started",
	"tool c2 edit b.go: failed",
	"tool c4 [execute]: started",
	"tool c4 ls: completed",
	"tool c3 [execute] make test: started",
	"agent: Done.",
	"tool c3 make test: closed (prompt ended while in_progress)",
}

const toolsOutput = "Let me look at it.\n\nNow editing.\n\nSecond\nthought.\n\nDone."

const toolsDiagnostic = `1 tool call left open when the prompt ended
tool c1 [read] read a.go: pending
tool c1 read a.go: in_progress
tool c1 read a.go: completed
tool c2 [edit] edit b.go: in_progress
tool c2 edit b.go: failed
tool c4 [execute]: pending
tool c4 ls: completed
tool c3 [execute] make test: in_progress
tool c3 make test: closed (prompt ended while in_progress)`

func TestMain(m *testing.M) {
	if mode, ok := os.LookupEnv(fakeEnv); ok {
		os.Exit(fakeAgent(strings.Split(mode, ",")))
	}
	os.Exit(leakcheck.Run(m))
}

// deafReader passes its first bytes through, then blocks for ever.
type deafReader struct {
	r     io.Reader
	n     int
	after int
}

func (d *deafReader) Read(b []byte) (int, error) {
	if d.n >= d.after {
		report("deaf")
		select {}
	}
	k, err := d.r.Read(b[:min(len(b), d.after-d.n)])
	d.n += k
	return k, err
}

func has(modes []string, m string) bool {
	for _, x := range modes {
		if x == m {
			return true
		}
	}
	return false
}

func report(line string) {
	f, err := os.OpenFile(os.Getenv(fakeFifo), os.O_WRONLY, 0)
	if err != nil {
		fmt.Fprintln(os.Stderr, "fifo:", err)
		return
	}
	fmt.Fprintln(f, line)
	f.Close()
}

func fakeAgent(modes []string) int {
	ready := make(chan struct{})
	cancelled := make(chan struct{}, 1)
	var conn *jsonrpc.Conn
	send := func(u map[string]any) error {
		sid := "s1"
		if s, ok := u["sessionId"].(string); ok {
			sid = s
			u = maps.Clone(u)
			delete(u, "sessionId")
		}
		return conn.Notify("session/update", map[string]any{"sessionId": sid, "update": u})
	}
	chunk := func(text string) {
		_ = send(map[string]any{"sessionUpdate": "agent_message_chunk", "content": map[string]string{"type": "text", "text": text}})
	}
	result := func() any {
		if r, ok := os.LookupEnv(fakeResult); ok {
			return json.RawMessage(r)
		}
		return map[string]any{"stopReason": "end_turn", "usage": map[string]any{"inputTokens": 7, "outputTokens": 3, "totalTokens": 10}}
	}
	var stdin io.Reader = os.Stdin
	if has(modes, "deaf") {
		stdin = &deafReader{r: os.Stdin, after: 64 << 10}
	}
	conn = jsonrpc.NewConn(stdin, os.Stdout, jsonrpc.Options{
		Dialect: jsonrpc.V2,
		OnNotification: func(method string, _ json.RawMessage) {
			if method == "session/cancel" {
				select {
				case cancelled <- struct{}{}:
				default:
				}
			}
		},
		OnRequest: func(ctx context.Context, method string, params json.RawMessage) (any, *jsonrpc.Error) {
			<-ready
			switch method {
			case "initialize":
				if has(modes, "badinit") {
					fmt.Fprintln(os.Stderr, "fatal: cannot initialize")
					os.Exit(2)
				}
				return map[string]any{"protocolVersion": 1, "agentCapabilities": map[string]any{}, "authMethods": []any{}}, nil
			case "session/new":
				var p struct {
					Cwd string `json:"cwd"`
				}
				_ = json.Unmarshal(params, &p)
				fmt.Fprintln(os.Stderr, "cwd="+p.Cwd)
				return map[string]any{"sessionId": "s1"}, nil
			case "session/prompt":
				if has(modes, "exit") {
					fmt.Fprintln(os.Stderr, "fatal: boom")
					os.Exit(3)
				}
				if has(modes, "grandchild") {
					c := exec.Command("sleep", "1000")
					if err := c.Start(); err != nil {
						return nil, &jsonrpc.Error{Code: 1, Message: err.Error()}
					}
					report(fmt.Sprint(c.Process.Pid))
				}
				if has(modes, "hang") {
					report(fmt.Sprint(os.Getpid()))
					select {}
				}
				if has(modes, "tools") {
					for _, u := range toolsScript {
						if err := send(u); err != nil {
							return nil, &jsonrpc.Error{Code: 1, Message: err.Error()}
						}
					}
					return result(), nil
				}
				_ = send(map[string]any{"sessionUpdate": "tool_call", "toolCallId": "c1", "title": "touch x", "kind": "execute", "status": "pending"})
				if has(modes, "die") {
					fmt.Fprintln(os.Stderr, "fatal: died")
					os.Exit(3)
				}
				if has(modes, "perm") {
					var out struct {
						Outcome struct {
							Outcome  string `json:"outcome"`
							OptionID string `json:"optionId"`
						} `json:"outcome"`
					}
					err := conn.Call(ctx, "session/request_permission", map[string]any{
						"sessionId": "s1", "toolCall": map[string]any{"toolCallId": "c1"},
						"options": []map[string]string{
							{"optionId": "yes", "name": "Yes", "kind": "allow_once"},
							{"optionId": "always", "name": "Always", "kind": "allow_always"},
							{"optionId": "no", "name": "No", "kind": "reject_once"},
						}}, &out)
					if err != nil {
						return nil, &jsonrpc.Error{Code: 1, Message: err.Error()}
					}
					chunk("perm=" + out.Outcome.Outcome + ":" + out.Outcome.OptionID + " ")
				}
				if has(modes, "wait") {
					chunk("working ")
					<-cancelled
					return map[string]any{"stopReason": "cancelled"}, nil
				}
				chunk("hello ")
				chunk("world")
				_ = send(map[string]any{"sessionUpdate": "tool_call_update", "toolCallId": "c1", "status": "completed"})
				if has(modes, "late") {
					// Races the answer below: some of these reach the client
					// before it, the rest after it. The client's teardown
					// ends the loop by failing the write.
					go func() {
						for i := 0; i < 1_000_000; i++ {
							if send(map[string]any{"sessionUpdate": "tool_call", "toolCallId": fmt.Sprint("late-", i), "title": "late", "status": "in_progress"}) != nil {
								return
							}
						}
					}()
				}
				return result(), nil
			}
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: method}
		},
	})
	close(ready)
	<-conn.Done()
	return 0
}
