//go:build !linux && !darwin

package permission

import (
	"errors"
	"os"
)

// foreground: terminal approvals are supported on Linux and macOS only.
func foreground(*os.File) error {
	return errors.New("terminal approvals are not supported on this platform")
}
