package sandbox

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// dirFlags opens a directory only as a handle to resolve and create
// names in.
const dirFlags = unix.O_PATH | unix.O_CLOEXEC

var errNoOpenat2 = errors.New("openat2 is unavailable")

// useOpenat2 is false in tests of the walk that replaces openat2 on
// kernels without it.
var useOpenat2 = true

// openat2Beneath opens directory rel beneath dir; the kernel refuses any
// step (symlink, "..", magic link) that would leave dir.
func openat2Beneath(dir *os.File, rel string) (*os.File, error) {
	if !useOpenat2 {
		return nil, errNoOpenat2
	}
	fd, err := unix.Openat2(int(dir.Fd()), rel, &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_MAGICLINKS,
	})
	switch {
	case err == nil:
		return os.NewFile(uintptr(fd), rel), nil
	case errors.Is(err, unix.ENOSYS), errors.Is(err, unix.EPERM):
		// Kernel < 5.6, or a seccomp filter refusing the call (O_PATH
		// opens check no permission, so EPERM is not the file's).
		return nil, errNoOpenat2
	case errors.Is(err, unix.EXDEV), errors.Is(err, unix.ELOOP):
		return nil, fmt.Errorf("%w (%v)", ErrPathChanged, err)
	}
	return nil, err
}

// fdPath is the kernel's name of an open directory.
func fdPath(f *os.File, _ string) (string, error) {
	return procFdPath(f)
}

// openedPath is the kernel's name of an open file.
func openedPath(f *os.File, _ string) (string, error) {
	return procFdPath(f)
}

func procFdPath(f *os.File) (string, error) {
	p, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(int(f.Fd())))
	if err != nil {
		return "", err
	}
	if !strings.HasPrefix(p, "/") || strings.HasSuffix(p, " (deleted)") {
		return "", fmt.Errorf("%s: %w", p, ErrPathChanged)
	}
	return p, nil
}
