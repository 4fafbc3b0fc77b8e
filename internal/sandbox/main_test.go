package sandbox

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/dsh-dev/dsh/internal/leakcheck"
)

// TestMain lets the test binary serve as the Landlock helper (the backend
// re-executes os.Executable(), which under go test is this binary), and
// points TMPDIR at a directory removed afterwards, so that read-only
// mode's scratch dir does not outlive the tests.
func TestMain(m *testing.M) {
	RunHelperIfRequested()
	runTestRole()
	tmp, err := os.MkdirTemp("", "dsh-sandbox-tests-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	os.Setenv("TMPDIR", tmp)
	noRaceExitDelay()
	// The session server's client starts goroutines in this process:
	// none may outlive the tests.
	code := leakcheck.Run(m)
	os.RemoveAll(tmp)
	os.Exit(code)
}

// noRaceExitDelay keeps the helpers this binary runs from sleeping a
// second at exit when built with -race (the race runtime's
// atexit_sleep_ms): every confined command would take a second more.
func noRaceExitDelay() {
	if g := os.Getenv("GORACE"); !strings.Contains(g, "atexit_sleep_ms") {
		os.Setenv("GORACE", strings.TrimSpace(g+" atexit_sleep_ms=0"))
	}
}
