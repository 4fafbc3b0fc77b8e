package workspace_test

import (
	"os"
	"testing"

	"github.com/dsh-dev/dsh/internal/leakcheck"
)

// TestMain fails the tests when a goroutine outlives them (the store
// and its listing decoders).
func TestMain(m *testing.M) { os.Exit(leakcheck.Run(m)) }
