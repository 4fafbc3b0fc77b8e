//go:build linux && (amd64 || arm64 || riscv64 || loong64)

package sandbox

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync/atomic"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// gateClientArg makes the test binary a socket client: the gate tests
// run it confined and read what it printed.
const gateClientArg = "__dsh_gate_test_client"

func init() {
	if len(os.Args) > 2 && os.Args[1] == gateClientArg {
		os.Exit(gateClient(os.Args[2], os.Args[3:]))
	}
}

// gateClient performs one socket operation and prints "ok" or the errno
// name; it exits 0 only on success.
func gateClient(op string, args []string) int {
	res, err := clientOp(op, args)
	if err != nil {
		var e syscall.Errno
		if errors.As(err, &e) {
			// The text a C tool prints too, so denial detection sees it.
			fmt.Printf("%s: %s\n", unix.ErrnoName(e), e.Error())
		} else {
			fmt.Println(err)
		}
		return 1
	}
	fmt.Println(res)
	return 0
}

func clientOp(op string, args []string) (string, error) {
	need := func(n int) error {
		if len(args) < n {
			return fmt.Errorf("%s needs %d arguments", op, n)
		}
		return nil
	}
	switch op {
	case "connect", "abstract":
		if err := need(1); err != nil {
			return "", err
		}
		name := args[0]
		if op == "abstract" {
			name = "@" + name
		}
		fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return "", err
		}
		defer unix.Close(fd)
		if err := unix.Connect(fd, &unix.SockaddrUnix{Name: name}); err != nil {
			return "", err
		}
		if _, err := unix.Write(fd, []byte("hello\n")); err != nil {
			return "", err
		}
		return "ok", nil
	case "sendto", "sendmsg":
		if err := need(1); err != nil {
			return "", err
		}
		fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return "", err
		}
		defer unix.Close(fd)
		to := &unix.SockaddrUnix{Name: args[0]}
		if op == "sendto" {
			err = unix.Sendto(fd, []byte(op), 0, to)
		} else {
			_, err = unix.SendmsgN(fd, []byte(op), nil, to, 0)
		}
		if err != nil {
			return "", err
		}
		return "ok", nil
	case "sendmmsg":
		if err := need(1); err != nil {
			return "", err
		}
		return sendmmsgTwo(args[0])
	case "rights":
		if err := need(1); err != nil {
			return "", err
		}
		return sendRights(args[0])
	case "tcp":
		if err := need(1); err != nil {
			return "", err
		}
		c, err := net.Dial("tcp", "127.0.0.1:"+args[0])
		if err != nil {
			return "", err
		}
		c.Close()
		return "ok", nil
	case "race":
		if err := need(3); err != nil {
			return "", err
		}
		n, err := strconv.Atoi(args[2])
		if err != nil {
			return "", err
		}
		return race(args[0], args[1], n)
	case "selfconnect":
		// What a test suite does with t.TempDir(): a server and a
		// client on a socket under $TMPDIR.
		path := filepath.Join(os.TempDir(), "self-"+strconv.Itoa(os.Getpid())+".sock")
		ln, err := net.Listen("unix", path)
		if err != nil {
			return "", err
		}
		defer ln.Close()
		c, err := net.Dial("unix", path)
		if err != nil {
			return "", err
		}
		c.Close()
		return "ok " + filepath.Dir(path), nil
	case "selfabstract":
		// An abstract server and client inside the sandbox.
		name := "@dsh-gate-test-" + strconv.Itoa(os.Getpid())
		ln, err := net.Listen("unix", name)
		if err != nil {
			return "", err
		}
		defer ln.Close()
		c, err := net.Dial("unix", name)
		if err != nil {
			return "", err
		}
		c.Close()
		return "ok", nil
	case "loop":
		if err := need(2); err != nil {
			return "", err
		}
		n, err := strconv.Atoi(args[1])
		if err != nil {
			return "", err
		}
		for range n {
			if _, err := clientOp("connect", args[:1]); err != nil {
				return "", err
			}
		}
		return "ok", nil
	}
	return "", fmt.Errorf("unknown op %q", op)
}

// sendmmsgTwo sends two datagrams to path in one sendmmsg(2).
func sendmmsgTwo(path string) (string, error) {
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return "", err
	}
	defer unix.Close(fd)
	sa := rawSockaddr(path)
	type mmsghdr struct {
		hdr unix.Msghdr
		len uint32
		_   [4]byte
	}
	data := [][]byte{[]byte("one"), []byte("two")}
	iovs := make([]unix.Iovec, 2)
	msgs := make([]mmsghdr, 2)
	for i := range msgs {
		iovs[i] = unix.Iovec{Base: &data[i][0], Len: uint64(len(data[i]))}
		msgs[i].hdr = unix.Msghdr{Name: &sa[0], Namelen: uint32(len(sa)), Iov: &iovs[i], Iovlen: 1}
	}
	n, _, e := unix.Syscall6(unix.SYS_SENDMMSG, uintptr(fd), uintptr(unsafe.Pointer(&msgs[0])), 2, 0, 0, 0)
	if e != 0 {
		return "", e
	}
	return fmt.Sprintf("ok %d %d %d", n, msgs[0].len, msgs[1].len), nil
}

// sendRights connects to path and passes it the read end of a pipe with
// "piped" in it.
func sendRights(path string) (string, error) {
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return "", err
	}
	defer unix.Close(fd)
	if err := unix.Connect(fd, &unix.SockaddrUnix{Name: path}); err != nil {
		return "", err
	}
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		return "", err
	}
	if _, err := unix.Write(p[1], []byte("piped")); err != nil {
		return "", err
	}
	unix.Close(p[1])
	if err := unix.Sendmsg(fd, []byte("r"), unix.UnixRights(p[0]), nil, 0); err != nil {
		return "", err
	}
	return "ok", nil
}

func rawSockaddr(path string) []byte {
	b := make([]byte, 2+108)
	*(*uint16)(unsafe.Pointer(&b[0])) = unix.AF_UNIX
	copy(b[2:], path)
	return b
}

// race connects n times through one address buffer while another thread
// keeps rewriting it between allowed and outside: a gate that let the
// kernel re-read the address after checking it would sometimes connect
// to outside.
func race(allowed, outside string, n int) (string, error) {
	runtime.GOMAXPROCS(max(2, runtime.GOMAXPROCS(0)))
	buf := rawSockaddr(allowed)
	a, o := rawSockaddr(allowed), rawSockaddr(outside)
	var stop atomic.Bool
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; !stop.Load(); i++ {
			src := a
			if i%2 == 1 {
				src = o
			}
			copy(buf, src) // a deliberate data race with the kernel's read
		}
	}()
	ok := 0
	for range n {
		fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			stop.Store(true)
			return "", err
		}
		_, _, e := unix.Syscall(unix.SYS_CONNECT, uintptr(fd), uintptr(unsafe.Pointer(&buf[0])), uintptr(len(buf)))
		if e == 0 {
			ok++
		}
		unix.Close(fd)
	}
	stop.Store(true)
	<-done
	return fmt.Sprintf("ok %d", ok), nil
}
