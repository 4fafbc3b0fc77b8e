// Package webui holds the web UI that dsh serve serves at /, built into
// the binary with go:embed (no build step, no network at run time).
package webui

import (
	"embed"
	"io/fs"
)

//go:embed static
var files embed.FS

// FS is the UI's file tree, index.html at its root.
func FS() fs.FS {
	sub, err := fs.Sub(files, "static")
	if err != nil {
		panic(err) // the embedded directory exists: a build without it fails
	}
	return sub
}
