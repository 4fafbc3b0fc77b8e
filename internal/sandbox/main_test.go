package sandbox

import (
	"fmt"
	"os"
	"testing"
)

// TestMain lets the test binary serve as the Landlock helper (the backend
// re-executes os.Executable(), which under go test is this binary), and
// points TMPDIR at a directory removed afterwards, so that read-only
// mode's scratch dir does not outlive the tests.
func TestMain(m *testing.M) {
	RunHelperIfRequested()
	tmp, err := os.MkdirTemp("", "dsh-sandbox-tests-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	os.Setenv("TMPDIR", tmp)
	// Under -race the helper (this binary) would sleep a second at exit
	// waiting for reports; now that it outlives each command that is a
	// second per command.
	if os.Getenv("GORACE") == "" {
		os.Setenv("GORACE", "atexit_sleep_ms=0")
	}
	code := m.Run()
	os.RemoveAll(tmp)
	os.Exit(code)
}
