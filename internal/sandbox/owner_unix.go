//go:build unix

package sandbox

import (
	"io/fs"
	"syscall"
)

// ownedBy reports whether fi belongs to uid.
func ownedBy(fi fs.FileInfo, uid int) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && int(st.Uid) == uid
}

// processAlive reports whether a process with this pid exists (one of
// another user counts).
func processAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || err == syscall.EPERM
}
