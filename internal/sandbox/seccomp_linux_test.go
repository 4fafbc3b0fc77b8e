//go:build linux && (amd64 || arm64 || riscv64 || loong64)

package sandbox

import (
	"encoding/binary"
	"runtime"
	"testing"

	"golang.org/x/sys/unix"
)

// runBPF interprets the subset of classic BPF that seccompFilter emits,
// over a seccomp_data built from nr, arch and args.
func runBPF(t *testing.T, prog []unix.SockFilter, nr int, arch uint32, args ...uint64) uint32 {
	t.Helper()
	data := make([]byte, 64)
	binary.LittleEndian.PutUint32(data[offNR:], uint32(nr))
	binary.LittleEndian.PutUint32(data[offArch:], arch)
	for i, a := range args {
		binary.LittleEndian.PutUint64(data[offArg0+8*i:], a)
	}
	var acc uint32
	for pc := 0; pc < len(prog); pc++ {
		in := prog[pc]
		switch in.Code {
		case unix.BPF_LD | unix.BPF_W | unix.BPF_ABS:
			acc = binary.LittleEndian.Uint32(data[in.K:])
		case unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, unix.BPF_JMP | unix.BPF_JGE | unix.BPF_K:
			hit := acc == in.K
			if in.Code&0xf0 == unix.BPF_JGE {
				hit = acc >= in.K
			}
			if hit {
				pc += int(in.Jt)
			} else {
				pc += int(in.Jf)
			}
		case unix.BPF_RET | unix.BPF_K:
			return in.K
		default:
			t.Fatalf("unexpected instruction %+v", in)
		}
	}
	t.Fatal("program fell off its end")
	return 0
}

func TestSeccompFilter(t *testing.T) {
	native := nativeAuditArch()
	const garbage = 0xdead_beef_0000_0000
	type call struct {
		name     string
		arch     uint32
		nr       int
		args     []uint64
		denyNet  uint32 // verdict with network off
		allowNet uint32 // verdict with network on
	}
	calls := []call{
		{"read", native, unix.SYS_READ, nil, retAllow, retAllow},
		{"unix socket", native, unix.SYS_SOCKET, []uint64{unix.AF_UNIX}, retAllow, retAllow},
		{"inet socket", native, unix.SYS_SOCKET, []uint64{unix.AF_INET}, retEPERM, retAllow},
		{"inet6 socket", native, unix.SYS_SOCKET, []uint64{unix.AF_INET6}, retEPERM, retAllow},
		{"netlink socket", native, unix.SYS_SOCKET, []uint64{unix.AF_NETLINK}, retEPERM, retAllow},
		{"io_uring", native, unix.SYS_IO_URING_SETUP, nil, retEPERM, retAllow},
		{"ioctl TCGETS", native, unix.SYS_IOCTL, []uint64{0, unix.TCGETS}, retAllow, retAllow},
		{"ioctl TIOCSTI", native, unix.SYS_IOCTL, []uint64{0, unix.TIOCSTI}, retEPERM, retEPERM},
		{"ioctl TIOCSTI, high garbage", native, unix.SYS_IOCTL, []uint64{0, garbage | unix.TIOCSTI}, retEPERM, retEPERM},
		{"ioctl TIOCLINUX", native, unix.SYS_IOCTL, []uint64{0, unix.TIOCLINUX}, retEPERM, retEPERM},
	}
	if runtime.GOARCH == "amd64" {
		calls = append(calls,
			call{"x32", native, 0x40000000 | unix.SYS_SOCKET, []uint64{unix.AF_INET}, retENOSYS, retENOSYS},
			call{"i386 read", unix.AUDIT_ARCH_I386, 3, nil, retAllow, retAllow},
			call{"i386 socketcall", unix.AUDIT_ARCH_I386, i386Socketcall, []uint64{1}, retEPERM, retAllow},
			call{"i386 inet socket", unix.AUDIT_ARCH_I386, i386Socket, []uint64{unix.AF_INET}, retEPERM, retAllow},
			call{"i386 unix socket", unix.AUDIT_ARCH_I386, i386Socket, []uint64{unix.AF_UNIX}, retAllow, retAllow},
			call{"i386 TIOCSTI", unix.AUDIT_ARCH_I386, i386Ioctl, []uint64{0, unix.TIOCSTI}, retEPERM, retEPERM},
			call{"unknown arch", 0x1234, 1, nil, retENOSYS, retENOSYS},
		)
	}
	for _, denyNet := range []bool{true, false} {
		prog, err := seccompFilter(denyNet)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range calls {
			want := c.allowNet
			if denyNet {
				want = c.denyNet
			}
			if got := runBPF(t, prog, c.nr, c.arch, c.args...); got != want {
				t.Errorf("denyNet=%v %s: verdict %#x, want %#x", denyNet, c.name, got, want)
			}
		}
	}
}
