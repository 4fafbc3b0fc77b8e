package proc

import "syscall"

// waitNoWait is WNOWAIT in <sys/wait.h>.
const waitNoWait = 0x20

// setPdeathsig does nothing: macOS has no parent-death signal, so only the
// guardian ends a group when dsh dies.
func setPdeathsig(*syscall.SysProcAttr) {}

// siginfoStatus is the offset of si_status in macOS's siginfo_t: si_signo,
// si_errno, si_code, si_pid, si_uid, then si_status, all 32-bit.
func siginfoStatus() int { return 20 }
