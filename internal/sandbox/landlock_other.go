//go:build !linux

package sandbox

import (
	"errors"
	"syscall"
)

// landlockABI is 0: Landlock is Linux-only.
func landlockABI() int { return 0 }

func seccompSupported() bool { return false }

// Harden does nothing outside Linux, where there is no helper to protect
// dsh from.
func Harden() error { return nil }

func supervise(helperSpec, string, []string, []string) (int, error) {
	return helperExitSetup, errors.New("the sandbox helper is Linux-only")
}

func (nsMode) procAttr() func(*syscall.SysProcAttr) { return nil }

func nsCandidates() []nsMode { return nil }

func probeNS(string, nsMode) error { return errors.New("namespaces are Linux-only") }

func runNSProbe() int { return 1 }

var droppedCapNames []string

func spawnAttr(func(*syscall.SysProcAttr)) *syscall.SysProcAttr { return nil }

// supervisable: the helper is Linux-only.
const supervisable = false
