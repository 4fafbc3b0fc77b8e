package proc

import (
	"bytes"
	"os"
	"slices"
	"strconv"
	"syscall"
	"unsafe"
)

// waitNoWait is WNOWAIT.
const waitNoWait = 0x01000000

// setPdeathsig kills the command when dsh dies.
func setPdeathsig(attr *syscall.SysProcAttr) { attr.Pdeathsig = syscall.SIGKILL }

// siginfoStatus is the offset of si_status in siginfo_t: the union after
// the three int32 is pointer-aligned and, for SIGCHLD, holds si_pid,
// si_uid, then si_status.
func siginfoStatus() int {
	ptr := int(unsafe.Sizeof(uintptr(0)))
	return (12+ptr-1)&^(ptr-1) + 8
}

// groupMembers scans /proc for processes in process group pgid that are
// not zombies, in ascending pid order. Should /proc be unreadable, it
// cannot tell members from the unreaped leader: it returns pgid itself
// unless the group is gone altogether, so that cleanup is never confirmed
// on a guess.
func groupMembers(pgid int) []int {
	d, err := os.Open("/proc")
	if err != nil {
		if syscall.Kill(-pgid, 0) == syscall.ESRCH {
			return nil
		}
		return []int{pgid}
	}
	defer d.Close()
	names, _ := d.Readdirnames(-1)
	var pids []int
	var buf [512]byte
	for _, name := range names {
		pid, err := strconv.Atoi(name)
		if err != nil {
			continue
		}
		// getpgid(2) is one cheap system call for any pid; only members
		// pay for reading /proc to tell the live ones from zombies.
		if pg, err := syscall.Getpgid(pid); err != nil || pg != pgid {
			continue
		}
		state, pg, ok := procStat(pid, buf[:])
		if ok && pg == pgid && state != 'Z' && state != 'X' {
			pids = append(pids, pid)
		}
	}
	slices.Sort(pids)
	return pids
}

// procStat reads the state and process group of pid from
// /proc/<pid>/stat into buf. It is on the path of every Run, so it makes
// three plain system calls and no allocation. The command name may
// contain spaces and parentheses, so fields are taken after the last ')'.
func procStat(pid int, buf []byte) (state byte, pgid int, ok bool) {
	fd, err := syscall.Open("/proc/"+strconv.Itoa(pid)+"/stat", syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return 0, 0, false
	}
	n, err := syscall.Read(fd, buf)
	syscall.Close(fd)
	if err != nil || n <= 0 {
		return 0, 0, false
	}
	b := buf[:n]
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, 0, false
	}
	// After ") ": state ppid pgrp ...
	var f [3][]byte
	k := 0
	for _, field := range bytes.SplitN(bytes.TrimLeft(b[i+1:], " "), []byte(" "), 4) {
		if k == 3 {
			break
		}
		f[k] = field
		k++
	}
	if k < 3 || len(f[0]) != 1 {
		return 0, 0, false
	}
	pg, err := strconv.Atoi(string(f[2]))
	if err != nil {
		return 0, 0, false
	}
	return f[0][0], pg, true
}
