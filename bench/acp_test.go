package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dsh-dev/dsh/internal/acp"
	"github.com/dsh-dev/dsh/internal/app"
	"github.com/dsh-dev/dsh/internal/host"
	"github.com/dsh-dev/dsh/internal/jsonrpc"
	"github.com/dsh-dev/dsh/internal/llm"
	"github.com/dsh-dev/dsh/internal/llm/llmtest"
	"github.com/dsh-dev/dsh/internal/session"
)

// BenchmarkACPInitialize spawns the real `dsh acp` and times it from the
// spawn to the initialize answer on its stdout; then stdin EOF ends it.
func BenchmarkACPInitialize(b *testing.B) {
	srv := llmtest.New()
	defer srv.Close()
	home := b.TempDir()
	var total time.Duration
	for range b.N {
		c := dshCmd(b, home, srv.URL(), "acp")
		in, err := c.StdinPipe()
		if err != nil {
			b.Fatal(err)
		}
		out, err := c.StdoutPipe()
		if err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		if err := c.Start(); err != nil {
			b.Fatal(err)
		}
		if _, err := io.WriteString(in, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}}`+"\n"); err != nil {
			b.Fatal(err)
		}
		line, err := bufio.NewReader(out).ReadString('\n')
		if err != nil || !strings.Contains(line, `"protocolVersion":1`) {
			b.Fatalf("initialize: %q %v", line, err)
		}
		total += time.Since(start)
		in.Close()
		if err := c.Wait(); err != nil {
			b.Fatalf("dsh acp exit: %v", err)
		}
	}
	b.ReportMetric(float64(total.Microseconds())/1000/float64(b.N), "ms-to-initialize")
}

// BenchmarkACPUpdateLatency runs the ACP server in process over pipes and
// measures, for every streamed text delta of a 500-chunk answer, the time
// from the assistant/chunk append (a log observer) to its
// agent_message_chunk frame read from the server's stdout.
func BenchmarkACPUpdateLatency(b *testing.B) {
	srv := llmtest.New()
	defer srv.Close()
	b.Setenv("DSH_HOME", b.TempDir())
	b.Setenv("DEEPSEEK_API_KEY", "k")
	b.Setenv("DEEPSEEK_BASE_URL", srv.URL())
	a, err := app.Open(context.Background(), app.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer a.Close()
	h, err := host.New(host.Config{App: a, Holder: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	defer h.Close(context.Background())
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	served := make(chan error, 1)
	go func() { served <- acp.Serve(context.Background(), h, inR, outW, acp.Options{}); outW.Close() }()

	var mu sync.Mutex
	var frames []time.Time // arrival of each agent_message_chunk frame
	client := jsonrpc.NewConn(outR, inW, jsonrpc.Options{Dialect: jsonrpc.V2,
		OnNotification: func(method string, params json.RawMessage) {
			now := time.Now()
			if strings.Contains(string(params), `"agent_message_chunk"`) {
				mu.Lock()
				frames = append(frames, now)
				mu.Unlock()
			}
		}})
	ctx := context.Background()
	if err := client.Call(ctx, "initialize", map[string]any{"protocolVersion": 1}, nil); err != nil {
		b.Fatal(err)
	}
	var lat []time.Duration
	for range b.N {
		var ns struct {
			SessionID string `json:"sessionId"`
		}
		if err := client.Call(ctx, "session/new", map[string]any{"cwd": b.TempDir(), "mcpServers": []any{}}, &ns); err != nil {
			b.Fatal(err)
		}
		log, ok := h.Log(ns.SessionID)
		if !ok {
			b.Fatal("session not live")
		}
		var appended []time.Time
		var amu sync.Mutex
		log.Observe(func(e session.Event) {
			if e.Type != session.TypeAssistantChunk {
				return
			}
			var p session.AssistantChunk
			if e.Decode(&p) == nil && p.Chunk.Type == llm.ChunkTextDelta && p.Chunk.Text != "" {
				amu.Lock()
				appended = append(appended, time.Now())
				amu.Unlock()
			}
		})
		mu.Lock()
		frames = frames[:0]
		mu.Unlock()
		srv.Enqueue(llmtest.Response{Text: strings.Repeat("abcd", 500), ChunkRunes: 4})
		if err := client.Call(ctx, "session/prompt", map[string]any{"sessionId": ns.SessionID,
			"prompt": []any{map[string]string{"type": "text", "text": "go"}}}, nil); err != nil {
			b.Fatal(err)
		}
		mu.Lock()
		amu.Lock()
		if len(frames) != len(appended) {
			b.Fatalf("%d frames for %d chunks", len(frames), len(appended))
		}
		for i := range frames {
			lat = append(lat, frames[i].Sub(appended[i]))
		}
		amu.Unlock()
		mu.Unlock()
	}
	inW.Close()
	<-served
	client.Close()
	slices.Sort(lat)
	pct := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))].Microseconds()) / 1000 }
	b.ReportMetric(pct(0.5), "p50-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
	b.ReportMetric(float64(len(lat))/float64(b.N), "updates/op")
}
