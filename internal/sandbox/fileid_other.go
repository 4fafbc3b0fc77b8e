//go:build !unix

package sandbox

// fileIDOf: no inode numbers here; the socket gate is Linux-only.
func fileIDOf(string) (fileID, bool) { return fileID{}, false }
