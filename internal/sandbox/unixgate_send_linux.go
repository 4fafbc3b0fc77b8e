//go:build linux && (amd64 || arm64 || riscv64 || loong64)

package sandbox

import (
	"encoding/binary"
	"unsafe"

	"golang.org/x/sys/unix"
)

// gateMsg is one message to send on the caller's behalf, copied out of
// its memory.
type gateMsg struct {
	data    []byte
	name    []byte
	control []byte
	flags   int
	// short: the caller asked for more than maxGateSend bytes.
	short bool
}

// readData copies the message data described by iovs.
func (gs *gate) readData(c callerCtx, m *gateMsg, iovs []remoteIov) unix.Errno {
	total := uint64(0)
	var take []remoteIov
	for _, v := range iovs {
		if int64(v.len) < 0 {
			return unix.EINVAL
		}
		if total+v.len > maxGateSend {
			m.short = true
			if rest := maxGateSend - total; rest > 0 {
				take = append(take, remoteIov{v.base, rest})
				total += rest
			}
			break
		}
		take = append(take, v)
		total += v.len
	}
	b, errno := gs.readMem(c, take, int(total))
	m.data = b
	return errno
}

// readName copies a destination address (sendto's addrlen is an int;
// one over sockaddrMax is refused).
func (gs *gate) readName(c callerCtx, m *gateMsg, addr uint64, n int32) unix.Errno {
	if addr == 0 || n == 0 {
		return 0
	}
	if n < 0 || n > sockaddrMax {
		return unix.EINVAL
	}
	b, errno := gs.readMem(c, []remoteIov{{addr, uint64(n)}}, int(n))
	m.name = b
	return errno
}

// readMsghdr copies a struct msghdr (LP64 layout) and what it points to.
func (gs *gate) readMsghdr(c callerCtx, m *gateMsg, addr uint64) unix.Errno {
	h, errno := gs.readMem(c, []remoteIov{{addr, msghdrSize}}, msghdrSize)
	if errno != 0 {
		return errno
	}
	le := binary.NativeEndian
	name, namelen := le.Uint64(h[0:]), int32(le.Uint32(h[8:]))
	if name != 0 && namelen > sockaddrMax {
		namelen = sockaddrMax // as the kernel's copy_msghdr_from_user does
	}
	iov, iovlen := le.Uint64(h[16:]), le.Uint64(h[24:])
	ctl, ctllen := le.Uint64(h[32:]), le.Uint64(h[40:])
	if iovlen > maxGateIov {
		return unix.EMSGSIZE
	}
	var iovs []remoteIov
	if iovlen > 0 {
		raw, errno := gs.readMem(c, []remoteIov{{iov, iovlen * 16}}, int(iovlen*16))
		if errno != 0 {
			return errno
		}
		for i := range int(iovlen) {
			iovs = append(iovs, remoteIov{le.Uint64(raw[16*i:]), le.Uint64(raw[16*i+8:])})
		}
	}
	if errno := gs.readData(c, m, iovs); errno != 0 {
		return errno
	}
	if errno := gs.readName(c, m, name, namelen); errno != 0 {
		return errno
	}
	if ctl != 0 && ctllen > 0 {
		if ctllen > maxGateControl {
			return unix.ENOBUFS
		}
		b, errno := gs.readMem(c, []remoteIov{{ctl, ctllen}}, int(ctllen))
		if errno != 0 {
			return errno
		}
		m.control = b
	}
	return 0
}

// send performs sendmsg(2) of m on the caller's socket.
func (gs *gate) send(c callerCtx, sock int, m *gateMsg) (int64, unix.Errno) {
	if m.short {
		typ, err := unix.GetsockoptInt(sock, unix.SOL_SOCKET, unix.SO_TYPE)
		if err != nil {
			return 0, errnoOf(err)
		}
		if typ != unix.SOCK_STREAM {
			return 0, unix.EMSGSIZE
		}
	}
	name, cleanup, errno := gs.checkAddr(c, m.name)
	if errno != 0 {
		return 0, errno
	}
	defer cleanup()
	control, closeFDs, errno := takeRights(c, m.control)
	if errno != 0 {
		return 0, errno
	}
	defer closeFDs()

	var h unix.Msghdr
	var iov unix.Iovec
	if len(m.data) > 0 {
		iov = unix.Iovec{Base: &m.data[0], Len: uint64(len(m.data))}
		h.Iov, h.Iovlen = &iov, 1
	}
	if len(name) > 0 {
		h.Name, h.Namelen = &name[0], uint32(len(name))
	}
	if len(control) > 0 {
		h.Control, h.Controllen = &control[0], uint64(len(control))
	}
	n, e := gs.syscall(abstractAddr(name), unix.SYS_SENDMSG, sock, unsafe.Pointer(&h), uintptr(m.flags|unix.MSG_NOSIGNAL))
	if e != 0 {
		if e == unix.EPIPE && m.flags&unix.MSG_NOSIGNAL == 0 {
			// What the kernel would have done to the caller.
			_ = unix.PidfdSendSignal(c.pidfd, unix.SIGPIPE, nil, 0)
		}
		return 0, e
	}
	return int64(n), 0
}

// sendmmsg sends each struct mmsghdr in turn and stores its msg_len, as
// the kernel does: an error after the first message ends the batch with
// the count sent so far.
func (gs *gate) sendmmsg(c callerCtx, sock int, vec, vlen uint64, flags int) (int64, unix.Errno) {
	vlen = min(vlen, maxGateIov)
	sent := int64(0)
	for i := range vlen {
		at := vec + i*mmsghdrSize
		var m gateMsg
		errno := gs.readMsghdr(c, &m, at)
		var n int64
		if errno == 0 {
			m.flags = flags
			n, errno = gs.send(c, sock, &m)
		}
		if errno != 0 {
			if sent > 0 {
				return sent, 0
			}
			return 0, errno
		}
		var l [4]byte
		binary.NativeEndian.PutUint32(l[:], uint32(n))
		if _, err := unix.ProcessVMWritev(c.tid, []unix.Iovec{{Base: &l[0], Len: 4}},
			[]unix.RemoteIovec{{Base: uintptr(at + msghdrSize), Len: 4}}, 0); err != nil {
			return sent, 0
		}
		sent++
		if flags&unix.MSG_WAITFORONE != 0 {
			flags |= unix.MSG_DONTWAIT
		}
	}
	return sent, 0
}

// takeRights copies the caller's control messages, replacing the
// descriptors of SCM_RIGHTS messages by ours (duplicated from the caller
// with pidfd_getfd); closeFDs closes them after the send.
func takeRights(c callerCtx, control []byte) ([]byte, func(), unix.Errno) {
	var fds []int
	closeFDs := func() {
		for _, fd := range fds {
			unix.Close(fd)
		}
	}
	if len(control) == 0 {
		return nil, closeFDs, 0
	}
	out := append([]byte(nil), control...)
	hdr := unix.SizeofCmsghdr
	for off := 0; off+hdr <= len(out); {
		le := binary.NativeEndian
		clen := int(le.Uint64(out[off:]))
		level, typ := int32(le.Uint32(out[off+8:])), int32(le.Uint32(out[off+12:]))
		if clen < hdr || off+clen > len(out) {
			closeFDs()
			return nil, func() {}, unix.EINVAL
		}
		if level == unix.SOL_SOCKET && typ == unix.SCM_RIGHTS {
			for p := off + hdr; p+4 <= off+clen; p += 4 {
				fd, err := unix.PidfdGetfd(c.pidfd, int(int32(le.Uint32(out[p:]))), 0)
				if err != nil {
					closeFDs()
					return nil, func() {}, errnoOf(err)
				}
				fds = append(fds, fd)
				le.PutUint32(out[p:], uint32(fd))
			}
		}
		off += (clen + 7) &^ 7 // CMSG_ALIGN on LP64
	}
	return out, closeFDs, 0
}
