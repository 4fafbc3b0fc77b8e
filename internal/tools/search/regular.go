package search

import (
	"errors"
	"io"
	"os"
	"syscall"
)

// maxSmallFile bounds the ignore and git pointer files readSmallFile
// loads; real ones are a few kilobytes.
const maxSmallFile = 4 << 20

// openRegular opens path for reading only if it is a regular file, and
// without blocking: opening a FIFO for reading blocks in open(2) until a
// writer appears, so the open uses O_NONBLOCK (which does not affect
// reads of a regular file) and the descriptor's fstat decides. A path
// that is not a regular file, including one swapped for a FIFO after a
// stat, gives errNotRegular.
func openRegular(path string) (*os.File, os.FileInfo, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, nil, err
	}
	fi, err := f.Stat()
	if err == nil && !fi.Mode().IsRegular() {
		err = errNotRegular
	}
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return f, fi, nil
}

// errNotRegular is openRegular's refusal of anything but a regular file.
var errNotRegular = errors.New("not a regular file")

// readSmallFile is os.ReadFile for a .gitignore, info/exclude or git
// pointer file: a FIFO or device planted under such a name must not hang
// the walk, and a huge file is not an ignore file.
func readSmallFile(path string) ([]byte, error) {
	f, _, err := openRegular(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, maxSmallFile))
}
