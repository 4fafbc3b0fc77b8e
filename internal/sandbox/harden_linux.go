//go:build linux

package sandbox

import (
	"errors"
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// Harden protects this process from the commands it runs: it becomes
// non-dumpable, so that a command of the same user without
// CAP_SYS_PTRACE cannot read its /proc/<pid>/environ, mem or fd entries
// (the API keys dsh scrubs from a command's environment stay in its
// own), and every inherited descriptor from 3 up is marked close-on-exec,
// so that nothing dsh inherited leaks into a command, whatever the
// backend. Call it right after RunHelperIfRequested; the helper calls it
// too. Descriptors dsh opens itself are close-on-exec already (Go opens
// everything so).
func Harden() error {
	if err := nonDumpable(); err != nil {
		return fmt.Errorf("sandbox: %w", err)
	}
	if err := cloexecFrom(3); err != nil {
		return fmt.Errorf("sandbox: close-on-exec: %w", err)
	}
	return nil
}

// nonDumpable makes this process's /proc entries (environ, mem, fd…)
// unreadable to processes of its user without CAP_SYS_PTRACE. A
// non-dumpable process can no longer write a child's uid_map, so the
// user namespace is set up by the helper (startInner).
func nonDumpable() error {
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return fmt.Errorf("non-dumpable: %w", err)
	}
	return nil
}

// cloexecFrom marks every descriptor ≥ lowest close-on-exec: with
// close_range (Linux 5.11), else one by one from /proc/self/fd.
func cloexecFrom(lowest int) error {
	err := unix.CloseRange(uint(lowest), ^uint(0), unix.CLOSE_RANGE_CLOEXEC)
	if err == nil {
		return nil
	}
	if !errors.Is(err, unix.ENOSYS) && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.EPERM) {
		return err
	}
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return err
	}
	for _, e := range ents {
		fd, err := strconv.Atoi(e.Name())
		if err != nil || fd < lowest {
			continue
		}
		// The directory's own fd is closed by now: EBADF is fine.
		if _, err := unix.FcntlInt(uintptr(fd), unix.F_SETFD, unix.FD_CLOEXEC); err != nil && !errors.Is(err, unix.EBADF) {
			return err
		}
	}
	return nil
}

// droppedCaps are the capabilities a confined command never keeps, even
// as root: each one reaches past Landlock and seccomp. SYS_PTRACE and
// CHECKPOINT_RESTORE read other processes (their environment, memory,
// fds) whatever Landlock's ptrace scope says; DAC_READ_SEARCH opens files
// by handle; SYS_ADMIN, NET_ADMIN, SYS_MODULE, SYS_RAWIO, BPF, PERFMON,
// SYS_BOOT, SYS_TIME, MAC_ADMIN, MAC_OVERRIDE and SYSLOG act on the
// kernel, the host's network or mounts, devices, the clock, security
// policy or the kernel log; MKNOD would put a device node (a raw disk)
// in the workspace. The ordinary file, ownership, kill and
// setuid powers of root stay: Landlock and seccomp bound those.
var droppedCaps = []int{
	unix.CAP_SYS_PTRACE, unix.CAP_CHECKPOINT_RESTORE, unix.CAP_DAC_READ_SEARCH,
	unix.CAP_SYS_ADMIN, unix.CAP_NET_ADMIN, unix.CAP_SYS_MODULE, unix.CAP_SYS_RAWIO,
	unix.CAP_BPF, unix.CAP_PERFMON, unix.CAP_SYS_BOOT, unix.CAP_SYS_TIME,
	unix.CAP_MAC_ADMIN, unix.CAP_MAC_OVERRIDE, unix.CAP_SYSLOG, unix.CAP_MKNOD,
}

// droppedCapNames are droppedCaps as bwrap's --cap-drop takes them.
var droppedCapNames = []string{
	"CAP_SYS_PTRACE", "CAP_CHECKPOINT_RESTORE", "CAP_DAC_READ_SEARCH",
	"CAP_SYS_ADMIN", "CAP_NET_ADMIN", "CAP_SYS_MODULE", "CAP_SYS_RAWIO",
	"CAP_BPF", "CAP_PERFMON", "CAP_SYS_BOOT", "CAP_SYS_TIME",
	"CAP_MAC_ADMIN", "CAP_MAC_OVERRIDE", "CAP_SYSLOG", "CAP_MKNOD",
}

// dropCaps removes droppedCaps from the calling thread's bounding,
// effective, permitted, inheritable and ambient sets; a forked child and
// whatever it execs (root included) can never get them back.
func dropCaps() error {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return fmt.Errorf("capget: %w", err)
	}
	held := func(c int) bool { return data[c/32].Permitted&(1<<(c%32)) != 0 }
	for _, c := range droppedCaps {
		err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0)
		switch {
		case err == nil, errors.Is(err, unix.EINVAL):
			// EINVAL: a capability this kernel does not know.
		case errors.Is(err, unix.EPERM) && (!held(c) || os.Getuid() != 0):
			// Without CAP_SETPCAP the bounding set stays (in a user
			// namespace, where the helper holds CAP_SYS_ADMIN for its
			// /proc), but nothing regains a capability once it is out
			// of the permitted set below, unless it execs as root:
			// no_new_privs caps what setuid and file capabilities give
			// at the permitted set the exec started with.
		default:
			return fmt.Errorf("drop capability %d: %w", c, err)
		}
	}
	for _, c := range droppedCaps {
		bit := uint32(1) << (c % 32)
		data[c/32].Effective &^= bit
		data[c/32].Permitted &^= bit
		data[c/32].Inheritable &^= bit
	}
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return fmt.Errorf("capset: %w", err)
	}
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil && !errors.Is(err, unix.EINVAL) {
		return fmt.Errorf("clear ambient capabilities: %w", err)
	}
	return nil
}
