//go:build !linux

package bash

import "os"

// commandFile holds command in an unlinked temp file, rewound.
func commandFile(command string) (*os.File, error) { return tempCommandFile(command) }
