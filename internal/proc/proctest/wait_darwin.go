package proctest

import (
	"time"

	"golang.org/x/sys/unix"
)

// WaitExit waits up to timeout for pid to terminate and reports whether it
// did. A pid that no longer exists counts as exited. It blocks on a kqueue
// EVFILT_PROC NOTE_EXIT event, so no polling is involved.
func WaitExit(pid int, timeout time.Duration) bool {
	kq, err := unix.Kqueue()
	if err != nil {
		return unix.Kill(pid, 0) == unix.ESRCH
	}
	defer unix.Close(kq)
	ev := []unix.Kevent_t{{Ident: uint64(pid), Filter: unix.EVFILT_PROC, Flags: unix.EV_ADD | unix.EV_ONESHOT, Fflags: unix.NOTE_EXIT}}
	if _, err := unix.Kevent(kq, ev, nil, nil); err != nil {
		return err == unix.ESRCH
	}
	deadline := time.Now().Add(timeout)
	out := make([]unix.Kevent_t, 1)
	for {
		ts := unix.NsecToTimespec(max(0, time.Until(deadline).Nanoseconds()))
		n, err := unix.Kevent(kq, nil, out, &ts)
		if err == unix.EINTR {
			continue
		}
		return err == nil && n > 0
	}
}
