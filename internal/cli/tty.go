package cli

import (
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// terminal returns the controlling terminal for interactive approval
// prompts when dsh runs attached to one (stdin and stderr are TTYs), so a
// piped or scripted run never blocks on a prompt nobody can answer.
func terminal() (r io.Reader, w io.Writer, closeFn func(), ok bool) {
	isTTY := func(f *os.File) bool {
		_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
		return err == nil
	}
	if !isTTY(os.Stdin) || !isTTY(os.Stderr) {
		return nil, nil, func() {}, false
	}
	tty, err := os.OpenFile("/dev/tty", os.O_RDWR, 0)
	if err != nil {
		return nil, nil, func() {}, false
	}
	return tty, tty, func() { tty.Close() }, true
}
