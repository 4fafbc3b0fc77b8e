package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/dsh-dev/dsh/internal/session"
	"github.com/dsh-dev/dsh/internal/store/sqlite"
)

// store10k stores n sessions (UUIDv7 ids, as dsh makes them) straight
// through the store: all in dir, one in seven a child of the one before.
func store10k(b *testing.B, path, dir string, n int) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, path)
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	t0 := time.Now()
	prev := ""
	for i := range n {
		id, err := uuid.NewV7()
		if err != nil {
			b.Fatal(err)
		}
		h := session.Header{Version: session.FormatVersion, ID: id.String(), CreatedAt: time.Now().UnixMilli(), Cwd: dir}
		if i%7 == 6 {
			h.ParentSession, h.Origin, h.DelegationDepth = prev, "subagent", 1
		}
		if err := st.Create(ctx, h); err != nil {
			b.Fatal(err)
		}
		prev = h.ID
	}
	b.Logf("stored %d sessions in %v", n, time.Since(t0).Round(time.Millisecond))
}

// BenchmarkSessionsList10k runs the real dsh binary over 10,000 stored
// sessions, all in one directory (so the current-directory listing lists
// all the top-level ones): `dsh sessions list` there, and `dsh sessions
// list --all --json`, interleaved with a Go hello-world whose median
// start-up is subtracted from each command's median wall time.
func BenchmarkSessionsList10k(b *testing.B) {
	const n = 10_000
	bin, hello := dshBinary(b), helloBinary(b)
	home, dir := b.TempDir(), b.TempDir()
	store10k(b, filepath.Join(home, "dsh.db"), dir, n)
	cmds := []struct {
		name string
		args []string
	}{
		{"hello-world", nil},
		{"version", []string{"version"}},
		{"cwd", []string{"sessions", "list"}},
		{"all-json", []string{"sessions", "list", "--all", "--json"}},
	}
	times := make([][]time.Duration, len(cmds))
	cpuTimes := make([][]time.Duration, len(cmds))
	sizes := make([]int, len(cmds))
	// One warm-up round reads the database into the page cache.
	for round := -1; round < b.N; round++ {
		for i, c := range cmds {
			cmd := exec.Command(hello)
			if c.args != nil {
				cmd = exec.Command(bin, c.args...)
			}
			cmd.Dir, cmd.Env = dir, append(os.Environ(), "DSH_HOME="+home)
			t0 := time.Now()
			out, err := cmd.Output()
			d := time.Since(t0)
			if err != nil {
				b.Fatalf("%s: %v", c.name, err)
			}
			if round >= 0 {
				times[i] = append(times[i], d)
				cpuTimes[i] = append(cpuTimes[i], cpu(cmd))
			}
			sizes[i] = len(out)
		}
	}
	med := func(ds []time.Duration) float64 {
		slices.Sort(ds)
		return float64(ds[len(ds)/2].Microseconds()) / 1000
	}
	// CPU time (user + system, from the child's rusage) is reported too:
	// on a shared machine it moves far less with the load than wall time.
	base, baseCPU := med(times[0]), med(cpuTimes[0])
	b.ReportMetric(base, "ms-hello-world")
	b.ReportMetric(baseCPU, "cpu-ms-hello-world")
	for i, c := range cmds[1:] {
		m, mc := med(times[i+1]), med(cpuTimes[i+1])
		b.ReportMetric(m-base, fmt.Sprintf("ms-%s-beyond-start-up", c.name))
		b.ReportMetric(mc-baseCPU, fmt.Sprintf("cpu-ms-%s-beyond-start-up", c.name))
		if c.name != "version" {
			b.ReportMetric(float64(sizes[i+1])/1e6, fmt.Sprintf("MB-%s", c.name))
		}
	}
}
