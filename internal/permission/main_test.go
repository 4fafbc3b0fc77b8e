package permission

import (
	"os"
	"testing"

	"github.com/dsh-dev/dsh/internal/sandbox"
)

// TestMain lets the test binary serve as the sandbox helper (both
// backends re-execute os.Executable(), which under go test is this
// binary) and as the race tests' fast flipping job.
func TestMain(m *testing.M) {
	sandbox.RunHelperIfRequested()
	runFlipper()
	os.Exit(m.Run())
}
