//go:build !linux

package terminal

import (
	"errors"
	"os"
	"syscall"
)

// errUnsupported: the PTY manager is written for Linux (/dev/ptmx,
// TIOCSIG); elsewhere opening a terminal fails with a clear error.
var errUnsupported = errors.New("terminals are only supported on Linux")

func openPTY() (master, slave *os.File, err error) { return nil, nil, errUnsupported }

func sendSignal(*os.File, syscall.Signal) error { return errUnsupported }
