//go:build unix

package sandbox

import (
	"io/fs"
	"syscall"
)

// hardLinks is the link count of a regular file, 1 when fi does not say.
func hardLinks(fi fs.FileInfo) uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Nlink)
	}
	return 1
}
