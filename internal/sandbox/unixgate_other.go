//go:build !linux || !(amd64 || arm64 || riscv64 || loong64)

package sandbox

import (
	"context"
	"errors"
)

var errNoGate = errors.New("the UNIX socket gate needs seccomp user notification on Linux (amd64, arm64, riscv64, loong64)")

// unixGateSupported says why this platform has no gate.
func unixGateSupported() error { return errNoGate }

type gatedChild struct{}

type threadGate struct{}

func installThreadGate(gateSpec) (*threadGate, error) { return nil, errNoGate }

func (*threadGate) abort() {}

func (*threadGate) serve(func(string)) {}

// The session server's spawner (spawner_linux.go) uses these on Linux
// builds without the gate, where installThreadGate always fails.
type confinedCall struct{}

func (*threadGate) start(func(string))         {}
func (*threadGate) calls() <-chan confinedCall { return nil }
func (*threadGate) call(confinedCall)          {}
func (*threadGate) stop()                      {}

func serveUnixGate(context.Context, gatedChild, gateSpec, func(string)) error { return errNoGate }
