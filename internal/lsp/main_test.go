package lsp

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"testing"

	"github.com/dsh-dev/dsh/internal/jsonrpc"
	"github.com/dsh-dev/dsh/internal/leakcheck"
)

func TestMain(m *testing.M) {
	if mode := os.Getenv("DSH_FAKE_LSP"); mode != "" {
		os.Exit(fakeServer(mode))
	}
	os.Exit(leakcheck.Run(m))
}

// fakeCommand is the command that runs this test binary as a fake
// language server in mode.
func fakeCommand(mode string) ServerConfig {
	return ServerConfig{Command: []string{os.Args[0]}, Env: map[string]string{"DSH_FAKE_LSP": mode}}
}

// fakeServer is a scripted language server over stdin/stdout. Modes:
// utf8 (positionEncoding utf-8; definition answers a LocationLink at the
// position it received, hover a MarkedString list naming it), crash (dies
// on any request after initialize), hang (never answers one), error
// (answers with an error), garbage (answers with a frame that is not
// JSON).
func fakeServer(mode string) int {
	var conn *jsonrpc.Conn
	exit := make(chan int, 1)
	conn = jsonrpc.NewConn(os.Stdin, os.Stdout, jsonrpc.Options{
		Dialect: jsonrpc.V2, Framing: jsonrpc.Headers,
		OnNotification: func(method string, _ json.RawMessage) {
			if method == "exit" {
				exit <- 0
			}
		},
		OnRequest: func(ctx context.Context, method string, params json.RawMessage) (any, *jsonrpc.Error) {
			switch method {
			case "initialize":
				caps := map[string]any{}
				if mode == "utf8" {
					caps["positionEncoding"] = "utf-8"
				}
				return map[string]any{"capabilities": caps}, nil
			case "shutdown":
				return nil, nil
			}
			var p struct {
				TextDocument struct {
					URI string `json:"uri"`
				} `json:"textDocument"`
				Position Pos `json:"position"`
			}
			_ = json.Unmarshal(params, &p)
			switch mode {
			case "crash":
				fmt.Fprintln(os.Stderr, "fake server: boom")
				os.Exit(7)
			case "hang":
				<-ctx.Done()
				return nil, nil
			case "garbage":
				_, _ = os.Stdout.WriteString("Content-Length: 3\r\n\r\nabc")
				<-ctx.Done()
				return nil, nil
			case "error":
				return nil, &jsonrpc.Error{Code: -32603, Message: "no identifier found"}
			}
			r := Range{Start: p.Position, End: p.Position}
			if method == "textDocument/hover" {
				return map[string]any{"contents": []any{
					map[string]string{"language": "go", "value": fmt.Sprintf("at %d:%d", p.Position.Line, p.Position.Character)},
					"plain text",
				}}, nil
			}
			return []any{map[string]any{"targetUri": p.TextDocument.URI, "targetRange": r, "targetSelectionRange": r}}, nil
		},
	})
	select {
	case code := <-exit:
		return code
	case <-conn.Done():
		return 0
	}
}
