package bash

import (
	"os"

	"golang.org/x/sys/unix"
)

// commandFile holds command in a memfd (nothing on disk), rewound, or
// in an unlinked temp file where memfd_create is refused.
func commandFile(command string) (*os.File, error) {
	fd, err := unix.MemfdCreate("dsh-command", unix.MFD_CLOEXEC)
	if err != nil {
		return tempCommandFile(command)
	}
	f := os.NewFile(uintptr(fd), "dsh-command")
	if err := writeCommand(f, command); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}
