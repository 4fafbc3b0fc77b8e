package bench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dsh-dev/dsh/internal/agent"
	"github.com/dsh-dev/dsh/internal/app"
	"github.com/dsh-dev/dsh/internal/host"
	"github.com/dsh-dev/dsh/internal/llm/llmtest"
	"github.com/dsh-dev/dsh/internal/tui"
)

// screen is the terminal the benchmark's UI draws on: it keeps what was
// written and wakes a waiter on every write.
type screen struct {
	mu     sync.Mutex
	buf    bytes.Buffer
	writes chan struct{}
	seen   time.Time // when the last write came
}

func newScreen() *screen { return &screen{writes: make(chan struct{}, 1)} }

func (s *screen) Write(p []byte) (int, error) {
	s.mu.Lock()
	s.buf.Write(p)
	s.seen = time.Now()
	s.mu.Unlock()
	select {
	case s.writes <- struct{}{}:
	default:
	}
	return len(p), nil
}

// waitFor waits until the output from offset on contains sub and returns
// the time of the write that completed it and the new offset.
func (s *screen) waitFor(ctx context.Context, from int, sub string) (time.Time, int, error) {
	for {
		s.mu.Lock()
		data := s.buf.Bytes()[from:]
		i := bytes.Index(data, []byte(sub))
		at, n := s.seen, s.buf.Len()
		s.mu.Unlock()
		if i >= 0 {
			return at, n, nil
		}
		select {
		case <-s.writes:
		case <-ctx.Done():
			return at, n, fmt.Errorf("waiting for %q: %w", sub, ctx.Err())
		}
	}
}

func (s *screen) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.Len()
}

// transcriptSession stores a session whose transcript is turns × lines
// lines, through the real host and the fake model, and returns its id.
func transcriptSession(b *testing.B, srv *llmtest.Server, turns, lines int) string {
	ctx := b.Context()
	a, err := app.Open(ctx, app.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer a.Close()
	h, err := host.New(host.Config{App: a, Holder: "bench", IdleAfter: -1})
	if err != nil {
		b.Fatal(err)
	}
	defer h.Close(context.WithoutCancel(ctx))
	info, err := h.Create(ctx, host.CreateRequest{Cwd: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	id := info.Header.ID
	for t := 1; t <= turns; t++ {
		var sb strings.Builder
		for l := 1; l <= lines; l++ {
			fmt.Fprintf(&sb, "turn %d line %d: some words of an answer\n", t, l)
		}
		srv.Enqueue(llmtest.Response{Text: sb.String(), ChunkRunes: 4096})
		if err := h.Send(ctx, id, agent.NewUserMessage(fmt.Sprintf("prompt %d", t)), host.DeliveryQueue); err != nil {
			b.Fatal(err)
		}
		if _, err := h.RunUntilIdle(ctx, id); err != nil {
			b.Fatal(err)
		}
	}
	return id
}

// BenchmarkTUIKeystroke10k opens the UI (real host, real store, real
// Bubble Tea renderer) on a stored session whose transcript is 10,000
// lines, waits until all of it is printed, then types one character at a
// time and measures how long each takes to reach the screen.
func BenchmarkTUIKeystroke10k(b *testing.B) {
	for _, turns := range []int{0, 50} {
		b.Run(fmt.Sprintf("lines=%d", turns*200), func(b *testing.B) { keystrokes(b, turns) })
	}
}

func keystrokes(b *testing.B, turns int) {
	srv := llmtest.New()
	defer srv.Close()
	b.Setenv("DSH_HOME", b.TempDir())
	b.Setenv("DEEPSEEK_API_KEY", "k")
	b.Setenv("DEEPSEEK_BASE_URL", srv.URL())
	id := transcriptSession(b, srv, turns, 200)
	ctx, cancel := context.WithTimeout(b.Context(), 2*time.Minute)
	defer cancel()
	a, err := app.Open(ctx, app.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer a.Close()
	h, err := host.New(host.Config{App: a, Holder: "bench", IdleAfter: -1})
	if err != nil {
		b.Fatal(err)
	}
	defer h.Close(context.WithoutCancel(ctx))
	inR, inW := io.Pipe()
	scr := newScreen()
	done := make(chan error, 1)
	start := time.Now()
	go func() {
		_, _, err := tui.Run(ctx, tui.Options{Backend: tui.NewHostBackend(h), Open: tui.OpenRequest{ResumeID: id}, Color: true, Cwd: b.TempDir(), Cols: 120, Rows: 40}, inR, scr)
		done <- err
	}()
	last := fmt.Sprintf("turn %d line 200", turns)
	if turns == 0 {
		last = "/help for commands"
	}
	if _, _, err := scr.waitFor(ctx, 0, last); err != nil {
		b.Fatal(err)
	}
	replay := time.Since(start)
	b.ResetTimer()
	var lat []time.Duration
	for i := range b.N {
		ch := string(rune('a' + i%26))
		off := scr.len()
		t0 := time.Now()
		if _, err := inW.Write([]byte(ch)); err != nil {
			b.Fatal(err)
		}
		at, _, err := scr.waitFor(ctx, off, ch)
		if err != nil {
			b.Fatal(err)
		}
		lat = append(lat, at.Sub(t0))
	}
	b.StopTimer()
	slices.Sort(lat)
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	b.ReportMetric(ms(lat[len(lat)/2]), "p50-ms")
	b.ReportMetric(ms(lat[len(lat)*99/100]), "p99-ms")
	b.ReportMetric(ms(lat[len(lat)-1]), "max-ms")
	b.ReportMetric(ms(replay), "open-and-replay-ms")
	_, _ = inW.Write([]byte{3, 3}) // ctrl+c twice: leave
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	_ = inW.Close()
}

// procCPU is a process's user+system CPU time from /proc.
func procCPU(b *testing.B, pid int) time.Duration {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Fatal(err)
	}
	f := strings.Fields(string(data[bytes.LastIndexByte(data, ')')+2:]))
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * (time.Second / 100) // USER_HZ
}

// tuiInTmux runs the real dsh tui in a tmux pane and returns its pid and
// a way to send keys.
func tuiInTmux(b *testing.B, srvURL string) (pid int, keys func(...string), pane func() string) {
	if _, err := exec.LookPath("tmux"); err != nil {
		b.Skip("needs tmux")
	}
	sock := filepath.Join(b.TempDir(), "tmux.sock")
	tmux := func(args ...string) string {
		out, err := exec.Command("tmux", append([]string{"-S", sock, "-f", "/dev/null"}, args...)...).CombinedOutput()
		if err != nil {
			b.Fatalf("tmux %v: %v %s", args, err, out)
		}
		return string(out)
	}
	b.Cleanup(func() { _ = exec.Command("tmux", "-S", sock, "kill-server").Run() })
	tmux("new-session", "-d", "-s", "m", "-x", "120", "-y", "40", "-c", b.TempDir(),
		"-e", "DSH_HOME="+b.TempDir(), "-e", "DEEPSEEK_API_KEY=k", "-e", "DEEPSEEK_BASE_URL="+srvURL,
		dshBinary(b)+" tui")
	pid, _ = strconv.Atoi(strings.TrimSpace(tmux("display-message", "-p", "-t", "m", "#{pane_pid}")))
	pane = func() string { return tmux("capture-pane", "-p", "-t", "m") }
	keys = func(k ...string) { tmux(append([]string{"send-keys", "-t", "m"}, k...)...) }
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(pane(), "/help for commands") {
		if time.Now().After(deadline) {
			b.Fatalf("the UI did not start:\n%s", pane())
		}
		time.Sleep(20 * time.Millisecond)
	}
	return pid, keys, pane
}

// BenchmarkTUIIdleCPU measures the CPU the real dsh tui uses while it
// waits for the user (target: none), over 5 s per iteration.
func BenchmarkTUIIdleCPU(b *testing.B) {
	srv := llmtest.New()
	defer srv.Close()
	pid, keys, _ := tuiInTmux(b, srv.URL())
	b.ResetTimer()
	var total time.Duration
	for range b.N {
		c0 := procCPU(b, pid)
		time.Sleep(5 * time.Second) // the measured idle interval
		total += procCPU(b, pid) - c0
	}
	b.ReportMetric(float64(total.Milliseconds())/float64(b.N)/5, "cpu-ms-per-s")
	keys("C-d")
}

// BenchmarkTUIStreamingCPU measures the CPU of the real dsh tui while a
// 20,000-character answer streams in 2,500 chunks at 2 ms intervals.
func BenchmarkTUIStreamingCPU(b *testing.B) {
	srv := llmtest.New()
	defer srv.Close()
	var sb strings.Builder
	for i := 0; sb.Len() < 20_000; i++ {
		fmt.Fprintf(&sb, "word%d ", i)
		if i%12 == 11 {
			sb.WriteString("\n")
		}
	}
	pid, keys, pane := tuiInTmux(b, srv.URL())
	b.ResetTimer()
	var cpu, wall time.Duration
	for i := range b.N {
		end := fmt.Sprintf("END-OF-ANSWER-%d", i)
		srv.Enqueue(llmtest.Response{Text: sb.String() + "\n" + end, ChunkRunes: 8, DelayPerChunk: 2 * time.Millisecond})
		c0, t0 := procCPU(b, pid), time.Now()
		keys("-l", fmt.Sprintf("stream %d", i))
		keys("Enter")
		for !strings.Contains(pane(), end) {
			time.Sleep(20 * time.Millisecond) // polling the screen
		}
		wall += time.Since(t0)
		cpu += procCPU(b, pid) - c0
	}
	b.ReportMetric(float64(cpu.Milliseconds())/wall.Seconds(), "cpu-ms-per-s")
	b.ReportMetric(float64(wall.Milliseconds())/float64(b.N), "stream-wall-ms")
	b.ReportMetric(float64(cpu.Milliseconds())/float64(b.N), "cpu-ms-per-answer")
	keys("C-d")
}

// BenchmarkRunStreamingCPU is the baseline for the UI's streaming CPU:
// dsh run streaming the same answer with its progress renderer on.
func BenchmarkRunStreamingCPU(b *testing.B) {
	srv := llmtest.New()
	defer srv.Close()
	var sb strings.Builder
	for i := 0; sb.Len() < 20_000; i++ {
		fmt.Fprintf(&sb, "word%d ", i)
		if i%12 == 11 {
			sb.WriteString("\n")
		}
	}
	var cpu, wall time.Duration
	for range b.N {
		srv.Enqueue(llmtest.Response{Text: sb.String(), ChunkRunes: 8, DelayPerChunk: 2 * time.Millisecond})
		c := dshCmd(b, b.TempDir(), srv.URL(), "run", "--progress", "stream")
		t0 := time.Now()
		if out, err := c.CombinedOutput(); err != nil {
			b.Fatalf("%v: %s", err, out)
		}
		wall += time.Since(t0)
		cpu += c.ProcessState.UserTime() + c.ProcessState.SystemTime()
	}
	b.ReportMetric(float64(cpu.Milliseconds())/wall.Seconds(), "cpu-ms-per-s")
	b.ReportMetric(float64(wall.Milliseconds())/float64(b.N), "stream-wall-ms")
	b.ReportMetric(float64(cpu.Milliseconds())/float64(b.N), "cpu-ms-per-answer")
}
