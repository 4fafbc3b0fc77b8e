// Command dsh is the dsh agent harness. See README.md for usage.
package main

import (
	"context"
	"os"

	"github.com/dsh-dev/dsh/internal/cli"
	"github.com/dsh-dev/dsh/internal/sandbox"
)

func main() {
	// The Landlock sandbox re-executes this binary as its helper; that
	// must happen before anything else runs.
	sandbox.RunHelperIfRequested()
	os.Exit(cli.Main(context.Background(), os.Args[1:], cli.IO{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr}))
}
