package terminal

import (
	"fmt"
	"os"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// Window size every terminal gets: wide enough that programs do not wrap
// ordinary output, which the model would then read with breaks in it.
const (
	winRows = 50
	winCols = 200
)

// openPTY opens a new pseudo-terminal pair: the master, non-blocking and
// on Go's poller (so a Read ends when it is closed and writes can have a
// deadline), and the slave for the child. Both are close-on-exec; the
// child gets the slave as its fds 0-2 through os/exec.
func openPTY() (master, slave *os.File, err error) {
	mfd, err := unix.Open("/dev/ptmx", unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("open /dev/ptmx: %w", err)
	}
	fail := func(what string, err error) (*os.File, *os.File, error) {
		unix.Close(mfd)
		return nil, nil, fmt.Errorf("%s: %w", what, err)
	}
	if err := unix.IoctlSetPointerInt(mfd, unix.TIOCSPTLCK, 0); err != nil {
		return fail("unlock pty", err)
	}
	n, err := unix.IoctlGetUint32(mfd, unix.TIOCGPTN)
	if err != nil {
		return fail("pty number", err)
	}
	path := "/dev/pts/" + strconv.FormatUint(uint64(n), 10)
	sfd, err := unix.Open(path, unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fail("open "+path, err)
	}
	if err := unix.IoctlSetWinsize(sfd, unix.TIOCSWINSZ, &unix.Winsize{Row: winRows, Col: winCols}); err != nil {
		unix.Close(sfd)
		return fail("window size", err)
	}
	if err := unix.SetNonblock(mfd, true); err != nil {
		unix.Close(sfd)
		return fail("non-blocking pty", err)
	}
	return os.NewFile(uintptr(mfd), "/dev/ptmx"), os.NewFile(uintptr(sfd), path), nil
}

// sendSignal signals the terminal's foreground process group, as the
// line discipline does for ^C: it reaches the job in the foreground
// (the REPL, or the command a shell runs), whatever PID namespaces lie
// between. INT, QUIT and TSTP go through TIOCSIG on the master (the
// kernel's own path for them); other signals go to the group that
// TIOCGPGRP on the master names, as a pid of dsh's namespace.
func sendSignal(master *os.File, sig syscall.Signal) error {
	rc, err := master.SyscallConn()
	if err != nil {
		return err
	}
	var ioErr error
	if err := rc.Control(func(fd uintptr) {
		switch sig {
		case syscall.SIGINT, syscall.SIGQUIT, syscall.SIGTSTP:
			ioErr = unix.IoctlSetInt(int(fd), unix.TIOCSIG, int(sig))
		default:
			pgrp, err := unix.IoctlGetInt(int(fd), unix.TIOCGPGRP)
			if err != nil {
				ioErr = err
				return
			}
			if pgrp <= 1 {
				ioErr = fmt.Errorf("no foreground process group (%d)", pgrp)
				return
			}
			ioErr = syscall.Kill(-pgrp, sig)
		}
	}); err != nil {
		return err
	}
	return ioErr
}
