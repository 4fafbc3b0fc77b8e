package rpc_test

import (
	"context"
	"io"
	"testing"

	"github.com/dsh-dev/dsh/internal/host"
	"github.com/dsh-dev/dsh/internal/jsonrpc/jsonrpctest"
	"github.com/dsh-dev/dsh/internal/rpc"
)

// FuzzDispatch feeds arbitrary frames to dsh rpc's real method table
// (over a real session host), then ends the input: Serve must return,
// never panic, and write only valid JSON-RPC, at most one answer per
// request.
func FuzzDispatch(f *testing.F) {
	init := `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"clientInfo":{"name":"fuzz"}}}`
	seeds := []string{
		`{"jsonrpc":"2.0","id":1,"method":"session/create","params":{"cwd":"/tmp"}}`,
		`{"jsonrpc":"2.0","id":1,"method":"session/create","params":{"cwd":"relative","model":"x/y","permission":"nope"}}`,
		`{"jsonrpc":"2.0","id":2,"method":"session/list","params":{"limit":-1,"cursor":"zz"}}`,
		`{"jsonrpc":"2.0","id":3,"method":"session/get","params":{"sessionId":""}}`,
		`{"jsonrpc":"2.0","id":4,"method":"session/events","params":{"sessionId":"0","after":-5,"limit":1000000}}`,
		`{"jsonrpc":"2.0","id":5,"method":"session/prompt","params":{"sessionId":"0","content":[{"type":"image","mediaType":"x","data":"!!"}]}}`,
		`{"jsonrpc":"2.0","id":6,"method":"session/cancel","params":{"sessionId":"x","clearQueue":"yes"}}`,
		`{"jsonrpc":"2.0","id":7,"method":"approval/respond","params":{"sessionId":"a","approvalId":"b","decision":"allow-always"}}`,
		`{"jsonrpc":"2.0","id":8,"method":"question/respond","params":{"sessionId":"a","questionId":"b","answers":{"q":["x"]}}}`,
		`{"jsonrpc":"2.0","id":9,"method":"session/resume","params":{"sessionId":"a","after":-9}}`,
		`{"jsonrpc":"2.0","id":10,"method":"session/get","params":[1]}` + "\n" + `{"jsonrpc":"2.0","id":10,"method":"session/get","params":"s"}`,
		`[{"jsonrpc":"2.0","id":11,"method":"session/list"}]` + "\nnot json\n" + `{"jsonrpc":"2.0","id":{},"method":"x"}`,
		`{"jsonrpc":"2.0","id":12,"result":{}}` + "\n" + `{"jsonrpc":"2.0","method":"session/cancel","params":null}`,
		`{"jsonrpc":"2.0","id":"s","method":"session/list","params":{"cwd":"\u001b[2J","unknown":1}}`,
	}
	jsonrpctest.FuzzDispatch(f, "rpc fuzz", init, seeds, func(ctx context.Context, h *host.Host, r io.Reader, w io.Writer) error {
		return rpc.Serve(ctx, h, r, w, rpc.Options{})
	})
}
