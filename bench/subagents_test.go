package bench

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/dsh-dev/dsh/internal/app"
	"github.com/dsh-dev/dsh/internal/llm"
	"github.com/dsh-dev/dsh/internal/llm/llmtest"
	"github.com/dsh-dev/dsh/internal/subagent"
)

// BenchmarkConcurrentChildren100 starts 100 in-process subagent children
// at once through the real composition root (stored sessions, full tool
// wiring, sandbox-free profile), holds every child's first model request
// until all 100 are in flight to measure the memory they hold together,
// then lets them answer and waits for all of them.
func BenchmarkConcurrentChildren100(b *testing.B) {
	const n = 100
	srv := llmtest.New()
	defer srv.Close()
	b.Setenv("DSH_HOME", b.TempDir())
	b.Setenv("DEEPSEEK_API_KEY", "k")
	b.Setenv("DEEPSEEK_BASE_URL", srv.URL())
	ctx := context.Background()
	a, err := app.Open(ctx, app.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer a.Close()
	parent, err := a.OpenSession(ctx, app.SessionOptions{Cwd: b.TempDir(), Permission: "full-access"})
	if err != nil {
		b.Fatal(err)
	}
	defer parent.Close()
	svc := a.SubagentService()
	var perChildKB, perChildMs float64
	for range b.N {
		release := make(chan struct{})
		var once sync.Once
		srv.SetFallback(func(llmtest.Request) llmtest.Response {
			<-release
			return llmtest.Response{Text: "child done"}
		})
		base := srv.RequestCount()
		runtime.GC()
		var before runtime.MemStats
		runtime.ReadMemStats(&before)
		t0 := time.Now()
		handles := make([]*subagent.Handle, n)
		for i := range n {
			h, err := svc.Start(ctx, "spawn", subagent.Request{Label: fmt.Sprint("c", i), Prompt: []llm.Block{llm.TextBlock("go")}, Parent: parent.Log})
			if err != nil {
				b.Fatal(err)
			}
			handles[i] = h
		}
		if err := srv.WaitRequests(ctx, base+n); err != nil {
			b.Fatal(err)
		}
		var during runtime.MemStats
		runtime.ReadMemStats(&during)
		once.Do(func() { close(release) })
		for _, h := range handles {
			res, err := h.Wait(ctx)
			if err != nil || res.StopReason != subagent.StopCompleted {
				b.Fatalf("child: %+v %v", res, err)
			}
			_ = h.Dispose()
		}
		perChildMs += float64(time.Since(t0)) / float64(time.Millisecond) / n
		perChildKB += float64(during.HeapAlloc-before.HeapAlloc) / 1024 / n
	}
	b.ReportMetric(perChildMs/float64(b.N), "ms/child")
	b.ReportMetric(perChildKB/float64(b.N), "heap-KB/child")
}
