package bench

import (
	"os"
	"strconv"
	"strings"
	"testing"
)

// cpuTicks reads the machine's CPU time counters (/proc/stat's cpu
// line): the total and the part stolen by the hypervisor for other
// guests. ok is false where there is no /proc/stat.
func cpuTicks() (total, steal int64, ok bool) {
	raw, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0, false
	}
	line, _, _ := strings.Cut(string(raw), "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return 0, 0, false
	}
	for i, s := range f[1:] {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, 0, false
		}
		if i < 8 { // user … steal; guest time is counted in user already
			total += n
		}
		if i == 7 {
			steal = n
		}
	}
	return total, steal, true
}

// reportSteal measures the share of CPU time the hypervisor gave other
// guests while fn ran and reports it as host-steal-%: on a shared
// virtual machine it, more than the load average, says whether a
// wall-clock figure was taken on a contended host.
func reportSteal(b *testing.B, fn func()) {
	t0, s0, ok0 := cpuTicks()
	fn()
	t1, s1, ok1 := cpuTicks()
	if ok0 && ok1 && t1 > t0 {
		b.ReportMetric(100*float64(s1-s0)/float64(t1-t0), "host-steal-%")
	}
}
