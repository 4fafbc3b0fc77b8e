package bench

import (
	"bytes"
	"fmt"
	"sync"
	"testing"

	"github.com/dsh-dev/dsh/internal/llm/llmtest"
)

// clockTicks is the unit of /proc/PID/stat times (USER_HZ, 100 on Linux).
const clockTicks = 100

// BenchmarkRunStepCPU runs `dsh run` as a process for a 2,000-step bash
// task and reports its CPU per step (its own and its children's: bash,
// the sandbox) in three windows of 100 steps: from step 10, 500 and
// 1,900. The fake model server reads the process's CPU when a request
// arrives, while dsh waits for the answer, so a window is the harness's
// work for those steps, not the server's.
func BenchmarkRunStepCPU(b *testing.B) {
	const steps = 2000
	windows := [][2]int{{10, 110}, {500, 600}, {1900, 2000}}
	for range b.N {
		srv := llmtest.New()
		loop := llmtest.LoopFallback("bash", stepArgs, steps)
		var mu sync.Mutex
		pid, n := 0, 0
		at := map[int]float64{}
		srv.SetFallback(func(r llmtest.Request) llmtest.Response {
			mu.Lock()
			n++
			if pid != 0 {
				// Live descendants too: the session's sandbox server
				// holds its commands' CPU until it ends.
				if cpu, err := liveTreeCPU(pid); err == nil {
					at[n] = cpu
				}
			}
			mu.Unlock()
			return loop(r)
		})
		c := dshCmd(b, b.TempDir(), srv.URL(), "run", "run true until done")
		var out bytes.Buffer
		c.Stdout, c.Stderr = &out, &out
		mu.Lock()
		if err := c.Start(); err != nil {
			mu.Unlock()
			b.Fatal(err)
		}
		pid = c.Process.Pid
		mu.Unlock()
		err := c.Wait()
		srv.Close()
		if err != nil {
			b.Fatalf("%v: %s", err, out.Bytes())
		}
		for _, w := range windows {
			from, to := at[w[0]], at[w[1]]
			if from == 0 || to == 0 {
				b.Fatalf("no CPU sample at request %d or %d", w[0], w[1])
			}
			b.ReportMetric((to-from)*1000/float64(w[1]-w[0]), fmt.Sprintf("cpu-ms/step@%d", w[0]))
		}
	}
}
