package proc

import (
	"slices"
	"syscall"

	"golang.org/x/sys/unix"
)

// waitNoWait is WNOWAIT in <sys/wait.h>.
const waitNoWait = 0x20

// setPdeathsig does nothing: macOS has no parent-death signal, so only the
// guardian ends a group when dsh dies.
func setPdeathsig(*syscall.SysProcAttr) {}

// siginfoStatus is the offset of si_status in macOS's siginfo_t: si_signo,
// si_errno, si_code, si_pid, si_uid, then si_status, all 32-bit.
func siginfoStatus() int { return 20 }

// sZomb is SZOMB in <sys/proc.h>: a zombie.
const sZomb = 5

// groupMembers lists the live (not zombie) processes of group pgid, in
// ascending pid order, from the kernel's process table (there is no
// /proc). Should the query fail it cannot tell members from the
// unreaped leader, so it returns pgid unless the group is gone.
func groupMembers(pgid int) []int {
	procs, err := unix.SysctlKinfoProcSlice("kern.proc.pgrp", pgid)
	if err != nil {
		if syscall.Kill(-pgid, 0) == syscall.ESRCH {
			return nil
		}
		return []int{pgid}
	}
	var pids []int
	for _, p := range procs {
		if int(p.Eproc.Pgid) == pgid && p.Proc.P_stat != sZomb {
			pids = append(pids, int(p.Proc.P_pid))
		}
	}
	slices.Sort(pids)
	return pids
}
