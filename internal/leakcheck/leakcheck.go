// Package leakcheck verifies, for tests, that no goroutine outlives the
// tests that started it. A package's TestMain calls Run instead of m.Run:
//
//	func TestMain(m *testing.M) { os.Exit(leakcheck.Run(m)) }
//
// Only test binaries import it.
package leakcheck

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"
)

// settle bounds the wait for goroutines to end after the tests: work
// that is already finishing (a deferred close, a reader seeing EOF) gets
// there in microseconds, and this is only reached when something leaked.
const settle = 5 * time.Second

// ignored are functions whose goroutines the runtime and the testing
// package keep for the whole process; a goroutine whose stack contains
// one of them is not a leak.
var ignored = []string{
	"testing.(*M).Run",
	"testing.RunTests",
	"testing.(*T).Run",
	"testing.runFuzzing",
	"os/signal.signal_recv",
	"os/signal.loop",
	"runtime.ensureSigM",
	"runtime.ReadTrace",
	"runtime/trace.Start",
	// The process kit's spawn thread lives as long as the process.
	"github.com/dsh-dev/dsh/internal/proc.spawnLoop",
}

// Run runs the tests, then, when they passed, checks that every goroutine
// they started has ended, and returns the exit code for os.Exit: 1 with
// the leaked stacks on stderr when some have not.
func Run(m *testing.M) int {
	code := m.Run()
	if code != 0 {
		return code
	}
	if leaked := Check(settle); len(leaked) > 0 {
		fmt.Fprintf(os.Stderr, "leakcheck: %d goroutine(s) still running after the tests:\n\n%s\n",
			len(leaked), strings.Join(leaked, "\n\n"))
		return 1
	}
	return 0
}

// Check waits up to timeout for every goroutine but the caller's and the
// ignored ones to end, and returns the stacks of those still running.
func Check(timeout time.Duration) []string {
	deadline := time.Now().Add(timeout)
	wait := time.Millisecond
	for {
		leaked := Goroutines()
		if len(leaked) == 0 || time.Now().After(deadline) {
			return leaked
		}
		// Polling is the only way to observe other goroutines ending;
		// the back-off keeps it cheap.
		time.Sleep(wait)
		wait = min(2*wait, 100*time.Millisecond)
	}
}

// Goroutines returns the stacks of the goroutines running now, except the
// caller's and the ignored ones.
func Goroutines() []string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	// The first stack is the caller's own.
	stacks := strings.Split(string(buf), "\n\n")[1:]
	var out []string
	for _, s := range stacks {
		if s = strings.TrimSpace(s); s != "" && !isIgnored(s) {
			out = append(out, s)
		}
	}
	return out
}

func isIgnored(stack string) bool {
	for _, line := range strings.Split(stack, "\n")[1:] {
		fn := strings.TrimPrefix(line, "created by ")
		if i := strings.LastIndexByte(fn, '('); i > 0 && !strings.HasSuffix(fn[:i], ".") {
			fn = fn[:i]
		}
		for _, ig := range ignored {
			if fn == ig || strings.HasPrefix(fn, ig+" ") {
				return true
			}
		}
	}
	return false
}
