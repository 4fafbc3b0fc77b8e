//go:build !linux || !(amd64 || arm64 || riscv64 || loong64)

package sandbox

import (
	"context"
	"errors"
	"syscall"
)

var errNoGate = errors.New("the UNIX socket gate needs seccomp user notification on Linux (amd64, arm64, riscv64, loong64)")

// unixGateSupported says why this platform has no gate.
func unixGateSupported() error { return errNoGate }

type gatedStart struct {
	path    string
	argv    []string
	env     []string
	dir     string
	files   []uintptr
	confine func() error
}

type gatedChild struct {
	pid  int
	done <-chan syscall.WaitStatus
}

func forkGated(gatedStart) (gatedChild, error) { return gatedChild{}, errNoGate }

func serveUnixGate(context.Context, gatedChild, gateSpec, func(string)) error { return errNoGate }
