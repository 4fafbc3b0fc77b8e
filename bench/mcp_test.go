package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dsh-dev/dsh/internal/llm/llmtest"
	"github.com/dsh-dev/dsh/internal/mcp"
	"github.com/dsh-dev/dsh/internal/mcp/mcptest"
	"github.com/dsh-dev/dsh/internal/tool"
	toolsmcp "github.com/dsh-dev/dsh/internal/tools/mcp"
)

// BenchmarkMCPFirstRequest is BenchmarkFirstRequest with 0, 1 and 3
// stdio MCP servers (server-everything) configured: dsh connects to every
// server (handshake and tool listing) before the first turn, in
// parallel, so 3 servers cost about what 1 does.
func BenchmarkMCPFirstRequest(b *testing.B) {
	everything := mcptest.Everything(b)
	// slow starts the server after a second of sleep: a start-up bound
	// by latency rather than CPU, where parallel and serial differ most
	// clearly on a 2-core machine.
	slow := filepath.Join(b.TempDir(), "slow.sh")
	if err := os.WriteFile(slow, []byte("#!/bin/sh\nsleep 1\nexec "+everything+"\n"), 0o755); err != nil {
		b.Fatal(err)
	}
	for _, tc := range []struct {
		n    int
		bin  string
		name string
	}{{0, everything, "servers=0"}, {1, everything, "servers=1"}, {3, everything, "servers=3"}, {1, slow, "servers=1,sleep=1s"}, {3, slow, "servers=3,sleep=1s"}} {
		n, bin := tc.n, tc.bin
		b.Run(tc.name, func(b *testing.B) {
			dshBinary(b)
			srv := llmtest.New()
			defer srv.Close()
			srv.SetFallback(func(llmtest.Request) llmtest.Response { return llmtest.Response{Text: "ok"} })
			home := b.TempDir()
			var cfg strings.Builder
			cfg.WriteString("mcp_servers:\n")
			for i := range n {
				fmt.Fprintf(&cfg, "  - {name: s%d, command: %s, approval: auto}\n", i, bin)
			}
			if n == 0 {
				cfg.Reset()
			}
			if err := os.WriteFile(filepath.Join(home, "config.yaml"), []byte(cfg.String()), 0o600); err != nil {
				b.Fatal(err)
			}
			var total time.Duration
			b.ResetTimer()
			for i := range b.N {
				c := dshCmd(b, home, srv.URL(), "run", "hi")
				t0 := time.Now()
				if err := c.Start(); err != nil {
					b.Fatal(err)
				}
				if err := srv.WaitRequests(context.Background(), i+1); err != nil {
					b.Fatal(err)
				}
				total += time.Since(t0)
				if err := c.Wait(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(total)/float64(time.Millisecond)/float64(b.N), "ms-to-first-request")
		})
	}
}

// BenchmarkMCPEchoCall measures one echo call to server-everything three
// ways: a minimal hand-written JSON-RPC client on the server's pipes (the
// server's own time plus the pipe: the baseline), the SDK client dsh uses
// (Server.CallTool), and the whole tool pipeline through the bridge
// (what a model's call costs). The differences are dsh's overhead.
func BenchmarkMCPEchoCall(b *testing.B) {
	bin := mcptest.Everything(b)
	b.Run("raw-jsonrpc", func(b *testing.B) {
		cmd := exec.Command(bin)
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		in, _ := cmd.StdinPipe()
		outPipe, _ := cmd.StdoutPipe()
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		defer func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); _ = cmd.Wait() }()
		out := bufio.NewReader(outPipe)
		id := 0
		call := func(method string, params any, notify bool) {
			msg := map[string]any{"jsonrpc": "2.0", "method": method, "params": params}
			if !notify {
				id++
				msg["id"] = id
			}
			line, _ := json.Marshal(msg)
			if _, err := in.Write(append(line, '\n')); err != nil {
				b.Fatal(err)
			}
			if notify {
				return
			}
			for {
				l, err := out.ReadBytes('\n')
				if err != nil {
					b.Fatal(err)
				}
				var resp struct {
					ID *int `json:"id"`
				}
				if json.Unmarshal(l, &resp) == nil && resp.ID != nil && *resp.ID == id {
					return
				}
			}
		}
		call("initialize", map[string]any{"protocolVersion": "2025-06-18", "capabilities": map[string]any{}, "clientInfo": map[string]any{"name": "bench", "version": "1"}}, false)
		call("notifications/initialized", map[string]any{}, true)
		b.ResetTimer()
		for range b.N {
			call("tools/call", map[string]any{"name": "echo", "arguments": map[string]any{"message": "hi"}}, false)
		}
	})
	m, err := mcp.Start(context.Background(), []mcp.ServerConfig{{Name: "everything", Command: bin, Approval: mcp.ApprovalAuto}}, mcp.Options{Dir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	s, _ := m.Server("everything")
	b.Run("sdk-client", func(b *testing.B) {
		for range b.N {
			if _, err := s.CallTool(context.Background(), "echo", json.RawMessage(`{"message":"hi"}`)); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("tool-pipeline", func(b *testing.B) {
		reg := tool.NewRegistry()
		br := toolsmcp.Bind(reg, m.Servers(), toolsmcp.Options{})
		defer br.Close()
		p := tool.NewPipeline(reg)
		p.UsePreExecute(br.PreExecute)
		for i := range b.N {
			r := p.Run(context.Background(), &tool.Call{ID: fmt.Sprint(i), Name: "mcp__everything__echo", RawArguments: `{"message":"hi"}`})
			if r.IsError {
				b.Fatal(r.Error)
			}
		}
	})
}
