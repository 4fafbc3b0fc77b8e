package proctest

import (
	"syscall"
	"time"
)

// sysPidfdOpen is pidfd_open(2); 434 on every Linux architecture that uses
// the unified syscall table (the syscall package only names it for
// loong64).
const sysPidfdOpen = 434

// WaitExit waits up to timeout for pid to terminate and reports whether it
// did. A pid that no longer exists counts as exited. A zombie counts as
// exited too: reaping an orphan is up to init, which in a container may
// never do it, while kill -0 keeps succeeding on zombies.
//
// It blocks on a pidfd, which becomes readable when the process exits, so
// no polling or sleeping is involved.
func WaitExit(pid int, timeout time.Duration) bool {
	fd, _, errno := syscall.Syscall(sysPidfdOpen, uintptr(pid), 0, 0)
	if errno == syscall.ESRCH {
		return true
	}
	if errno != 0 {
		// No pidfd support: fall back to asking once.
		return syscall.Kill(pid, 0) == syscall.ESRCH
	}
	defer syscall.Close(int(fd))
	deadline := time.Now().Add(timeout)
	for {
		var set syscall.FdSet
		set.Bits[fd/64] |= 1 << (fd % 64)
		tv := syscall.NsecToTimeval(max(0, time.Until(deadline).Nanoseconds()))
		n, err := syscall.Select(int(fd)+1, &set, nil, nil, &tv)
		if err == syscall.EINTR {
			continue
		}
		return err == nil && n > 0
	}
}
