//go:build !unix

package sandbox

import "io/fs"

// hardLinks is 1: link counts are not read on this platform.
func hardLinks(fs.FileInfo) uint64 { return 1 }
