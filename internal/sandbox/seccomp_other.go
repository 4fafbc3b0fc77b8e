//go:build linux && !(amd64 || arm64 || riscv64 || loong64)

package sandbox

import "errors"

// seccompSupported is false on architectures whose filter is not written
// out; Landlock confinement reports the network gap instead.
func seccompSupported() bool { return false }

func loadSeccomp(bool) error { return errors.New("seccomp: unsupported architecture") }
