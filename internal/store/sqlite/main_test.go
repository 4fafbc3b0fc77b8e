package sqlite

import (
	"os"
	"testing"

	"github.com/dsh-dev/dsh/internal/leakcheck"
)

// TestMain fails the tests when a goroutine outlives them: lease renewers,
// listing decoders and the pools' own goroutines end with what owns them.
func TestMain(m *testing.M) { os.Exit(leakcheck.Run(m)) }
