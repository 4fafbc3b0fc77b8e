//go:build linux && (amd64 || arm64 || riscv64 || loong64)

package sandbox

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The supervisor never lets the caller's syscall proceed on its own
// (SECCOMP_USER_NOTIF_FLAG_CONTINUE): another thread of the caller could
// rewrite the address, or swap the file descriptor, between the check
// and the kernel's second read. It takes the caller's socket with
// pidfd_getfd, reads the arguments once, and makes the call itself with
// exactly what it checked; a pathname UNIX address is replaced by
// /proc/self/fd/N of an O_PATH descriptor of the checked socket inode.
//
// Datagram sends with an address (sendto, sendmsg, sendmmsg) are
// emulated the same way: the data and ancillary data are copied from the
// caller (at most maxGateSend bytes per message; a longer stream send is
// a short write, a longer datagram EMSGSIZE), SCM_RIGHTS descriptors are
// taken from the caller with pidfd_getfd. Credentials the kernel attaches
// (SO_PEERCRED, SO_PASSCRED) name the helper process, which runs as the
// same user.

const (
	maxGateSend    = 4 << 20
	maxGateControl = 64 << 10
	maxGateIov     = 1024 // UIO_MAXIOV
	sockaddrMax    = 128  // sizeof(struct sockaddr_storage)
	msghdrSize     = 56
	mmsghdrSize    = 64
)

// pidfdThread is PIDFD_THREAD (= O_EXCL): a pidfd for one thread.
const pidfdThread = unix.O_EXCL

// callerCtx is what a notified call needs of its caller.
type callerCtx struct {
	tid   int
	pidfd int
	id    uint64
}

// perform runs the notified call and returns its result or errno.
func (gs *gate) perform(n *seccompNotif) (int64, unix.Errno) {
	c, errno := gs.attach(n)
	if errno != 0 {
		return 0, errno
	}
	defer unix.Close(c.pidfd)
	sock, err := unix.PidfdGetfd(c.pidfd, int(int32(n.Args[0])), 0)
	if err != nil {
		return 0, errnoOf(err)
	}
	defer unix.Close(sock)
	switch int(n.Nr) {
	case unix.SYS_CONNECT:
		return gs.connect(c, sock, n.Args[1], int32(n.Args[2]))
	case unix.SYS_SENDTO:
		m := gateMsg{flags: int(int32(n.Args[3]))}
		if errno := gs.readData(c, &m, []remoteIov{{n.Args[1], n.Args[2]}}); errno != 0 {
			return 0, errno
		}
		if errno := gs.readName(c, &m, n.Args[4], int32(n.Args[5])); errno != 0 {
			return 0, errno
		}
		return gs.send(c, sock, &m)
	case unix.SYS_SENDMSG:
		var m gateMsg
		if errno := gs.readMsghdr(c, &m, n.Args[1]); errno != 0 {
			return 0, errno
		}
		m.flags = int(int32(n.Args[2]))
		return gs.send(c, sock, &m)
	case unix.SYS_SENDMMSG:
		return gs.sendmmsg(c, sock, n.Args[1], uint64(uint32(n.Args[2])), int(int32(n.Args[3])))
	}
	return 0, unix.ENOSYS
}

// attach opens a pidfd for the caller's process; the notification is
// checked afterwards, so the pidfd cannot name a process that reused
// the pid.
func (gs *gate) attach(n *seccompNotif) (callerCtx, unix.Errno) {
	c := callerCtx{tid: int(n.Pid), id: n.ID}
	// A pidfd for the calling thread itself (Linux 6.9); before that,
	// one for its process, found through /proc.
	fd, err := unix.PidfdOpen(c.tid, pidfdThread)
	if errors.Is(err, unix.EINVAL) {
		tgid, terr := threadGroup(c.tid)
		if terr != nil {
			return c, unix.ESRCH
		}
		fd, err = unix.PidfdOpen(tgid, 0)
	}
	if err != nil {
		return c, errnoOf(err)
	}
	if !gs.valid(n.ID) {
		unix.Close(fd)
		return c, unix.ESRCH
	}
	c.pidfd = fd
	return c, 0
}

// threadGroup reads a thread's process id from /proc.
func threadGroup(tid int) (int, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(tid) + "/status")
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "Tgid:"); ok {
			return strconv.Atoi(strings.TrimSpace(v))
		}
	}
	return 0, unix.ESRCH
}

func errnoOf(err error) unix.Errno {
	if e, ok := err.(unix.Errno); ok {
		return e
	}
	return unix.EACCES
}

type remoteIov struct{ base, len uint64 }

// readMem copies n bytes at addr from the caller, then checks that the
// caller is still the one that made the call.
func (gs *gate) readMem(c callerCtx, iovs []remoteIov, n int) ([]byte, unix.Errno) {
	buf := make([]byte, n)
	if n > 0 {
		remote := make([]unix.RemoteIovec, 0, len(iovs))
		for _, v := range iovs {
			if v.len > 0 {
				remote = append(remote, unix.RemoteIovec{Base: uintptr(v.base), Len: int(v.len)})
			}
		}
		got, err := unix.ProcessVMReadv(c.tid, []unix.Iovec{{Base: &buf[0], Len: uint64(n)}}, remote, 0)
		if err != nil {
			if err == unix.ESRCH {
				return nil, unix.ESRCH
			}
			return nil, unix.EFAULT
		}
		if got != n {
			return nil, unix.EFAULT
		}
	}
	if !gs.valid(c.id) {
		return nil, unix.ESRCH
	}
	return buf, 0
}

// connect performs connect(2) on the caller's socket.
func (gs *gate) connect(c callerCtx, sock int, addr uint64, addrlen int32) (int64, unix.Errno) {
	// The kernel takes addrlen as an int: the register's upper half is
	// ignored.
	if addrlen < 0 || addrlen > sockaddrMax {
		return 0, unix.EINVAL
	}
	sa, errno := gs.readMem(c, []remoteIov{{addr, uint64(addrlen)}}, int(addrlen))
	if errno != 0 {
		return 0, errno
	}
	sa, cleanup, errno := gs.checkAddr(c, sa)
	if errno != 0 {
		return 0, errno
	}
	defer cleanup()
	var p unsafe.Pointer
	if len(sa) > 0 {
		p = unsafe.Pointer(&sa[0])
	}
	_, e := gs.syscall(abstractAddr(sa), unix.SYS_CONNECT, sock, p, uintptr(len(sa)))
	return 0, e
}

// syscall makes a call nr(fd, p, n) for the caller: on the confining
// thread when its address is abstract (Landlock scopes those to the
// command's domain), else here. p stays a pointer until the syscall
// itself, so that what it points to is kept alive and not moved.
func (gs *gate) syscall(abstract bool, nr uintptr, fd int, p unsafe.Pointer, n uintptr) (uintptr, unix.Errno) {
	if abstract && gs.confined != nil {
		return gs.confined.do(confinedCall{nr: nr, fd: fd, p: p, n: n})
	}
	r, _, e := unix.Syscall(nr, uintptr(fd), uintptr(p), n)
	return r, e
}

// abstractAddr reports whether sa is an abstract UNIX address.
func abstractAddr(sa []byte) bool {
	return len(sa) > 2 && binary.NativeEndian.Uint16(sa) == unix.AF_UNIX && sa[2] == 0
}

// checkAddr passes every address through unchanged except a pathname
// UNIX one, which must lead to an allowed socket and is replaced by a
// /proc/self/fd path of that very inode; cleanup closes its descriptor.
// Abstract and unnamed UNIX addresses keep today's handling (Landlock's
// scope, bwrap's network namespace).
func (gs *gate) checkAddr(c callerCtx, sa []byte) ([]byte, func(), unix.Errno) {
	nop := func() {}
	if len(sa) <= 2 || binary.NativeEndian.Uint16(sa) != unix.AF_UNIX || sa[2] == 0 {
		return sa, nop, 0
	}
	path := sa[2:]
	if i := bytes.IndexByte(path, 0); i >= 0 {
		path = path[:i]
	}
	fd, errno := gs.resolve(c, string(path))
	if errno != 0 {
		return nil, nop, errno
	}
	return sockaddrUnix("/proc/self/fd/" + strconv.Itoa(fd)), func() { unix.Close(fd) }, 0
}

func sockaddrUnix(path string) []byte {
	b := make([]byte, 2+len(path)+1)
	binary.NativeEndian.PutUint16(b, unix.AF_UNIX)
	copy(b[2:], path)
	return b
}

// resolve opens the socket path as the caller would reach it (relative
// to its cwd, following symlinks but no /proc magic links) and returns
// an O_PATH descriptor when its canonical location is allowed. A caller
// in another root (chroot) is refused: its paths do not mean ours.
func (gs *gate) resolve(c callerCtx, path string) (int, unix.Errno) {
	proc := "/proc/" + strconv.Itoa(c.tid)
	if root, err := os.Readlink(proc + "/root"); err != nil || root != "/" {
		gs.refused(path)
		return -1, unix.EACCES
	}
	dir := unix.AT_FDCWD
	if !filepath.IsAbs(path) {
		d, err := unix.Open(proc+"/cwd", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return -1, unix.ESRCH
		}
		defer unix.Close(d)
		if !gs.valid(c.id) {
			return -1, unix.ESRCH
		}
		dir = d
	}
	fd, err := unix.Openat2(dir, path, &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_NO_MAGICLINKS,
	})
	if err == nil && !gs.valid(c.id) {
		// The pid named another process by the time its root was read.
		unix.Close(fd)
		return -1, unix.ESRCH
	}
	if err != nil {
		if err == unix.ELOOP {
			// A magic link (/proc/self/fd/N) would name our own files.
			gs.refused(path)
			return -1, unix.EACCES
		}
		return -1, errnoOf(err)
	}
	canon, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(fd))
	ok := err == nil && filepath.IsAbs(canon) && !strings.HasSuffix(canon, " (deleted)")
	if ok {
		var root string
		if root, ok = gs.spec.allows(canon); ok && root != "" {
			ok = gs.beneathRoot(root, canon, fd)
		}
	}
	if !ok {
		unix.Close(fd)
		if err == nil && filepath.IsAbs(canon) {
			path = canon
		}
		gs.refused(path)
		return -1, unix.EACCES
	}
	return fd, 0
}

// beneathRoot reports whether the socket open as fd, found at canonical
// path canon under root, lies beneath root's own directory (RootIDs):
// the directory now at root's path must be that one, and the path from
// it, followed again in the supervisor's own mount namespace without
// symlinks, must lead to the same inode. A host socket brought there by
// renaming its directory to a root's name, or by a mount in a namespace
// of the command's, fails one or the other.
func (gs *gate) beneathRoot(root, canon string, fd int) bool {
	id, checked := gs.spec.RootIDs[root]
	if !checked {
		return true
	}
	rel, ok := strings.CutPrefix(canon, root+"/")
	if root == "/" {
		rel, ok = strings.CutPrefix(canon, "/")
	}
	if !ok || rel == "" {
		return false
	}
	rfd, err := unix.Openat2(unix.AT_FDCWD, root, &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_NO_SYMLINKS,
	})
	if err != nil {
		return false
	}
	defer unix.Close(rfd)
	var st unix.Stat_t
	if unix.Fstat(rfd, &st) != nil || (fileID{Dev: st.Dev, Ino: st.Ino}) != id {
		return false
	}
	sfd, err := unix.Openat2(rfd, rel, &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_NOFOLLOW | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS,
	})
	if err != nil {
		return false
	}
	defer unix.Close(sfd)
	var found, sock unix.Stat_t
	return unix.Fstat(sfd, &found) == nil && unix.Fstat(fd, &sock) == nil &&
		found.Dev == sock.Dev && found.Ino == sock.Ino
}

func (gs *gate) refused(path string) {
	if gs.report != nil {
		gs.report(path)
	}
}
