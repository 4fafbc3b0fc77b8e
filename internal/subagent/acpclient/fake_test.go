package acpclient_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/dsh-dev/dsh/internal/jsonrpc"
)

// The test binary doubles as a fake ACP agent when fakeEnv is set; its
// value is a comma-separated list of behaviours:
//
//	perm        ask session/request_permission first and echo the answer
//	wait        block until session/cancel, then answer "cancelled"
//	hang        print the pid to fakeFifo and block forever, ignoring cancel
//	grandchild  start "sleep" in the group and print its pid to fakeFifo
//	exit        write to stderr and exit 3 during the prompt
//	badinit     exit 2 during initialize
const (
	fakeEnv  = "ACPCLIENT_FAKE"
	fakeFifo = "ACPCLIENT_FIFO"
)

func TestMain(m *testing.M) {
	if mode, ok := os.LookupEnv(fakeEnv); ok {
		os.Exit(fakeAgent(strings.Split(mode, ",")))
	}
	os.Exit(m.Run())
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
	chunk := func(text string) {
		_ = conn.Notify("session/update", map[string]any{"sessionId": "s1", "update": map[string]any{
			"sessionUpdate": "agent_message_chunk", "content": map[string]string{"type": "text", "text": text}}})
	}
	conn = jsonrpc.NewConn(os.Stdin, os.Stdout, jsonrpc.Options{
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
				_ = conn.Notify("session/update", map[string]any{"sessionId": "s1", "update": map[string]any{
					"sessionUpdate": "tool_call", "toolCallId": "c1", "title": "touch x", "kind": "execute", "status": "pending"}})
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
				_ = conn.Notify("session/update", map[string]any{"sessionId": "s1", "update": map[string]any{
					"sessionUpdate": "tool_call_update", "toolCallId": "c1", "status": "completed"}})
				return map[string]any{"stopReason": "end_turn", "usage": map[string]any{"inputTokens": 7, "outputTokens": 3, "totalTokens": 10}}, nil
			}
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: method}
		},
	})
	close(ready)
	<-conn.Done()
	return 0
}
