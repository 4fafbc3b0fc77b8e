// Command dsh is the dsh agent harness. See README.md for usage.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/dsh-dev/dsh/internal/cli"
	"github.com/dsh-dev/dsh/internal/memlimit"
	"github.com/dsh-dev/dsh/internal/sandbox"
)

func main() {
	// The Landlock sandbox re-executes this binary as its helper; that
	// must happen before anything else runs.
	sandbox.RunHelperIfRequested()
	// Before any command runs: dsh's environment holds API keys, so no
	// command may read its /proc entries or inherit its descriptors.
	if err := sandbox.Harden(); err != nil {
		fmt.Fprintln(os.Stderr, "dsh:", err)
		os.Exit(1)
	}
	// A soft memory limit (unless GOMEMLIMIT is set) keeps the garbage
	// collector's headroom from doubling a long run's small live heap.
	memlimit.Apply(os.Getenv)
	os.Exit(cli.Main(context.Background(), os.Args[1:], cli.IO{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr}))
}
