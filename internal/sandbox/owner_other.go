//go:build !unix

package sandbox

import "io/fs"

// ownedBy cannot tell owners apart here; no backend runs on these
// systems, so the scratch dir is never used.
func ownedBy(fs.FileInfo, int) bool { return true }

// processAlive: no backend runs here, so no session TMPDIR is swept.
func processAlive(int) bool { return true }
