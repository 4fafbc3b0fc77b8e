package proctest

import (
	"os"
	"strconv"
	"strings"
	"time"
)

// Marked returns the pids of the live processes whose command line
// contains marker (tests give the processes they start a unique argument,
// e.g. "sleep 1000.123", so that they can be found in any PID namespace).
func Marked(marker string) []int {
	var pids []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline"); err == nil && strings.Contains(string(b), marker) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// Survivors waits up to timeout for each process holding marker to exit
// (through WaitExit, no polling) and returns those still running.
func Survivors(marker string, timeout time.Duration) []int {
	var left []int
	for _, pid := range Marked(marker) {
		if !WaitExit(pid, timeout) {
			left = append(left, pid)
		}
	}
	return left
}
