package proctest

import (
	"fmt"
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// OpenPTY opens a pseudo-terminal pair through /dev/ptmx (no cgo, no
// dependency): the master, which the test reads and writes, and the
// slave, handed to the program under test as its terminal. cols > 0 sets
// the window to 30 rows of cols columns. It skips the test where the
// machine has no pseudo-terminals; both ends are closed at cleanup.
func OpenPTY(t testing.TB, cols uint16) (master, slave *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals here: %v", err)
	}
	if err := unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		m.Close()
		t.Fatalf("unlockpt: %v", err)
	}
	n, err := unix.IoctlGetInt(int(m.Fd()), unix.TIOCGPTN)
	if err != nil {
		m.Close()
		t.Fatalf("ptsname: %v", err)
	}
	s, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		m.Close()
		t.Fatalf("open slave: %v", err)
	}
	t.Cleanup(func() { m.Close(); s.Close() })
	if cols > 0 {
		if err := unix.IoctlSetWinsize(int(s.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Row: 30, Col: cols}); err != nil {
			t.Fatalf("set window size: %v", err)
		}
	}
	return m, s
}
