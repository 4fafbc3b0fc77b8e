//go:build unix && !linux

package sandbox

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// dirFlags opens a directory to resolve and create names in.
const dirFlags = unix.O_RDONLY | unix.O_CLOEXEC

var errNoOpenat2 = errors.New("openat2 is unavailable")

// openat2Beneath has no kernel support here: the caller walks.
func openat2Beneath(*os.File, string) (*os.File, error) { return nil, errNoOpenat2 }

// fdPath is the path the walk opened f at: every component was opened
// with O_NOFOLLOW below a resolved root, so it is the directory's real
// path when it was opened.
func fdPath(_ *os.File, walked string) (string, error) { return walked, nil }

// openedPath resolves path again after the open and requires the result
// to be the very file f holds (same device and inode), so a file swapped
// in between is refused rather than attributed to the checked name.
func openedPath(f *os.File, path string) (string, error) {
	real, err := resolvePath("/", path)
	if err != nil {
		return "", err
	}
	a, err := f.Stat()
	if err != nil {
		return "", err
	}
	b, err := os.Stat(real)
	if err != nil || !os.SameFile(a, b) {
		return "", fmt.Errorf("%s: %w", path, ErrPathChanged)
	}
	return real, nil
}
