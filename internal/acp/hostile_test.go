package acp_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/dsh-dev/dsh/internal/acp"
	"github.com/dsh-dev/dsh/internal/jsonrpc"
	"github.com/dsh-dev/dsh/internal/jsonrpc/jsonrpctest"
)

// TestHostileFrames: dsh acp, fed malformed frames and then the end of
// its input, answers each with the JSON-RPC error it calls for, answers
// every request it read (initialize included) before it exits 0, and
// ignores a response nobody asked for. Before, a line that was not JSON
// ended the connection, the other frames got no answer (a client waited
// for ever) and the end of the input dropped every answer not yet
// written.
func TestHostileFrames(t *testing.T) {
	frames := jsonrpctest.HostileFrames("session/new",
		`{"jsonrpc":"2.0","id":6,"method":"session/prompt","params":{"prompt":[{"type":"text","text":"`+strings.Repeat("a", jsonrpc.DefaultMaxLine)+`"}]}}`)
	jsonrpctest.CheckHostileFrames(t, dshBin, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}`, frames, "acp")
}

// TestWrongParamsEveryMethod: params of the wrong JSON type get -32602
// from every method that takes params, and the connection serves on.
func TestWrongParamsEveryMethod(t *testing.T) {
	x := newHarness(t, acp.Options{})
	for _, p := range []string{`[1]`, `"s"`, `7`, `true`} {
		if err := x.call("initialize", json.RawMessage(p), nil); err == nil || err.Code != jsonrpc.CodeInvalidParams {
			t.Errorf("initialize %s: %v", p, err)
		}
	}
	x.init()
	for _, m := range []string{"session/new", "session/load", "session/resume", "session/list", "session/close",
		"session/prompt", "session/set_mode", "session/set_config_option"} {
		for _, p := range []string{`[1]`, `"s"`, `7`, `true`, `{"sessionId":7,"cwd":[]}`} {
			if err := x.call(m, json.RawMessage(p), nil); err == nil || err.Code != jsonrpc.CodeInvalidParams {
				t.Errorf("%s %s: %v", m, p, err)
			}
		}
	}
	x.newSession()
}
