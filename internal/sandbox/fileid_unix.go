//go:build unix

package sandbox

import (
	"os"
	"syscall"
)

// fileIDOf returns the device and inode of the file at path (symlinks
// followed), if it can be read.
func fileIDOf(path string) (fileID, bool) {
	fi, err := os.Stat(path)
	if err != nil {
		return fileID{}, false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fileID{}, false
	}
	return fileID{Dev: uint64(st.Dev), Ino: uint64(st.Ino)}, true
}
