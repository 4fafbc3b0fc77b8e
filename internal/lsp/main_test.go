package lsp

import (
	"os"
	"testing"

	"github.com/dsh-dev/dsh/internal/leakcheck"
)

func TestMain(m *testing.M) { os.Exit(leakcheck.Run(m)) }
