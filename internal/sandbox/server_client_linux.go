//go:build linux

package sandbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/dsh-dev/dsh/internal/proc"
	"golang.org/x/sys/unix"
)

// serverPlan is how to start a session server for a policy, and what
// each command carries to it.
type serverPlan struct {
	// key names the server's own confinement: a command whose key
	// differs needs another server.
	key      string
	argv     []string
	procAttr func(*syscall.SysProcAttr)
	// cmd is each command's confinement, applied by the server on the
	// thread that forks it.
	cmd helperSpec
}

// serverBackend is a backend that can serve commands from a session
// server: confineServed is Confine and, where a server can run the same
// command under the same rules, its plan (zero otherwise).
type serverBackend interface {
	confineServed(argv []string, p Policy) (Confined, serverPlan, error)
}

// serverArgvTail ends a server's command line: a name for ps, and
// dsh's pid (tests find the servers of a dsh process by it).
func serverArgvTail() []string {
	return []string{"dsh-sandbox-server", strconv.Itoa(os.Getpid())}
}

// landlockPlan is a Landlock server: one per namespace mode, the rules
// (cmd) sent with each command.
func landlockPlan(self string, ns nsMode, cmd helperSpec) serverPlan {
	return serverPlan{
		key:      "landlock\x00" + self + "\x00" + string(ns),
		argv:     helperArgv(self, helperSpec{Server: true, NS: string(ns), Parent: os.Getpid()}, serverArgvTail()),
		procAttr: ns.procAttr(),
		cmd:      cmd,
	}
}

// plan is a bubblewrap server: one per set of bubblewrap options (mounts,
// network), the socket gate and TMPDIR sent with each command.
func (b *Bwrap) plan(bin string, args []string, cmd helperSpec) serverPlan {
	self, err := b.executable()
	if err != nil {
		return serverPlan{}
	}
	inner := helperArgv(self, helperSpec{Server: true, Lifetime: true, SweepNS: true}, serverArgvTail())
	full := append(append(append([]string{bin}, args...), "--"), inner...)
	argv, procAttr, _, err := b.supervised(full)
	if err != nil {
		return serverPlan{}
	}
	key := "bwrap\x00" + self
	for _, a := range args {
		key += "\x00" + a
	}
	return serverPlan{key: key, argv: argv, procAttr: procAttr, cmd: cmd}
}

// supervisePlan is the lifetime-only server of danger-full-access.
func supervisePlan() (serverPlan, error) {
	self, err := selfExecutable()
	if err != nil {
		return serverPlan{}, err
	}
	return serverPlan{
		key:  "supervise\x00" + self,
		argv: helperArgv(self, helperSpec{Server: true, Lifetime: true, Parent: os.Getpid()}, serverArgvTail()),
		cmd:  helperSpec{Lifetime: true},
	}, nil
}

// server is a running session server.
type server struct {
	key  string
	p    *proc.Process
	conn *msgConn
	// msgs carries the server's messages; closed (and gone with it)
	// when the connection ends.
	msgs chan serverMsg
	gone chan struct{}
}

// errNotStarted: the server did not take the command (it is gone, or
// refused); the per-call helper may run it instead.
var errNotStarted = errors.New("sandbox server did not take the command")

// startServer starts a server for plan and waits until it is ready.
func startServer(ctx context.Context, plan serverPlan) (*server, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("sandbox server: %w", err)
	}
	mine, theirs := os.NewFile(uintptr(fds[0]), "sandbox-server"), os.NewFile(uintptr(fds[1]), "sandbox-server")
	env := proc.EnvPolicy{}
	if g := os.Getenv("GORACE"); g != "" {
		env.Set = map[string]string{"GORACE": g} // a race-built test binary as the helper
	}
	// Owned by the Session, not by the command that happens to start it.
	p, err := proc.Start(context.WithoutCancel(ctx), proc.Spec{
		Argv:        plan.argv,
		Dir:         "/",
		Env:         env,
		Stdin:       theirs,
		SysProcAttr: plan.procAttr,
	})
	theirs.Close()
	if err != nil {
		mine.Close()
		return nil, fmt.Errorf("sandbox server: %w", err)
	}
	conn, err := newMsgConn(mine)
	mine.Close()
	if err != nil {
		p.Teardown(context.Background())
		return nil, fmt.Errorf("sandbox server: %w", err)
	}
	s := &server{key: plan.key, p: p, conn: conn, msgs: make(chan serverMsg, 4), gone: make(chan struct{})}
	go s.read()
	t := time.NewTimer(probeTimeout)
	defer t.Stop()
	var why string
	select {
	case m, ok := <-s.msgs:
		if ok && m.Op == opReady {
			return s, nil
		}
		why = "it exited"
	case <-t.C:
		why = "it did not answer"
	case <-ctx.Done():
		why = ctx.Err().Error()
	}
	s.close()
	return nil, fmt.Errorf("sandbox server: %s: %s", why, p.StderrTail(500))
}

// read forwards the server's messages until the connection ends.
func (s *server) read() {
	defer close(s.gone)
	defer close(s.msgs)
	defer s.conn.dropFds()
	for {
		m, fds, err := s.conn.recv()
		closeFds(fds) // the server passes none
		if err != nil {
			return
		}
		s.msgs <- m
	}
}

// dead reports whether the server is gone or going.
func (s *server) dead() bool {
	select {
	case <-s.gone:
		return true
	case <-s.p.Exited():
		return true
	default:
		return false
	}
}

// close ends the server: closing the connection makes it kill what is
// left and exit; the teardown confirms it.
func (s *server) close() {
	s.conn.close()
	// On EOF the server ends what it runs and returns, and bubblewrap
	// and the helper outside it follow, each reaping the one below: so
	// the CPU time of every command it ran reaches dsh's own accounting
	// (time(1), a parent's rusage), as a per-call command's does. A
	// teardown's signal would kill bubblewrap before it reaps, and the
	// time with it; it is for a server that does not end by itself.
	t := time.NewTimer(serverExitWait)
	select {
	case <-s.p.Exited():
	case <-t.C:
	}
	t.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), proc.KillWait+proc.DefaultKillGrace)
	defer cancel()
	s.p.Teardown(ctx)
	<-s.gone
}

// serverExitWait bounds how long closing a session waits for its server
// to end by itself (a few milliseconds) before tearing it down.
const serverExitWait = time.Second

// remote is a command the server runs, as proc.RunRemote sees it.
type remote struct {
	s    *server
	done chan struct{}
	exit proc.ExitInfo
	err  error
	// killed: Signal ended the server because it did not carry out a
	// SIGKILL; its death is then the command's kill, not a failure.
	killed atomic.Bool
}

func (r *remote) Done() <-chan struct{}          { return r.done }
func (r *remote) Result() (proc.ExitInfo, error) { return r.exit, r.err }

// Signal asks the server to signal the command's group. A SIGKILL that
// the server does not carry out within proc.KillWait (a command stopped
// it, say, on a kernel without Landlock's signal scope) ends the server
// instead, and with it everything in its namespaces: the command is
// then reported killed (a timeout stays a timeout), not the sandbox
// failed.
func (r *remote) Signal(sig syscall.Signal) {
	_ = r.s.conn.send(serverMsg{Op: opSignal, Sig: int(sig)})
	if sig != syscall.SIGKILL {
		return
	}
	go func() {
		t := time.NewTimer(proc.KillWait)
		defer t.Stop()
		select {
		case <-r.done:
		case <-t.C:
			r.killed.Store(true)
			r.s.p.Teardown(context.Background())
		}
	}()
}

// settle records the end the message says, if it is one.
func (r *remote) settle(m serverMsg, ok bool) bool {
	switch {
	case !ok && r.killed.Load():
		r.exit = proc.ExitInfo{Code: 128 + int(syscall.SIGKILL), Signaled: true, Signal: syscall.SIGKILL}
	case !ok:
		r.err = fmt.Errorf("%w: the sandbox server died while the command ran: %s", ErrUnavailable, r.s.p.StderrTail(500))
	case m.Op == opExit:
		r.exit = proc.ExitInfo{Code: m.Code}
	case m.Op == opError:
		// Refused before anything ran: the per-call helper may run it.
		r.err = fmt.Errorf("%w: %s", errNotStarted, m.Err)
	default:
		return false
	}
	close(r.done)
	return true
}

// start sends one command. It does not wait for the server's answer:
// a command may stop its server before the server could say it started
// (inside bwrap), and RunRemote's timeout must still reach it. Only a
// request the server cannot have read whole (the send failed) or one it
// refused falls back to the per-call helper; once a server took a
// command, its death fails the call, since the command may have run.
func (s *server) start(argv, env []string, dir string, cmd helperSpec, stdin, output *os.File) (proc.Remote, error) {
	if err := s.conn.send(serverMsg{Op: opRun, Argv: argv, Env: env, Dir: dir, Spec: &cmd}, stdin, output); err != nil {
		return nil, errNotStarted
	}
	r := &remote{s: s, done: make(chan struct{})}
	go func() {
		for {
			m, ok := <-s.msgs
			if r.settle(m, ok) {
				return
			}
		}
	}()
	return r, nil
}

// run runs one command on the session's server, or per call (spec, as
// given) when the server cannot take it.
func (ss *Session) run(ctx context.Context, spec proc.Spec, plan serverPlan, argv []string) (proc.Outcome, error) {
	srv, err := ss.acquire(ctx, plan)
	if err != nil {
		return proc.Run(ctx, spec)
	}
	env, err := spec.Env.Build(os.Environ())
	if err != nil {
		ss.release()
		return proc.Outcome{}, err
	}
	out, err := proc.RunRemote(ctx, spec, func(stdin, output *os.File) (proc.Remote, error) {
		return srv.start(argv, env, spec.Dir, plan.cmd, stdin, output)
	})
	ss.release()
	if errors.Is(err, errNotStarted) {
		return proc.Run(ctx, spec)
	}
	ss.served.Add(1)
	return out, err
}

// errBusy: the server is taken (or the session closed).
var errBusy = errors.New("sandbox server busy")

// acquire returns the session's server for plan, starting (or
// replacing) it as needed, and marks it busy until release.
func (ss *Session) acquire(ctx context.Context, plan serverPlan) (*server, error) {
	ss.mu.Lock()
	if ss.closed || ss.busy {
		ss.mu.Unlock()
		return nil, errBusy
	}
	old := ss.srv
	if old != nil && (old.key != plan.key || old.dead()) {
		ss.srv = nil
	} else {
		old = nil
	}
	srv := ss.srv
	ss.busy = true
	ss.mu.Unlock()
	if old != nil {
		old.close()
	}
	if srv != nil {
		return srv, nil
	}
	srv, err := startServer(ctx, plan)
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if err != nil || ss.closed {
		ss.busy = false
		if srv != nil {
			go srv.close()
		}
		if err == nil {
			err = errBusy
		}
		return nil, err
	}
	ss.srv = srv
	return srv, nil
}

func (ss *Session) release() {
	ss.mu.Lock()
	ss.busy = false
	ss.mu.Unlock()
}

// Close ends the session's server, if one runs, and removes the
// session's TMPDIR. Later commands run per call.
func (ss *Session) Close() error {
	ss.mu.Lock()
	ss.closed = true
	srv := ss.srv
	ss.srv = nil
	ss.mu.Unlock()
	if srv != nil {
		srv.close()
	}
	return ss.removeTmp()
}
