//go:build linux && (amd64 || arm64 || riscv64 || loong64)

package sandbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// seccomp user notification ABI (linux/seccomp.h); x/sys has the ioctl
// numbers for RECV and SEND but not the structures or ID_VALID.
const (
	notifIDValid = 0x40082102 // SECCOMP_IOCTL_NOTIF_ID_VALID, _IOW('!', 2, __u64)
	offArg4      = 48
)

// i386 socket syscalls, refused whole from an amd64 process under the
// gate (their arguments are not worth emulating).
const (
	i386Connect  = 362
	i386Sendto   = 369
	i386Sendmsg  = 370
	i386Sendmmsg = 345
)

type seccompNotif struct {
	ID    uint64
	Pid   uint32
	Flags uint32
	Nr    int32
	Arch  uint32
	IP    uint64
	Args  [6]uint64
}

type seccompNotifResp struct {
	ID    uint64
	Val   int64
	Error int32
	Flags uint32
}

// gateFilter builds the gate's seccomp program. It is stacked on top of
// the helper's own filter (the kernel applies the most restrictive
// verdict, so what that filter refuses stays refused): connect, sendmsg,
// sendmmsg and sendto with a non-null address go to the supervisor;
// io_uring (whose socket operations bypass seccomp) and the foreign-arch
// socket calls are refused.
func gateFilter() ([]unix.SockFilter, error) {
	p, err := newNativeProg()
	if err != nil {
		return nil, err
	}
	p.jmp(unix.BPF_JEQ, unix.SYS_CONNECT, "notify", "")
	p.jmp(unix.BPF_JEQ, unix.SYS_SENDMSG, "notify", "")
	p.jmp(unix.BPF_JEQ, unix.SYS_SENDMMSG, "notify", "")
	p.jmp(unix.BPF_JEQ, unix.SYS_IO_URING_SETUP, "eperm", "")
	p.jmp(unix.BPF_JEQ, unix.SYS_SENDTO, "", "allow")
	// sendto: only a call with an address (either half non-zero) needs
	// a look; the pointer is in a register, so this test cannot race.
	p.ld(offArg4)
	p.jmp(unix.BPF_JEQ, 0, "", "notify")
	p.ld(offArg4 + 4)
	p.jmp(unix.BPF_JEQ, 0, "allow", "notify")

	p.label("foreign")
	if runtime.GOARCH == "amd64" {
		p.jmp(unix.BPF_JEQ, unix.AUDIT_ARCH_I386, "", "enosys")
		p.ld(offNR)
		for _, nr := range []uint32{i386Socketcall, i386Connect, i386Sendto, i386Sendmsg, i386Sendmmsg, i386IoUringSetup} {
			p.jmp(unix.BPF_JEQ, nr, "eperm", "")
		}
		p.ret(retAllow)
	} else {
		p.ret(retENOSYS)
	}

	p.label("notify")
	p.ret(unix.SECCOMP_RET_USER_NOTIF)
	p.label("allow")
	p.ret(retAllow)
	p.label("eperm")
	p.ret(retEPERM)
	p.label("enosys")
	p.ret(retENOSYS)
	return p.assemble()
}

var gateOnce = sync.OnceValue(func() error {
	if !seccompSupported() {
		return errors.New("seccomp is not available")
	}
	// SECCOMP_GET_NOTIF_SIZES exists since user notification (5.0);
	// pidfd_getfd (5.6) answers EBADF for a bad pidfd and ENOSYS when
	// missing.
	var sizes [3]uint16
	if _, _, e := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_GET_NOTIF_SIZES, 0, uintptr(unsafe.Pointer(&sizes))); e != 0 {
		return fmt.Errorf("no seccomp user notification: %w", e)
	}
	if sizes[0] < uint16(unsafe.Sizeof(seccompNotif{})) || sizes[1] < uint16(unsafe.Sizeof(seccompNotifResp{})) {
		return fmt.Errorf("unexpected seccomp notification sizes %v", sizes)
	}
	// The calls the supervisor makes, tried on this process (a container's
	// seccomp profile may refuse them although the kernel has them).
	pidfd, err := unix.PidfdOpen(os.Getpid(), 0)
	if err != nil {
		return fmt.Errorf("pidfd_open: %w", err)
	}
	defer unix.Close(pidfd)
	dup, err := unix.PidfdGetfd(pidfd, pidfd, 0)
	if err != nil {
		return fmt.Errorf("pidfd_getfd (Linux 5.6): %w", err)
	}
	unix.Close(dup)
	var probe [8]byte
	if _, err := unix.ProcessVMReadv(os.Getpid(), []unix.Iovec{{Base: &probe[0], Len: 8}},
		[]unix.RemoteIovec{{Base: uintptr(unsafe.Pointer(&sizes[0])), Len: 6}}, 0); err != nil {
		return fmt.Errorf("process_vm_readv: %w", err)
	}
	// And a listener, on a thread that is thrown away afterwards.
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread dies with the goroutine
		fd, err := installProbeListener()
		if err == nil {
			unix.Close(fd)
		}
		errc <- err
	}()
	return <-errc
})

// installProbeListener installs an allow-all filter with a listener on
// the calling thread.
func installProbeListener() (int, error) {
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return -1, fmt.Errorf("no_new_privs: %w", err)
	}
	ins := []unix.SockFilter{{Code: unix.BPF_RET | unix.BPF_K, K: retAllow}}
	prog := unix.SockFprog{Len: 1, Filter: &ins[0]}
	fd, _, e := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER,
		unix.SECCOMP_FILTER_FLAG_NEW_LISTENER, uintptr(unsafe.Pointer(&prog)))
	if e != 0 {
		return -1, fmt.Errorf("seccomp listener: %w", e)
	}
	return int(fd), nil
}

// unixGateSupported reports whether this kernel can run the gate, or why
// not.
func unixGateSupported() error { return gateOnce() }

// installUnixGate installs the gate's filter on the calling thread (which
// must be locked and stay so) and returns the listener; no_new_privs is
// set first, as seccomp requires without CAP_SYS_ADMIN.
func installUnixGate() (int, error) {
	ins, err := gateFilter()
	if err != nil {
		return -1, err
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return -1, fmt.Errorf("no_new_privs: %w", err)
	}
	prog := unix.SockFprog{Len: uint16(len(ins)), Filter: &ins[0]}
	// Once the supervisor has received a call, only a fatal signal may
	// interrupt the caller (Linux 5.19): a call interrupted and restarted
	// after the supervisor made it would connect or send twice.
	fd, _, e := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER,
		unix.SECCOMP_FILTER_FLAG_NEW_LISTENER|unix.SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV, uintptr(unsafe.Pointer(&prog)))
	if e == unix.EINVAL {
		fd, _, e = unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER,
			unix.SECCOMP_FILTER_FLAG_NEW_LISTENER, uintptr(unsafe.Pointer(&prog)))
	}
	if e != 0 {
		return -1, fmt.Errorf("seccomp user notification filter: %w", e)
	}
	return int(fd), nil
}

// gateRoutines counts every goroutine the gate starts, so that tests can
// wait for all of them and then check that none is left.
var gateRoutines sync.WaitGroup

// gatedChild is a command started under the gate: its pid, the listener
// to serve and the confining thread. The exit status arrives on done
// once the command has been reaped.
type gatedChild struct {
	pid      int
	listener int
	done     <-chan syscall.WaitStatus
	// confined runs calls on the confining thread.
	confined *confinedThread
}

// confinedThread runs raw syscalls on the thread that confined itself
// and forked the command, so that they are made inside the command's
// Landlock domain: an abstract UNIX address is scoped to that domain,
// and the supervisor's own threads are not in it. The thread is under
// the gate's filter too; its calls come back as notifications from tid,
// which the supervisor lets through unchanged (the command cannot write
// this process's memory or descriptors, so nothing can race them).
type confinedThread struct {
	tid   int
	calls chan confinedCall
	gone  chan struct{} // closed when the thread stops taking calls
}

// confinedCall is nr(fd, p, n): connect or sendmsg.
type confinedCall struct {
	nr  uintptr
	fd  int
	p   unsafe.Pointer
	n   uintptr
	res chan confinedResult
}

type confinedResult struct {
	r     uintptr
	errno unix.Errno
}

// do runs one call on the thread; calls are serialised, so only rare
// ones (abstract addresses) go there.
func (ct *confinedThread) do(c confinedCall) (uintptr, unix.Errno) {
	c.res = make(chan confinedResult, 1)
	select {
	case ct.calls <- c:
	case <-ct.gone:
		return 0, unix.ESRCH
	}
	r := <-c.res
	return r.r, r.errno
}

// threadGate is the gate installed on the helper's confining thread,
// from which the command is then forked (seccomp filters and Landlock
// domains are per thread and inherited by the child).
type threadGate struct {
	fd   int
	spec gateSpec
	ct   *confinedThread
}

// installThreadGate installs the gate's filter on the calling thread,
// which must be locked and already confined; it sets no_new_privs.
func installThreadGate(g gateSpec) (*threadGate, error) {
	fd, err := installUnixGate()
	if err != nil {
		return nil, err
	}
	return &threadGate{fd: fd, spec: g, ct: &confinedThread{
		tid: unix.Gettid(), calls: make(chan confinedCall), gone: make(chan struct{}),
	}}, nil
}

// abort releases a gate whose command could not be started.
func (tg *threadGate) abort() { unix.Close(tg.fd) }

// serve answers the command's gated calls for as long as the helper
// lives and never returns: a goroutine serves the listener, and this
// thread (the confining one, from which the command was forked) runs
// the calls that must be made inside the command's Landlock domain.
func (tg *threadGate) serve(report func(path string)) {
	// The listener's goroutine is not waited for: a call blocked on its
	// peer may hold it up, and the helper's exit ends it.
	tg.start(report)
	for c := range tg.calls() {
		tg.call(c)
	}
}

// start answers the gated calls of what is forked from the confining
// thread, on goroutines of their own, until no task uses the filter any
// more (the thread and everything it forked are gone); the thread runs
// the calls that must be made inside its Landlock domain (call). For the
// session server's spawner (spawner_linux.go), whose thread forks one
// command after another.
func (tg *threadGate) start(report func(path string)) {
	child := gatedChild{listener: tg.fd, confined: tg.ct}
	gateRoutines.Go(func() {
		if err := serveUnixGate(context.Background(), child, tg.spec, report); err != nil {
			fmt.Fprintf(os.Stderr, helperErrPrefix+"%v\n", err)
		}
	})
}

// call runs one confined call; only on the confining thread.
func (tg *threadGate) call(c confinedCall) {
	r, _, e := unix.Syscall(c.nr, uintptr(c.fd), uintptr(c.p), c.n)
	c.res <- confinedResult{r, e}
}

// calls are the confined calls the confining thread is to run (call).
func (tg *threadGate) calls() <-chan confinedCall { return tg.ct.calls }

// stop tells the gate the confining thread runs no more calls; its
// callers get ESRCH.
func (tg *threadGate) stop() { close(tg.ct.gone) }

// serveUnixGate answers the child's notifications until ctx ends or no
// task uses the filter any more, then drains: calls still in flight are
// waited for while new ones are refused with ENOSYS (what the kernel
// answers once the listener is closed), except the confining thread's
// own, which its caller may be waiting on. Each call is handled on its
// own goroutine, so a connect that blocks (a full backlog) holds up only
// its caller. The helper does not wait for serveUnixGate after its
// command exits: such a call could wait on its peer forever.
func serveUnixGate(ctx context.Context, child gatedChild, g gateSpec, report func(path string)) error {
	listener := child.listener
	defer unix.Close(listener)
	var stop, idle [2]int
	if err := unix.Pipe2(stop[:], unix.O_CLOEXEC); err != nil {
		return fmt.Errorf("unix gate: %w", err)
	}
	defer unix.Close(stop[0])
	if err := unix.Pipe2(idle[:], unix.O_CLOEXEC); err != nil {
		unix.Close(stop[1])
		return fmt.Errorf("unix gate: %w", err)
	}
	defer unix.Close(idle[0])
	// calls counts the calls in flight; once draining, the last one to
	// end wakes the loop through idle (closed under mu when it returns).
	var (
		mu       sync.Mutex
		calls    int
		draining bool
	)
	defer func() {
		mu.Lock()
		unix.Close(idle[1])
		idle[1] = -1
		mu.Unlock()
	}()
	quit := make(chan struct{})
	watcher := make(chan struct{})
	gateRoutines.Go(func() {
		defer close(watcher)
		select {
		case <-ctx.Done():
		case <-quit:
		}
		unix.Close(stop[1])
	})
	defer func() {
		close(quit)
		<-watcher
	}()
	gs := &gate{listener: listener, spec: g, report: report, confined: child.confined}
	hup := false // no task is left under the filter: only calls in flight
	for {
		wake := stop[0]
		if draining {
			wake = idle[0]
		}
		fds := []unix.PollFd{{Fd: int32(wake), Events: unix.POLLIN}, {Fd: int32(listener), Events: unix.POLLIN}}
		if hup {
			fds = fds[:1]
		}
		if _, err := unix.Poll(fds, -1); err != nil {
			if errors.Is(err, unix.EINTR) {
				continue
			}
			return fmt.Errorf("unix gate: poll: %w", err)
		}
		if !hup && fds[1].Revents&unix.POLLIN == 0 && fds[1].Revents&(unix.POLLHUP|unix.POLLERR|unix.POLLNVAL) != 0 {
			hup = true
		}
		if fds[0].Revents != 0 || hup {
			if draining && fds[0].Revents != 0 {
				return nil // the last call has ended
			}
			mu.Lock()
			draining = true
			none := calls == 0
			mu.Unlock()
			if none {
				return nil
			}
			continue
		}
		if fds[1].Revents&unix.POLLIN == 0 {
			continue
		}
		var n seccompNotif
		if err := ioctlPtr(listener, unix.SECCOMP_IOCTL_NOTIF_RECV, unsafe.Pointer(&n)); err != nil {
			// ENOENT: the caller died before we got to it.
			if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.EINTR) {
				continue
			}
			return fmt.Errorf("unix gate: receive: %w", err)
		}
		if draining && !gs.own(&n) {
			gs.respond(n.ID, 0, unix.ENOSYS)
			continue
		}
		mu.Lock()
		calls++
		mu.Unlock()
		gateRoutines.Go(func() {
			gs.answer(&n)
			mu.Lock()
			defer mu.Unlock()
			if calls--; calls == 0 && draining && idle[1] >= 0 {
				_, _ = unix.Write(idle[1], []byte{0})
			}
		})
	}
}

func ioctlPtr(fd int, req uint, p unsafe.Pointer) error {
	if _, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), uintptr(req), uintptr(p)); e != 0 {
		return e
	}
	return nil
}

// gate is one listener's supervisor state.
type gate struct {
	listener int
	spec     gateSpec
	// confined makes calls inside the command's confinement; nil runs
	// them on the supervisor's thread (tests of the gate alone).
	confined *confinedThread
	// report is told the path of each refused socket; nil for none.
	report func(path string)
}

// answer performs the notified call and sends its result. A caller that
// died in the meantime makes SEND fail with ENOENT, which is ignored.
func (gs *gate) answer(n *seccompNotif) {
	if gs.own(n) {
		// One of our own calls on the confining thread (confinedThread).
		resp := seccompNotifResp{ID: n.ID, Flags: unix.SECCOMP_USER_NOTIF_FLAG_CONTINUE}
		_ = ioctlPtr(gs.listener, unix.SECCOMP_IOCTL_NOTIF_SEND, unsafe.Pointer(&resp))
		return
	}
	val, errno := gs.perform(n)
	gs.respond(n.ID, val, errno)
}

// own reports whether a notification comes from the confining thread.
func (gs *gate) own(n *seccompNotif) bool {
	return gs.confined != nil && int(n.Pid) == gs.confined.tid
}

// respond sends a call's result or errno.
func (gs *gate) respond(id uint64, val int64, errno unix.Errno) {
	resp := seccompNotifResp{ID: id, Val: val}
	if errno != 0 {
		resp.Val, resp.Error = 0, -int32(errno)
	}
	_ = ioctlPtr(gs.listener, unix.SECCOMP_IOCTL_NOTIF_SEND, unsafe.Pointer(&resp))
}

// valid reports whether the notification's caller is still waiting, i.e.
// its pid still names the task that made the call: checked after each
// read of the caller's state, since the pid could be reused once it died.
func (gs *gate) valid(id uint64) bool {
	return ioctlPtr(gs.listener, notifIDValid, unsafe.Pointer(&id)) == nil
}
