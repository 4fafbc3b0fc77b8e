// Command dsh is the dsh agent harness. See README.md for usage.
package main

import (
	"context"
	"os"

	"github.com/dsh-dev/dsh/internal/cli"
)

func main() {
	os.Exit(cli.Main(context.Background(), os.Args[1:], cli.IO{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr}))
}
