package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/dsh-dev/dsh/internal/agent"
	"github.com/dsh-dev/dsh/internal/llm"
	"github.com/dsh-dev/dsh/internal/llm/llmtest"
	"github.com/dsh-dev/dsh/internal/llm/openai"
	"github.com/dsh-dev/dsh/internal/proc"
	"github.com/dsh-dev/dsh/internal/session"
	"github.com/dsh-dev/dsh/internal/store/sqlite"
	"github.com/dsh-dev/dsh/internal/tool"
	"github.com/dsh-dev/dsh/internal/tools/bash"
)

const stepArgs = `{"command":"true","description":"no-op"}`

// cpuTime returns user+system CPU of this process and its reaped children.
func cpuTime() time.Duration {
	var self, kids syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &self)
	_ = syscall.Getrusage(syscall.RUSAGE_CHILDREN, &kids)
	tv := func(t syscall.Timeval) time.Duration { return time.Duration(t.Nano()) }
	return tv(self.Utime) + tv(self.Stime) + tv(kids.Utime) + tv(kids.Stime)
}

type sample struct{ wall, cpu time.Duration }

func measure(f func()) sample {
	c0, t0 := cpuTime(), time.Now()
	f()
	return sample{time.Since(t0), cpuTime() - c0}
}

// runAgent runs one N-step bash task through the real loop, adapter,
// pipeline, bash tool and SQLite store.
func runAgent(b *testing.B, srv *llmtest.Server, st *sqlite.Store, steps int) {
	ctx := context.Background()
	id := fmt.Sprintf("bench-%d-%d", steps, time.Now().UnixNano())
	h := session.Header{Version: session.FormatVersion, ID: id, CreatedAt: time.Now().UnixMilli(), Cwd: b.TempDir()}
	if err := st.Create(ctx, h); err != nil {
		b.Fatal(err)
	}
	log, err := session.NewLog(h, nil, st)
	if err != nil {
		b.Fatal(err)
	}
	reg := tool.NewRegistry()
	if err := reg.Register("", bash.New(bash.Options{})); err != nil {
		b.Fatal(err)
	}
	a, err := agent.New(agent.Config{
		Log:      log,
		Route:    agent.Route{Provider: "deepseek", Model: llm.ModelInfo{ID: "deepseek-v4-flash"}, Adapter: openai.New(openai.Config{Provider: "deepseek", BaseURL: srv.URL(), APIKey: "k", DeepSeek: true}), Retry: llm.DefaultRetryPolicy()},
		Tools:    reg,
		Pipeline: tool.NewPipeline(reg),
		System:   "bench",
	})
	if err != nil {
		b.Fatal(err)
	}
	if err := a.Queue(agent.NewUserMessage("run true until done")); err != nil {
		b.Fatal(err)
	}
	out, err := a.Run(ctx)
	if err != nil || out.Reason.Kind != session.EndCompleted {
		b.Fatalf("run: %+v %v", out, err)
	}
}

// modelOnly makes the same model calls the agent makes, with the same
// growing history, straight through the adapter: the model's share.
func modelOnly(b *testing.B, srv *llmtest.Server, steps int) {
	ad := openai.New(openai.Config{Provider: "deepseek", BaseURL: srv.URL(), APIKey: "k", DeepSeek: true})
	msgs := []llm.Message{{ID: "u", Role: llm.RoleUser, Content: []llm.Block{llm.TextBlock("run true until done")}}}
	for i := 0; i <= steps; i++ {
		var asm llm.Assembler
		for ch, err := range ad.Stream(context.Background(), llm.Request{Model: "deepseek-v4-flash", System: "bench", Messages: msgs}) {
			if err != nil {
				b.Fatal(err)
			}
			asm.Add(ch)
		}
		m := llm.Message{ID: fmt.Sprint(i), Role: llm.RoleAssistant, Content: asm.Blocks()}
		msgs = append(msgs, m)
		for _, c := range m.ToolCalls() {
			msgs = append(msgs, session.ToolResultMessage(session.ToolResult{CallID: c.ID, Name: c.Name, Content: []llm.Block{llm.TextBlock("\n[exit code: 0]")}}))
		}
	}
}

// shellOnly runs the same commands without the harness: the shell's share.
func shellOnly(b *testing.B, dir string, steps int) {
	for range steps {
		if _, err := proc.Run(context.Background(), proc.Spec{Argv: []string{"bash", "-c", "true"}, Dir: dir}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkStepOverhead reports the harness's own cost per tool step:
// the wall and CPU time of an N-step run minus the time of the same model
// calls made directly and the same shell commands run directly.
func BenchmarkStepOverhead(b *testing.B) {
	for _, steps := range []int{1, 40} {
		b.Run(fmt.Sprintf("steps=%d", steps), func(b *testing.B) {
			srv := llmtest.New()
			defer srv.Close()
			srv.SetFallback(llmtest.LoopFallback("bash", stepArgs, steps))
			st, err := sqlite.Open(context.Background(), filepath.Join(b.TempDir(), "dsh.db"))
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			dir := b.TempDir()
			// Warm caches and connections once.
			runAgent(b, srv, st, steps)
			var total, model, shell sample
			b.ResetTimer()
			for range b.N {
				s := measure(func() { runAgent(b, srv, st, steps) })
				total.wall += s.wall
				total.cpu += s.cpu
				b.StopTimer()
				s = measure(func() { modelOnly(b, srv, steps) })
				model.wall += s.wall
				model.cpu += s.cpu
				s = measure(func() { shellOnly(b, dir, steps) })
				shell.wall += s.wall
				shell.cpu += s.cpu
				b.StartTimer()
			}
			n := float64(b.N * steps)
			ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) / n }
			b.ReportMetric(ms(total.wall-model.wall-shell.wall), "overhead-ms/step")
			b.ReportMetric(ms(total.cpu-model.cpu-shell.cpu), "overhead-cpu-ms/step")
			b.ReportMetric(ms(total.wall), "total-ms/step")
			b.ReportMetric(ms(model.wall), "model-ms/step")
			b.ReportMetric(ms(shell.wall), "shell-ms/step")
		})
	}
}

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// dshBinary builds dsh once per run; DSH_BENCH_BIN names a binary to
// measure instead (an older build, for before/after figures).
func dshBinary(b *testing.B) string {
	if bin := os.Getenv("DSH_BENCH_BIN"); bin != "" {
		return bin
	}
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "dsh-bench")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "dsh")
		out, err := exec.Command("go", "build", "-o", binPath, "github.com/dsh-dev/dsh/cmd/dsh").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("%v: %s", err, out)
		}
	})
	if buildErr != nil {
		b.Fatal(buildErr)
	}
	return binPath
}

func dshCmd(b *testing.B, home, url string, args ...string) *exec.Cmd {
	c := exec.Command(dshBinary(b), args...)
	c.Dir = b.TempDir()
	c.Env = append(os.Environ(), "DSH_HOME="+home, "DEEPSEEK_API_KEY=k", "DEEPSEEK_BASE_URL="+url)
	return c
}

// BenchmarkRunPeakRSS runs `dsh run` for a 40-step (and a 400-step) bash
// task as a real process and reports its peak resident set size. It needs GNU time
// (/usr/bin/time): Go starts children with vfork, so a child's own rusage
// counts the (large) benchmark process's pages up to its exec, while GNU
// time's fork of dsh does not.
func BenchmarkRunPeakRSS(b *testing.B) {
	for _, steps := range []int{40, 400} {
		b.Run(fmt.Sprintf("steps=%d", steps), func(b *testing.B) { peakRSS(b, steps) })
	}
}

func peakRSS(b *testing.B, steps int) {
	gnuTime, err := exec.LookPath("/usr/bin/time")
	if err != nil {
		b.Skip("needs GNU time (apt-get install time)")
	}
	srv := llmtest.New()
	defer srv.Close()
	srv.SetFallback(llmtest.LoopFallback("bash", stepArgs, steps))
	home := b.TempDir()
	var maxKB int64
	for range b.N {
		rss := filepath.Join(b.TempDir(), "rss")
		c := dshCmd(b, home, srv.URL(), "run", "run true until done")
		c.Args = append([]string{gnuTime, "-f", "%M", "-o", rss, c.Path}, c.Args[1:]...)
		c.Path = gnuTime
		if out, err := c.CombinedOutput(); err != nil {
			b.Fatalf("%v: %s", err, out)
		}
		raw, err := os.ReadFile(rss)
		if err != nil {
			b.Fatal(err)
		}
		var kb int64
		if _, err := fmt.Sscan(string(raw), &kb); err != nil {
			b.Fatalf("parse %q: %v", raw, err)
		}
		maxKB = max(maxKB, kb)
	}
	b.ReportMetric(float64(maxKB)/1024, "peak-rss-MB")
}
