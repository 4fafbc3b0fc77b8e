//go:build linux || darwin

package permission

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// foreground checks that f is a terminal whose foreground process group
// is ours: a background job that read from it would be stopped
// (SIGTTIN) with the turn waiting on an answer nobody is asked for.
func foreground(f *os.File) error {
	pgrp, err := unix.IoctlGetInt(int(f.Fd()), unix.TIOCGPGRP)
	if err != nil {
		return err
	}
	if pgrp != unix.Getpgrp() {
		return errors.New("dsh runs in the background of its terminal")
	}
	return nil
}
