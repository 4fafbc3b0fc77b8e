package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/dsh-dev/dsh/internal/app"
	"github.com/dsh-dev/dsh/internal/host"
	"github.com/dsh-dev/dsh/internal/llm/llmtest"
	"github.com/dsh-dev/dsh/internal/server"
	"github.com/dsh-dev/dsh/internal/session"
	"github.com/dsh-dev/dsh/internal/workspace"
)

const benchToken = "0000000000000000000000000000000000000000000000000000000000000000"

// BenchmarkServeIdleRSS starts the real dsh serve, asks it for its health
// and the (empty) session list, and reads its resident set size from
// /proc (after exec, so the benchmark's own pages do not count).
func BenchmarkServeIdleRSS(b *testing.B) {
	srv := llmtest.New()
	defer srv.Close()
	var rssKB, hwmKB int64
	for range b.N {
		home := b.TempDir()
		c := dshCmd(b, home, srv.URL(), "serve", "--listen", "127.0.0.1:0")
		out, err := c.StdoutPipe()
		if err != nil {
			b.Fatal(err)
		}
		if err := c.Start(); err != nil {
			b.Fatal(err)
		}
		first, err := bufio.NewReader(out).ReadString('\n')
		if err != nil {
			b.Fatal(err)
		}
		base := strings.TrimSpace(strings.TrimPrefix(first, "dsh serve listening on "))
		tok, err := os.ReadFile(filepath.Join(home, "serve", "token"))
		if err != nil {
			b.Fatal(err)
		}
		for _, p := range []string{"/api/health", "/api/sessions", "/"} {
			req, _ := http.NewRequest("GET", base+p, nil)
			req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(tok)))
			resp, err := http.DefaultClient.Do(req)
			if err != nil || resp.StatusCode != 200 {
				b.Fatalf("GET %s: %v %v", p, resp, err)
			}
			resp.Body.Close()
		}
		status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", c.Process.Pid))
		if err != nil {
			b.Fatal(err)
		}
		rssKB = max(rssKB, procKB(b, status, "VmRSS"))
		hwmKB = max(hwmKB, procKB(b, status, "VmHWM"))
		_ = c.Process.Signal(syscall.SIGTERM)
		if err := c.Wait(); err != nil {
			b.Fatalf("dsh serve exit: %v", err)
		}
	}
	b.ReportMetric(float64(rssKB)/1024, "idle-rss-MB")
	b.ReportMetric(float64(hwmKB)/1024, "peak-rss-MB")
}

func procKB(b *testing.B, status []byte, field string) int64 {
	m := regexp.MustCompile(`(?m)^` + field + `:\s+(\d+) kB`).FindSubmatch(status)
	if m == nil {
		b.Fatalf("no %s in /proc status", field)
	}
	n, _ := strconv.ParseInt(string(m[1]), 10, 64)
	return n
}

// serveEnv is an in-process host and server over a fresh $DSH_HOME.
type serveEnv struct {
	app   *app.App
	host  *host.Host
	ts    *httptest.Server
	srv   *server.Server
	model *llmtest.Server
}

func newServeEnv(b *testing.B) *serveEnv {
	model := llmtest.New()
	home := b.TempDir()
	b.Setenv("DSH_HOME", home)
	b.Setenv("DEEPSEEK_API_KEY", "k")
	b.Setenv("DEEPSEEK_BASE_URL", model.URL())
	cfg := "profile:\n  - {id: codex, module: codex, disabled: true}\n  - {id: claude-code, module: claude-code, disabled: true}\n"
	if err := os.WriteFile(filepath.Join(home, "config.yaml"), []byte(cfg), 0o600); err != nil {
		b.Fatal(err)
	}
	a, err := app.Open(context.Background(), app.Options{})
	if err != nil {
		b.Fatal(err)
	}
	h, err := host.New(host.Config{App: a, Holder: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	ts := httptest.NewUnstartedServer(nil)
	srv := server.New(h, workspace.NewRegistry(a.Store), server.Options{Token: benchToken, Listen: ts.Listener.Addr().String(), App: a})
	ts.Config.Handler = srv
	ts.Start()
	e := &serveEnv{app: a, host: h, ts: ts, srv: srv, model: model}
	b.Cleanup(func() {
		srv.Close()
		ts.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = h.Close(ctx)
		_ = a.Close()
		model.Close()
	})
	return e
}

func (e *serveEnv) get(b *testing.B, path string, hdr map[string]string) *http.Response {
	req, _ := http.NewRequest("GET", e.ts.URL+path, nil)
	req.Header.Set("Authorization", "Bearer "+benchToken)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := e.ts.Client().Do(req)
	if err != nil || resp.StatusCode != 200 {
		b.Fatalf("GET %s: %v %v", path, resp, err)
	}
	return resp
}

// BenchmarkServeSSEFanout100: 100 clients stream one running session;
// the latency is from the log append (an observer's clock) to the event's
// arrival at each client, over every event of a 500-chunk turn.
func BenchmarkServeSSEFanout100(b *testing.B) {
	const subscribers = 100
	e := newServeEnv(b)
	var all []time.Duration
	for range b.N {
		e.model.Enqueue(llmtest.Response{Text: strings.Repeat("word ", 400), ChunkRunes: 4, DelayPerChunk: time.Millisecond})
		info, err := e.host.Create(context.Background(), host.CreateRequest{Cwd: b.TempDir()})
		if err != nil {
			b.Fatal(err)
		}
		id := info.Header.ID
		log, ok := e.host.Log(id)
		if !ok {
			b.Fatal("session not live")
		}
		var mu sync.Mutex
		appended := map[int64]time.Time{}
		log.Observe(func(ev session.Event) {
			now := time.Now()
			mu.Lock()
			appended[ev.Seq] = now
			mu.Unlock()
		})
		streams := make([]*http.Response, subscribers)
		for i := range streams {
			streams[i] = e.get(b, fmt.Sprintf("/api/sessions/%s/stream?after=%d", id, log.Len()-1), nil)
		}
		received := make([]map[int64]time.Time, subscribers)
		var wg sync.WaitGroup
		for i, resp := range streams {
			received[i] = map[int64]time.Time{}
			wg.Go(func() {
				defer resp.Body.Close()
				sc := bufio.NewScanner(resp.Body)
				sc.Buffer(nil, 1<<20)
				var seq int64 = -1
				var typ string
				for sc.Scan() {
					line := sc.Text()
					switch {
					case strings.HasPrefix(line, "id: "):
						seq, _ = strconv.ParseInt(line[4:], 10, 64)
					case strings.HasPrefix(line, "event: "):
						typ = line[7:]
					case line == "" && seq >= 0:
						received[i][seq] = time.Now()
						if typ == session.TypeTurnEnd {
							return
						}
						seq = -1
					}
				}
			})
		}
		body, _ := json.Marshal(map[string]string{"text": "go"})
		req, _ := http.NewRequest("POST", e.ts.URL+"/api/sessions/"+id+"/messages", bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+benchToken)
		req.Header.Set("Content-Type", "application/json")
		resp, err := e.ts.Client().Do(req)
		if err != nil || resp.StatusCode != 202 {
			b.Fatalf("send: %v %v", resp, err)
		}
		resp.Body.Close()
		wg.Wait()
		mu.Lock()
		for _, got := range received {
			for seq, at := range got {
				if t0, ok := appended[seq]; ok {
					all = append(all, at.Sub(t0))
				}
			}
		}
		mu.Unlock()
	}
	slices.Sort(all)
	if len(all) == 0 {
		b.Fatal("nothing measured")
	}
	b.ReportMetric(float64(len(all))/float64(b.N), "deliveries/op")
	b.ReportMetric(float64(all[len(all)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(all[len(all)*99/100].Microseconds())/1000, "p99-ms")
}

// BenchmarkServeListSessions10k: GET /api/sessions over 10,000 stored
// sessions (summaries from the store, no log reads), over loopback: the
// default page (the newest 200) and the whole listing walked through
// every page of the largest size (1000), each from request to decoded
// answer.
func BenchmarkServeListSessions10k(b *testing.B) {
	const n = 10_000
	e := newServeEnv(b)
	ctx := context.Background()
	t0 := time.Now()
	for i := range n {
		h := session.Header{Version: session.FormatVersion, ID: fmt.Sprintf("s-%05d", i), CreatedAt: 1_700_000_000_000 + int64(i), Cwd: "/work"}
		if err := e.app.Store.Create(ctx, h); err != nil {
			b.Fatal(err)
		}
	}
	b.Logf("stored %d sessions in %v", n, time.Since(t0).Round(time.Millisecond))
	page := func(path string) (int, string, int64) {
		resp := e.get(b, path, nil)
		defer resp.Body.Close()
		var out struct {
			Sessions []json.RawMessage `json:"sessions"`
			Next     string            `json:"next"`
		}
		cr := &countingReader{r: resp.Body}
		if err := json.NewDecoder(cr).Decode(&out); err != nil {
			b.Fatal(err)
		}
		return len(out.Sessions), out.Next, cr.n
	}
	b.Run("default-page", func(b *testing.B) {
		var size int64
		for b.Loop() {
			got, next, n := page("/api/sessions")
			if got != 200 || next == "" {
				b.Fatalf("%d sessions, next %q", got, next)
			}
			size = n
		}
		b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N)/1000, "ms/page")
		b.ReportMetric(float64(size)/1e3, "KB/page")
	})
	b.Run("all-pages", func(b *testing.B) {
		var size int64
		for b.Loop() {
			total, before, bytes := 0, "", int64(0)
			for {
				got, next, n := page("/api/sessions?limit=1000&before=" + before)
				total, bytes = total+got, bytes+n
				if next == "" {
					break
				}
				before = next
			}
			if total != n {
				b.Fatalf("%d sessions in all pages", total)
			}
			size = bytes
		}
		b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N)/1000, "ms/listing")
		b.ReportMetric(float64(size)/1e6, "MB/listing")
	})
	b.Run("host.List-all", func(b *testing.B) {
		for b.Loop() {
			if l, err := e.host.List(ctx, host.ListFilter{}); err != nil || len(l) != n {
				b.Fatalf("%d sessions, %v", len(l), err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N)/1000, "ms/list")
	})
}

type countingReader struct {
	r interface{ Read([]byte) (int, error) }
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// BenchmarkServeIdleSessionMemory: heap and goroutines per live, idle
// hosted session (100 sessions created through the host).
func BenchmarkServeIdleSessionMemory(b *testing.B) {
	const n = 100
	e := newServeEnv(b)
	var perHeap, perG float64
	for range b.N {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		g0 := runtime.NumGoroutine()
		for range n {
			if _, err := e.host.Create(context.Background(), host.CreateRequest{Cwd: b.TempDir()}); err != nil {
				b.Fatal(err)
			}
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		perHeap = float64(after.HeapAlloc-before.HeapAlloc) / n
		perG = float64(runtime.NumGoroutine()-g0) / n
	}
	b.ReportMetric(perHeap/1024, "heap-KB/session")
	b.ReportMetric(perG, "goroutines/session")
}
