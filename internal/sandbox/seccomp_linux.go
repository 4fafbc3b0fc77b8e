//go:build linux && (amd64 || arm64 || riscv64 || loong64)

package sandbox

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The seccomp filter is assembled here rather than with go-seccomp-bpf,
// because that library compares whole 64-bit arguments (ioctl's request
// is a 32-bit int to the kernel, so garbage in the upper half would slip
// a TIOCSTI past an Equal test) and lets every syscall of a foreign
// architecture through (int 0x80 from a 64-bit process reaches the i386
// socketcall). The program is short enough to read.

// seccomp_data offsets: nr, arch, then six 64-bit args (little-endian on
// every architecture this file builds for, so the low half comes first).
const (
	offNR   = 0
	offArch = 4
	offArg0 = 16
	offArg1 = 24
)

const (
	retAllow  = unix.SECCOMP_RET_ALLOW
	retEPERM  = unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)
	retENOSYS = unix.SECCOMP_RET_ERRNO | uint32(unix.ENOSYS)
)

// i386 syscall numbers, for 32-bit calls made from an amd64 process.
const (
	i386Ioctl        = 54
	i386Socketcall   = 102
	i386Socket       = 359
	i386IoUringSetup = 425
	x32Bit           = 0x40000000
)

func nativeAuditArch() uint32 {
	switch runtime.GOARCH {
	case "amd64":
		return unix.AUDIT_ARCH_X86_64
	case "arm64":
		return unix.AUDIT_ARCH_AARCH64
	case "riscv64":
		return unix.AUDIT_ARCH_RISCV64
	case "loong64":
		return unix.AUDIT_ARCH_LOONGARCH64
	}
	return 0
}

var seccompOnce = sync.OnceValue(func() bool {
	// PR_GET_SECCOMP fails with EINVAL on a kernel built without seccomp.
	_, err := unix.PrctlRetInt(unix.PR_GET_SECCOMP, 0, 0, 0, 0)
	return err == nil
})

// seccompSupported reports whether the helper can install its filter.
func seccompSupported() bool { return seccompOnce() }

// bpfProg is a tiny assembler with forward jumps to named labels.
type bpfProg struct {
	ins    []unix.SockFilter
	jumps  map[int][2]string // instruction → (true, false) labels
	labels map[string]int
}

func (p *bpfProg) ld(off uint32) {
	p.ins = append(p.ins, unix.SockFilter{Code: unix.BPF_LD | unix.BPF_W | unix.BPF_ABS, K: off})
}

func (p *bpfProg) ret(k uint32) {
	p.ins = append(p.ins, unix.SockFilter{Code: unix.BPF_RET | unix.BPF_K, K: k})
}

// jmp compares the accumulator with k; "" as a label falls through.
func (p *bpfProg) jmp(op uint16, k uint32, ifTrue, ifFalse string) {
	p.jumps[len(p.ins)] = [2]string{ifTrue, ifFalse}
	p.ins = append(p.ins, unix.SockFilter{Code: unix.BPF_JMP | op | unix.BPF_K, K: k})
}

func (p *bpfProg) label(name string) { p.labels[name] = len(p.ins) }

func (p *bpfProg) assemble() ([]unix.SockFilter, error) {
	for i, l := range p.jumps {
		for j, name := range l {
			if name == "" {
				continue
			}
			to, ok := p.labels[name]
			if !ok || to <= i || to-i-1 > 255 {
				return nil, fmt.Errorf("seccomp: bad jump to %q", name)
			}
			if j == 0 {
				p.ins[i].Jt = uint8(to - i - 1)
			} else {
				p.ins[i].Jf = uint8(to - i - 1)
			}
		}
	}
	return p.ins, nil
}

// newNativeProg starts a filter program the same way for every filter:
// a foreign architecture jumps to "foreign", the x32 ABI (used by nothing
// we run) to "enosys", and the syscall number is loaded for what follows.
func newNativeProg() (*bpfProg, error) {
	native := nativeAuditArch()
	if native == 0 {
		return nil, errors.New("seccomp: unsupported architecture " + runtime.GOARCH)
	}
	p := &bpfProg{jumps: map[int][2]string{}, labels: map[string]int{}}
	p.ld(offArch)
	p.jmp(unix.BPF_JEQ, native, "", "foreign")
	p.ld(offNR)
	if runtime.GOARCH == "amd64" {
		p.jmp(unix.BPF_JGE, x32Bit, "enosys", "")
	}
	return p, nil
}

// seccompFilter builds the helper's filter: TIOCSTI and TIOCLINUX ioctls
// (typing into the user's terminal) are always refused; without network,
// so are sockets other than AF_UNIX and io_uring (whose socket
// operations bypass seccomp). Refusals are EPERM, which prints as
// "Operation not permitted" and so reads as a denial.
func seccompFilter(denyNet bool) ([]unix.SockFilter, error) {
	p, err := newNativeProg()
	if err != nil {
		return nil, err
	}
	p.jmp(unix.BPF_JEQ, unix.SYS_IOCTL, "ioctl", "")
	if denyNet {
		p.jmp(unix.BPF_JEQ, unix.SYS_SOCKET, "socket", "")
		p.jmp(unix.BPF_JEQ, unix.SYS_IO_URING_SETUP, "eperm", "")
	}
	p.ret(retAllow)

	p.label("foreign")
	if runtime.GOARCH == "amd64" {
		p.jmp(unix.BPF_JEQ, unix.AUDIT_ARCH_I386, "", "enosys")
		p.ld(offNR)
		p.jmp(unix.BPF_JEQ, i386Ioctl, "ioctl", "")
		if denyNet {
			// socketcall hides its arguments behind a pointer, so it is
			// refused whole.
			p.jmp(unix.BPF_JEQ, i386Socketcall, "eperm", "")
			p.jmp(unix.BPF_JEQ, i386Socket, "socket", "")
			p.jmp(unix.BPF_JEQ, i386IoUringSetup, "eperm", "")
		}
		p.ret(retAllow)
	} else {
		// A compat architecture this filter does not know: refuse all.
		p.ret(retENOSYS)
	}

	p.label("ioctl")
	p.ld(offArg1) // low half: the kernel truncates the request to 32 bits
	p.jmp(unix.BPF_JEQ, unix.TIOCSTI, "eperm", "")
	p.jmp(unix.BPF_JEQ, unix.TIOCLINUX, "eperm", "")
	p.ret(retAllow)

	p.label("socket")
	p.ld(offArg0) // low half of the domain, an int to the kernel
	p.jmp(unix.BPF_JEQ, unix.AF_UNIX, "allow", "eperm")

	p.label("allow")
	p.ret(retAllow)
	p.label("eperm")
	p.ret(retEPERM)
	p.label("enosys")
	p.ret(retENOSYS)
	return p.assemble()
}

// loadSeccomp installs the filter on the calling thread (which then
// execs); no_new_privs must already be set.
func loadSeccomp(denyNet bool) error {
	ins, err := seccompFilter(denyNet)
	if err != nil {
		return err
	}
	prog := unix.SockFprog{Len: uint16(len(ins)), Filter: &ins[0]}
	if err := unix.Prctl(unix.PR_SET_SECCOMP, unix.SECCOMP_MODE_FILTER, uintptr(unsafe.Pointer(&prog)), 0, 0); err != nil {
		return fmt.Errorf("seccomp: %w", err)
	}
	return nil
}
