package acp_test

import (
	"context"
	"io"
	"testing"

	"github.com/dsh-dev/dsh/internal/acp"
	"github.com/dsh-dev/dsh/internal/host"
	"github.com/dsh-dev/dsh/internal/jsonrpc/jsonrpctest"
)

// FuzzDispatch feeds arbitrary frames to dsh acp's real method table
// (over a real session host), then ends the input: Serve must return,
// never panic, and write only valid JSON-RPC, at most one answer per
// request.
func FuzzDispatch(f *testing.F) {
	init := `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{"elicitation":{"form":{}}}}}`
	seeds := []string{
		`{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/tmp","mcpServers":[]}}`,
		`{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"rel","mcpServers":[{"name":"a__b","command":"/nonexistent","args":[],"env":[]}]}}`,
		`{"jsonrpc":"2.0","id":2,"method":"session/load","params":{"sessionId":"x","cwd":"/tmp","mcpServers":null}}`,
		`{"jsonrpc":"2.0","id":3,"method":"session/resume","params":{"sessionId":"","cwd":"/"}}`,
		`{"jsonrpc":"2.0","id":4,"method":"session/list","params":{"cwd":"/tmp","cursor":"\u0000"}}`,
		`{"jsonrpc":"2.0","id":5,"method":"session/close","params":{"sessionId":"nope"}}`,
		`{"jsonrpc":"2.0","id":6,"method":"session/prompt","params":{"sessionId":"x","prompt":[{"type":"resource","resource":{"uri":"file:///etc/passwd","text":"t"}},{"type":"image","mimeType":"image/png","data":"!"}]}}`,
		`{"jsonrpc":"2.0","id":7,"method":"session/set_mode","params":{"sessionId":"x","modeId":"yolo"}}`,
		`{"jsonrpc":"2.0","id":8,"method":"session/set_config_option","params":{"sessionId":"x","configId":"model","value":7}}`,
		`{"jsonrpc":"2.0","id":9,"method":"authenticate","params":{"methodId":"x"}}`,
		`{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"x"}}` + "\n" + `{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":3}}`,
		`{"jsonrpc":"2.0","id":10,"method":"session/prompt","params":null}` + "\n" + `{"jsonrpc":"2.0","id":10,"method":"session/prompt","params":[]}`,
		`[{"jsonrpc":"2.0","id":11,"method":"session/list"}]` + "\nnot json\n" + `{"jsonrpc":"2.0","id":{},"method":"x"}`,
		`{"jsonrpc":"2.0","id":0,"result":{"outcome":{"outcome":"selected","optionId":"x"}}}`,
		`{"jsonrpc":"2.0","id":12,"method":"initialize","params":{"protocolVersion":"1"}}`,
	}
	jsonrpctest.FuzzDispatch(f, "acp fuzz", init, seeds, func(ctx context.Context, h *host.Host, r io.Reader, w io.Writer) error {
		return acp.Serve(ctx, h, r, w, acp.Options{})
	})
}
