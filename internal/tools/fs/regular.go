package fs

import (
	iofs "io/fs"
	"os"
	"syscall"

	"github.com/dsh-dev/dsh/internal/tool"
)

// CodeNotRegular: the path is neither a regular file nor (where the tool
// lists directories) a directory: a FIFO, socket or device, whose reads
// can block forever or have side effects.
const CodeNotRegular = "NOT_REGULAR_FILE"

// OpenRegular opens the regular file at path for reading without ever
// blocking on a FIFO: a stat refuses anything else before the open, and
// the open itself uses O_NONBLOCK (opening a FIFO for reading otherwise
// blocks in open(2) until a writer appears) and is checked again with
// fstat on the descriptor, so a path swapped for a FIFO or device between
// the stat and the open is refused too. O_NONBLOCK does not change reads
// of a regular file. Directories fail with IS_DIRECTORY, other kinds with
// NOT_REGULAR_FILE, and a missing path with FILE_NOT_FOUND (with
// suggestions).
func OpenRegular(path string) (*os.File, os.FileInfo, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, nil, statError(path, err)
	}
	if err := CheckRegular(path, fi); err != nil {
		return nil, nil, err
	}
	return openChecked(path)
}

// openChecked is OpenRegular without the stat before the open: the open
// cannot block and the descriptor's own fstat decides.
func openChecked(path string) (*os.File, os.FileInfo, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, nil, statError(path, err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, statError(path, err)
	}
	if err := CheckRegular(path, fi); err != nil {
		f.Close()
		return nil, nil, err
	}
	return f, fi, nil
}

// CheckRegular returns IS_DIRECTORY for a directory, NOT_REGULAR_FILE for
// anything else that is not a regular file, and nil for a regular file.
func CheckRegular(path string, fi os.FileInfo) error {
	switch m := fi.Mode(); {
	case m.IsRegular():
		return nil
	case m.IsDir():
		return isDirError(path)
	default:
		return notRegularError(path, m)
	}
}

func notRegularError(path string, m iofs.FileMode) error {
	return tool.Errorf(CodeNotRegular,
		"%s is %s, not a regular file; the file tools only read and write regular files (reading a FIFO or device can block or have side effects). Inspect it with bash if you must (for example `ls -l %s`)",
		path, kindOf(m), path)
}

// kindOf names the kind of a non-regular file for error messages.
func kindOf(m iofs.FileMode) string {
	switch {
	case m&iofs.ModeNamedPipe != 0:
		return "a named pipe (FIFO)"
	case m&iofs.ModeSocket != 0:
		return "a socket"
	case m&iofs.ModeCharDevice != 0:
		return "a character device"
	case m&iofs.ModeDevice != 0:
		return "a block device"
	case m&iofs.ModeSymlink != 0:
		return "a symbolic link"
	default:
		return "a special file"
	}
}
