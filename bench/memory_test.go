package bench

import (
	"bufio"
	"bytes"
	"encoding/json"
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

	"github.com/dsh-dev/dsh/internal/compaction"
	"github.com/dsh-dev/dsh/internal/llm"
	"github.com/dsh-dev/dsh/internal/llm/llmtest"
	"github.com/dsh-dev/dsh/internal/session"
)

// procStatusKB returns the fields of /proc/PID/status measured in kB
// (VmRSS, VmHWM, …).
func procStatusKB(pid int) (map[string]int64, error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return nil, err
	}
	out := map[string]int64{}
	for line := range strings.Lines(string(raw)) {
		k, v, ok := strings.Cut(line, ":")
		if !ok || !strings.HasSuffix(strings.TrimSpace(v), " kB") {
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		if err == nil {
			out[k] = n
		}
	}
	return out, nil
}

// countingFallback answers steps tool calls (whatever the conversation
// holds, so a compaction cannot make it loop) and then a final text.
// The summary request of a compaction is answered with text too.
func countingFallback(tool, args string, steps int, onRequest func(n int)) func(llmtest.Request) llmtest.Response {
	var mu sync.Mutex
	n := 0
	return func(r llmtest.Request) llmtest.Response {
		mu.Lock()
		n++
		k := n
		mu.Unlock()
		if onRequest != nil {
			onRequest(k)
		}
		u := &llmtest.Usage{Input: len(r.Body) / 4, Output: 16}
		if k <= steps {
			return llmtest.Response{Text: fmt.Sprintf("step %d of %d", k, steps), ToolCalls: []llmtest.ToolCall{{Name: tool, Arguments: args}}, Usage: u}
		}
		return llmtest.Response{Text: fmt.Sprintf("done after %d steps", steps), Usage: u}
	}
}

// runMemory runs `dsh run` under GNU time for an N-step bash task whose
// command is args, sampling the process's VmRSS as each request arrives
// (while dsh waits for the answer). It returns the whole run's peak RSS in
// kB and the samples by request number (RssFile under the negated
// number).
func runMemory(b *testing.B, steps int, args string) (peakKB int64, rss map[int]int64) {
	gnuTime, err := exec.LookPath("/usr/bin/time")
	if err != nil {
		b.Skip("needs GNU time (apt-get install time)")
	}
	srv := llmtest.New()
	defer srv.Close()
	var mu sync.Mutex
	timePID, pid := 0, 0
	rss = map[int]int64{}
	srv.SetFallback(countingFallback("bash", args, steps, func(n int) {
		mu.Lock()
		defer mu.Unlock()
		if pid == 0 && timePID != 0 {
			// GNU time's child is dsh, which sent this request.
			raw, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", timePID, timePID))
			if f := strings.Fields(string(raw)); len(f) > 0 {
				pid, _ = strconv.Atoi(f[0])
			}
		}
		if pid == 0 {
			return
		}
		if st, err := procStatusKB(pid); err == nil {
			rss[n] = st["VmRSS"]
			// The file-backed part (the binary's mapped pages, shared
			// and clean) under a negative key: what is not the
			// process's own memory.
			rss[-n] = st["RssFile"]
			// The high-water mark so far under the key 1e6+n: the
			// run's peak against the peak of the whole process,
			// closing included.
			rss[1_000_000+n] = st["VmHWM"]
		}
	}))
	out := filepath.Join(b.TempDir(), "rss")
	c := dshCmd(b, b.TempDir(), srv.URL(), "run", "run the command until done")
	c.Args = append([]string{gnuTime, "-f", "%M", "-o", out, c.Path}, c.Args[1:]...)
	c.Path = gnuTime
	var log bytes.Buffer
	c.Stdout, c.Stderr = &log, &log
	mu.Lock()
	if err := c.Start(); err != nil {
		mu.Unlock()
		b.Fatal(err)
	}
	timePID = c.Process.Pid
	mu.Unlock()
	if err := c.Wait(); err != nil {
		b.Fatalf("%v: %s", err, log.Bytes())
	}
	raw, err := os.ReadFile(out)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := fmt.Sscan(string(raw), &peakKB); err != nil {
		b.Fatalf("parse %q: %v", raw, err)
	}
	// CPU of the whole run: GNU time's own rusage counts the children it
	// waited for, dsh and (through dsh) every command it ran.
	st := c.ProcessState
	rss[2_000_000] = int64((st.UserTime() + st.SystemTime()) / time.Microsecond)
	return peakKB, rss
}

// BenchmarkRunMemory runs `dsh run` as a process for 2,000 steps of a
// command without output and for 200 steps of a command printing ~1 MB,
// and reports the peak RSS of each run (GNU time), the growth of the
// resident set per step between request 100 and the last, and how much of
// the last sample is file-backed (the binary's pages).
func BenchmarkRunMemory(b *testing.B) {
	cases := []struct {
		name  string
		steps int
		args  string
	}{
		{"steps=2000", 2000, stepArgs},
		{"steps=200,out=1MB", 200, `{"command":"seq 160000","description":"1 MB of output"}`},
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			var peak, first, last, file, hwm int64
			var cpuMS float64
			var perStep float64
			for range b.N {
				p, rss := runMemory(b, tc.steps, tc.args)
				peak = max(peak, p)
				from, to := rss[100], rss[tc.steps]
				if from == 0 || to == 0 || rss[1] == 0 {
					b.Fatalf("no RSS sample at request 1, 100 or %d", tc.steps)
				}
				perStep = float64(to-from) / float64(tc.steps-100)
				first, last, file = rss[1], to, rss[-tc.steps]
				hwm = rss[1_000_000+tc.steps]
				cpuMS = float64(rss[2_000_000]) / 1000 / float64(tc.steps)
				b.Logf("RSS (MB) at requests 1, 100, %d: %.1f %.1f %.1f (of it file-backed: %.1f); peak %.1f (%.1f until the last request)", tc.steps, float64(rss[1])/1024, float64(from)/1024, float64(to)/1024, float64(file)/1024, float64(p)/1024, float64(hwm)/1024)
			}
			b.ReportMetric(float64(peak)/1024, "peak-rss-MB")
			b.ReportMetric(float64(first)/1024, "rss-MB@1")
			b.ReportMetric(float64(last)/1024, "rss-MB@last")
			b.ReportMetric(perStep, "rss-KiB/step")
			b.ReportMetric(float64(file)/1024, "rss-file-MB@last")
			b.ReportMetric(float64(hwm)/1024, "peak-rss-MB@last-request")
			b.ReportMetric(cpuMS, "cpu-ms/step")
		})
	}
}

// longSession writes, as a JSONL export, a session of about n events
// made from the events of a real two-step `dsh run` (its steps repeated
// with fresh ids) with a compaction every compactEvery steps, as a
// session that long must have: its model-visible history stays bounded.
// It returns the session id.
func longSession(b *testing.B, w io.Writer, n, compactEvery int) string {
	srv := llmtest.New()
	defer srv.Close()
	srv.SetFallback(llmtest.LoopFallback("bash", stepArgs, 2))
	home := b.TempDir()
	if out, err := dshCmd(b, home, srv.URL(), "run", "run true until done").CombinedOutput(); err != nil {
		b.Fatalf("%v: %s", err, out)
	}
	ex := dshCmd(b, home, srv.URL(), "sessions", "list", "--all", "--json")
	raw, err := ex.Output()
	if err != nil {
		b.Fatal(err)
	}
	var list []struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(raw, &list); err != nil || len(list) != 1 {
		b.Fatalf("list: %v %s", err, raw)
	}
	raw, err = dshCmd(b, home, srv.URL(), "sessions", "export", list[0].ID).Output()
	if err != nil {
		b.Fatal(err)
	}
	lines := bytes.Split(bytes.TrimSpace(raw), []byte("\n"))
	var tmpl []session.Event
	for _, l := range lines[1:] {
		var e session.Event
		if err := json.Unmarshal(l, &e); err != nil {
			b.Fatal(err)
		}
		tmpl = append(tmpl, e)
	}
	// The template: a prelude up to the first step/start, step blocks
	// (step/start … step/end), the last of them without a tool call,
	// then turn/end.
	var starts []int
	for i, e := range tmpl {
		if e.Type == session.TypeStepStart {
			starts = append(starts, i)
		}
	}
	if len(starts) != 3 {
		b.Fatalf("template has %d steps, want 3", len(starts))
	}
	prelude, step, final := tmpl[:starts[0]], tmpl[starts[1]:starts[2]], tmpl[starts[2]:]
	// The first step's block holds the first request's header; keep it
	// in the prelude.
	first := tmpl[starts[0]:starts[1]]

	bw := bufio.NewWriter(w)
	if _, err := bw.Write(append(lines[0], '\n')); err != nil {
		b.Fatal(err)
	}
	var (
		seq   int64
		t0    = tmpl[0].Time
		nodes []int64 // surface node seqs
		kinds []string
	)
	emit := func(e session.Event) {
		e.Seq, e.Time = seq, t0+seq
		line, err := json.Marshal(e)
		if err != nil {
			b.Fatal(err)
		}
		bw.Write(append(line, '\n'))
		switch {
		case e.SurfaceOp != nil && e.SurfaceOp.Replace:
			nodes = append([]int64{seq}, nodes[e.SurfaceOp.End+1:]...)
			kinds = append([]string{session.TypeUserMessage}, kinds[e.SurfaceOp.End+1:]...)
		case e.SurfaceOp != nil:
			nodes, kinds = append(nodes, seq), append(kinds, e.Type)
		}
		seq++
	}
	// copyBlock emits a template block as step k, its ids renamed and its
	// seq references moved.
	copyBlock := func(block []session.Event, k int, tmplStep int) {
		shift := seq - block[0].Seq
		for _, e := range block {
			d := string(e.Data)
			d = strings.ReplaceAll(d, fmt.Sprintf(`"step":%d`, tmplStep), fmt.Sprintf(`"step":%d`, k))
			d = strings.ReplaceAll(d, `"call_`, fmt.Sprintf(`"c%d_call_`, k))
			d = strings.ReplaceAll(d, `"id":"01`, fmt.Sprintf(`"id":"m%d-01`, k))
			e.Data = json.RawMessage(d)
			if len(e.SourceEventSeqs) > 0 {
				src := make([]int64, len(e.SourceEventSeqs))
				for i, s := range e.SourceEventSeqs {
					src[i] = s + shift
				}
				e.SourceEventSeqs = src
			}
			emit(e)
		}
	}
	// The prelude and the first step are the template's own.
	for _, e := range append(prelude[:len(prelude):len(prelude)], first...) {
		emit(e)
	}
	k := 2
	for seq < int64(n)-int64(len(final))-1 {
		copyBlock(step, k, 2)
		if k%compactEvery == 0 {
			// Keep the last 40 nodes, cutting before an assistant message.
			cut := len(nodes) - 40
			for cut > 0 && kinds[cut] != session.TypeAssistantMsg {
				cut--
			}
			id := fmt.Sprintf("compaction-%d", k)
			summary := []llm.Block{llm.TextBlock(strings.Repeat("Earlier steps ran `true` successfully. ", 50))}
			emit(session.Event{Type: session.TypeCompactionStart, Data: mustJSON(b, compaction.StartPayload{CompactionID: id, Reason: compaction.ReasonPressure})})
			emit(session.Event{Type: session.TypeCompactionSummary, Data: mustJSON(b, compaction.SummaryPayload{
				CompactionID: id, Summary: summary, ShadowedRange: compaction.Range{Start: 0, End: cut - 1},
				ShadowedSeqs: append([]int64(nil), nodes[:cut]...), Provider: "deepseek", Model: "deepseek-v4-flash"})})
			emit(session.Event{Type: session.TypeUserMessage, Data: mustJSON(b, compaction.SummaryMessage(id, summary)),
				SurfaceOp: &session.SurfaceOp{Replace: true, Start: 0, End: cut - 1}, SourceEventSeqs: append([]int64(nil), nodes[:cut]...)})
			emit(session.Event{Type: session.TypeCompactionEnd, Data: mustJSON(b, compaction.EndPayload{CompactionID: id})})
		}
		k++
	}
	copyBlock(final, k, 3)
	if err := bw.Flush(); err != nil {
		b.Fatal(err)
	}
	return list[0].ID
}

func mustJSON(b *testing.B, v any) json.RawMessage {
	raw, err := json.Marshal(v)
	if err != nil {
		b.Fatal(err)
	}
	return raw
}

// longSessionHome imports a session of about n events into a new
// $DSH_HOME and returns the home and the session id.
func longSessionHome(b *testing.B, n int) (home, id string) {
	home = b.TempDir()
	file := filepath.Join(b.TempDir(), "long.jsonl")
	f, err := os.Create(file)
	if err != nil {
		b.Fatal(err)
	}
	id = longSession(b, f, n, 400)
	if err := f.Close(); err != nil {
		b.Fatal(err)
	}
	if out, err := dshCmd(b, home, "http://127.0.0.1:1", "sessions", "import", file).CombinedOutput(); err != nil {
		b.Fatalf("import: %v: %s", err, out)
	}
	return home, id
}

// BenchmarkResumeLong resumes a stored 100,000-event session (with a
// compaction every 400 steps) with `dsh run --resume` and reports the time
// from exec to the first model request and the process's peak RSS at that
// moment (VmHWM).
func BenchmarkResumeLong(b *testing.B) {
	home, id := longSessionHome(b, 100_000)
	srv := llmtest.New()
	defer srv.Close()
	var ms, mb []float64
	reportSteal(b, func() { resumeLong(b, srv, home, id, &ms, &mb) })
	b.ReportMetric(medianF(ms), "ms-to-first-request")
	b.ReportMetric(medianF(mb), "rss-MB-at-first-request")
}

// resumeLong runs the b.N resumes of BenchmarkResumeLong.
func resumeLong(b *testing.B, srv *llmtest.Server, home, id string, ms, mb *[]float64) {
	for range b.N {
		var mu sync.Mutex
		pid := 0
		var hwm int64
		var arrived time.Time
		srv.SetFallback(func(r llmtest.Request) llmtest.Response {
			mu.Lock()
			defer mu.Unlock()
			if arrived.IsZero() {
				arrived = r.Arrived
				if st, err := procStatusKB(pid); err == nil {
					hwm = st["VmHWM"]
				}
			}
			return llmtest.Response{Text: "ok", Usage: &llmtest.Usage{Input: len(r.Body) / 4, Output: 1}}
		})
		c := dshCmd(b, home, srv.URL(), "run", "--resume", id, "go on")
		var out bytes.Buffer
		c.Stdout, c.Stderr = &out, &out
		mu.Lock()
		t0 := time.Now()
		if err := c.Start(); err != nil {
			mu.Unlock()
			b.Fatal(err)
		}
		pid = c.Process.Pid
		mu.Unlock()
		if err := c.Wait(); err != nil {
			b.Fatalf("%v: %s", err, out.Bytes())
		}
		mu.Lock()
		if arrived.IsZero() || hwm == 0 {
			mu.Unlock()
			b.Fatalf("no request seen: %s", out.Bytes())
		}
		*ms = append(*ms, float64(arrived.Sub(t0))/float64(time.Millisecond))
		*mb = append(*mb, float64(hwm)/1024)
		mu.Unlock()
	}
}

// BenchmarkShowLong prints the same 100,000-event session with `dsh
// sessions show` (and --json) and reports wall time and peak RSS.
func BenchmarkShowLong(b *testing.B) {
	gnuTime, err := exec.LookPath("/usr/bin/time")
	if err != nil {
		b.Skip("needs GNU time (apt-get install time)")
	}
	home, id := longSessionHome(b, 100_000)
	for _, args := range [][]string{{"sessions", "show", id}, {"sessions", "show", "--json", id}} {
		b.Run(strings.Join(args[1:len(args)-1], ","), func(b *testing.B) {
			var ms, mb []float64
			var size int64
			for range b.N {
				rss := filepath.Join(b.TempDir(), "rss")
				c := dshCmd(b, home, "http://127.0.0.1:1", args...)
				c.Args = append([]string{gnuTime, "-f", "%M", "-o", rss, c.Path}, c.Args[1:]...)
				c.Path = gnuTime
				cw := &countWriter{}
				var stderr bytes.Buffer
				c.Stdout, c.Stderr = cw, &stderr
				t0 := time.Now()
				if err := c.Run(); err != nil {
					b.Fatalf("%v: %s", err, stderr.Bytes())
				}
				ms = append(ms, float64(time.Since(t0))/float64(time.Millisecond))
				raw, err := os.ReadFile(rss)
				if err != nil {
					b.Fatal(err)
				}
				var kb int64
				if _, err := fmt.Sscan(string(raw), &kb); err != nil {
					b.Fatalf("parse %q: %v", raw, err)
				}
				mb = append(mb, float64(kb)/1024)
				size = cw.n
			}
			b.ReportMetric(medianF(ms), "ms")
			b.ReportMetric(medianF(mb), "peak-rss-MB")
			b.ReportMetric(float64(size)/(1<<20), "output-MiB")
		})
	}
}

type countWriter struct{ n int64 }

func (w *countWriter) Write(p []byte) (int, error) { w.n += int64(len(p)); return len(p), nil }

func medianF(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}
