package bench

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/dsh-dev/dsh/internal/llm/llmtest"
)

// liveTreeCPU is the CPU time in seconds of pid and every live
// descendant, each with its waited-for children (utime, stime, cutime,
// cstime): a long-lived child such as the session's sandbox server
// reaps the commands it runs, so their time is in its cutime, which the
// dsh process's own counts only once the server ends.
func liveTreeCPU(pid int) (float64, error) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return 0, err
	}
	type node struct {
		ppid int
		cpu  float64
	}
	nodes := map[int]node{}
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		raw, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		i := bytes.LastIndexByte(raw, ')')
		if i < 0 {
			continue
		}
		f := bytes.Fields(raw[i+1:])
		if len(f) < 15 {
			continue
		}
		ppid, _ := strconv.Atoi(string(f[1]))
		total := 0.0
		for _, k := range []int{11, 12, 13, 14} {
			v, _ := strconv.ParseFloat(string(f[k]), 64)
			total += v
		}
		nodes[p] = node{ppid, total / clockTicks}
	}
	root, ok := nodes[pid]
	if !ok {
		return 0, fmt.Errorf("process %d is gone", pid)
	}
	sum := root.cpu
	in := map[int]bool{pid: true}
	// Parents before children is not guaranteed by pid order: iterate
	// until no new descendant is found.
	for changed := true; changed; {
		changed = false
		for p, n := range nodes {
			if !in[p] && in[n.ppid] {
				in[p], sum, changed = true, sum+n.cpu, true
			}
		}
	}
	return sum, nil
}

// sandboxModes are the configurations BenchmarkSandboxStep compares:
// dsh's permission preset, and its environment (the backend order, the
// session server switch).
var sandboxModes = []struct {
	name, preset string
	env          []string
}{
	{"full-access/per-call", "full-access", []string{"DSH_SANDBOX_SERVER=0"}},
	{"full-access/server", "full-access", nil},
	{"bwrap/per-call", "workspace-write", []string{"DSH_SANDBOX_BACKENDS=bwrap", "DSH_SANDBOX_SERVER=0"}},
	{"bwrap/server", "workspace-write", []string{"DSH_SANDBOX_BACKENDS=bwrap"}},
	{"landlock/per-call", "workspace-write", []string{"DSH_SANDBOX_BACKENDS=landlock", "DSH_SANDBOX_SERVER=0"}},
	{"landlock/server", "workspace-write", []string{"DSH_SANDBOX_BACKENDS=landlock"}},
}

// BenchmarkSandboxStep measures what one bash step costs in `dsh run` (the
// real binary against the in-process fake model, `echo hi` per step) in
// each sandbox configuration, against `bash -c 'echo hi'` started
// directly (the shell's share), round after round so that the machine's
// load weighs on all alike. Per configuration it reports the median over
// rounds of the wall time and CPU time (dsh and every live descendant:
// bash, helpers, bwrap, the session's sandbox server) per step between
// requests 10 and 10+steps, read by the fake server as each request
// arrives, and the same minus the shell's share ("beyond-shell").
func BenchmarkSandboxStep(b *testing.B) {
	const first, steps = 10, 50
	const args = `{"command":"echo hi","description":"echo"}`
	type perStep struct{ wall, cpu []float64 }
	res := map[string]*perStep{}
	for _, m := range sandboxModes {
		res[m.name] = &perStep{}
	}
	bare := &perStep{}
	bash, err := exec.LookPath("bash")
	if err != nil {
		b.Skip("no bash")
	}
	for range b.N {
		// The shell alone, as often as a run's window.
		c0, t0 := cpuTime(), time.Now()
		for range steps {
			if err := exec.Command(bash, "-c", "echo hi").Run(); err != nil {
				b.Fatal(err)
			}
		}
		bare.wall = append(bare.wall, float64(time.Since(t0).Microseconds())/1000/steps)
		bare.cpu = append(bare.cpu, float64((cpuTime()-c0).Microseconds())/1000/steps)
		for _, m := range sandboxModes {
			wall, cpu := sandboxRun(b, m.preset, m.env, args, first, steps)
			res[m.name].wall = append(res[m.name].wall, wall)
			res[m.name].cpu = append(res[m.name].cpu, cpu)
		}
	}
	median := func(v []float64) float64 {
		s := slices.Clone(v)
		slices.Sort(s)
		return s[len(s)/2]
	}
	bw, bc := median(bare.wall), median(bare.cpu)
	b.ReportMetric(bw, "shell-wall-ms")
	b.ReportMetric(bc, "shell-cpu-ms")
	for _, m := range sandboxModes {
		w, c := median(res[m.name].wall), median(res[m.name].cpu)
		b.ReportMetric(w, m.name+"-wall-ms/step")
		b.ReportMetric(c, m.name+"-cpu-ms/step")
		b.ReportMetric(w-bw, m.name+"-beyond-shell-wall-ms")
		b.ReportMetric(c-bc, m.name+"-beyond-shell-cpu-ms")
	}
}

// sandboxRun runs one `dsh run` of first+steps bash steps and returns the
// wall and CPU milliseconds per step over the last steps.
func sandboxRun(b *testing.B, preset string, env []string, args string, first, steps int) (wall, cpu float64) {
	srv := llmtest.New()
	defer srv.Close()
	loop := llmtest.LoopFallback("bash", args, first+steps)
	var mu sync.Mutex
	pid, n := 0, 0
	var cpuAt, cpuEnd float64
	var at, end time.Time
	var sampleErr error
	srv.SetFallback(func(r llmtest.Request) llmtest.Response {
		mu.Lock()
		n++
		if n == first || n == first+steps {
			c, err := liveTreeCPU(pid)
			if err != nil {
				sampleErr = err
			}
			if n == first {
				cpuAt, at = c, time.Now()
			} else {
				cpuEnd, end = c, time.Now()
			}
		}
		mu.Unlock()
		return loop(r)
	})
	c := dshCmd(b, b.TempDir(), srv.URL(), "run", "--permission", preset, "--approval", "never", "run echo until done")
	c.Env = append(c.Env, env...)
	var out bytes.Buffer
	c.Stdout, c.Stderr = &out, &out
	mu.Lock()
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
	defer mu.Unlock()
	if sampleErr != nil || end.IsZero() {
		b.Fatalf("no samples (%v): %s", sampleErr, out.Bytes())
	}
	return float64(end.Sub(at).Microseconds()) / 1000 / float64(steps), (cpuEnd - cpuAt) * 1000 / float64(steps)
}
