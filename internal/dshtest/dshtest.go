// Package dshtest serves end-to-end tests that run the real dsh binary as
// a subprocess, as a client would.
package dshtest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/dsh-dev/dsh/internal/leakcheck"
	"github.com/dsh-dev/dsh/internal/sandbox"
)

// Main is a TestMain body: it serves the sandbox helper when the test
// binary was re-executed as one (bash commands of in-process sessions run
// under it), builds cmd/dsh once into a temporary directory and stores
// its path in *bin, runs the tests with goroutine leak checks, removes
// the directory and exits with the tests' code.
func Main(m *testing.M, bin *string) {
	sandbox.RunHelperIfRequested()
	dir, err := os.MkdirTemp("", "dsh-e2e-test")
	if err != nil {
		fmt.Fprintf(os.Stderr, "dshtest: %v\n", err)
		os.Exit(1)
	}
	*bin = filepath.Join(dir, "dsh")
	// Built as releases are (README "Build"): without cgo, statically
	// linked, so the end-to-end tests run the binary users run.
	build := exec.Command("go", "build", "-o", *bin, "github.com/dsh-dev/dsh/cmd/dsh")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build dsh: %v\n%s", err, out)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := leakcheck.Run(m)
	os.RemoveAll(dir)
	os.Exit(code)
}
