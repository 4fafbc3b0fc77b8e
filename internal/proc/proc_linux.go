package proc

import (
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

// groupMembers lists the live (not zombie) processes of group pgid.
func groupMembers(pgid int) []int { return procGroupMembers(pgid) }
