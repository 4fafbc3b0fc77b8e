//go:build linux

package sandbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// The session server is the helper started once per session (spec.Server)
// instead of once per command: its namespaces (the PID and mount
// namespace it is pid 1 of, or bubblewrap's mounts and namespaces around
// it) are set up once, and it forks each command from inside them with
// the per-command isolation the per-call helper gives: from a locked
// thread confined as the command's spec says (Landlock, seccomp,
// no_new_privs, the capability drop, the socket gate: all per thread),
// into its own process group with the request's environment, working
// directory and descriptors. That thread, the spawner (spawner_linux.go),
// is kept for the next command that asks for the same confinement; a
// command with nothing to confine per thread (danger-full-access) is
// forked from the server's main thread. When the command exits,
// everything it left is killed (the whole PID namespace but the server,
// or the server's subtree where there is none) before the exit is
// reported, so the next command starts with nothing of the previous one
// running. One command at a time.

// serve runs the server loop on the helper's main goroutine; the signal
// channels are supervise's. nsSweep: the server is alone with its
// commands in a PID namespace, so kill(-1) reaches exactly what they
// left.
func serve(nsSweep bool, chld, death, stop <-chan os.Signal) (int, error) {
	// fd 0 is the connection to dsh: moved aside (close-on-exec) and
	// replaced by /dev/null, so that no command can inherit it.
	cfd, err := unix.FcntlInt(0, unix.F_DUPFD_CLOEXEC, 3)
	if err != nil {
		return helperExitSetup, fmt.Errorf("server connection: %w", err)
	}
	null, err := unix.Open(os.DevNull, unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return helperExitSetup, fmt.Errorf("server: %w", err)
	}
	if err := unix.Dup3(null, 0, 0); err != nil {
		return helperExitSetup, fmt.Errorf("server: %w", err)
	}
	unix.Close(null)
	f := os.NewFile(uintptr(cfd), "dsh-sandbox-server")
	conn, err := newMsgConn(f)
	f.Close()
	if err != nil {
		return helperExitSetup, fmt.Errorf("server connection: %w", err)
	}
	defer conn.close()

	type request struct {
		msg serverMsg
		fds []int
	}
	reqs := make(chan request)
	quit := make(chan struct{})
	defer close(quit)
	go func() {
		defer close(reqs)
		defer conn.dropFds()
		for {
			msg, fds, err := conn.recv()
			if err != nil {
				return
			}
			select {
			case reqs <- request{msg, fds}:
			case <-quit:
				closeFds(fds)
				return
			}
		}
	}()
	if err := conn.send(serverMsg{Op: opReady}); err != nil {
		return helperExitSetup, fmt.Errorf("server: %w", err)
	}

	// Inside bubblewrap /dev is the sandbox's own tmpfs, fresh for every
	// per-call command; the server's commands share one, so what one
	// leaves there is removed before the next runs.
	var dev *devState
	if nsSweep && os.Getpid() != 1 {
		dev = snapshotDev()
	}
	var (
		cur *served
		sp  *spawner // the confined thread of the last command
	)
	// finish ends the command's turn; none: reap found no child left,
	// so there is nothing to sweep (the common case: a command that
	// left nothing running).
	finish := func(none bool) {
		sweepNS(nsSweep, !none)
		dev.restore()
		if cur != nil {
			cur.end()
			cur = nil
		}
	}
	for {
		select {
		case r, ok := <-reqs:
			if !ok {
				// dsh closed the connection (the session ended) or broke
				// the protocol: nothing may outlive the server.
				finish(false)
				return 0, nil
			}
			switch r.msg.Op {
			case opRun:
				if cur != nil {
					closeFds(r.fds)
					_ = conn.send(serverMsg{Op: opError, Err: "a command is already running"})
					continue
				}
				s, code, err := startServed(r.msg, r.fds, &sp)
				if err != nil {
					// As the per-call helper would: a line on the
					// command's output and its exit code.
					fmt.Fprintf(s.out, helperErrPrefix+"%v\n", err)
					s.end()
					sweepNS(nsSweep, true)
					_ = conn.send(serverMsg{Op: opExit, Code: code})
					continue
				}
				cur = s
				_ = conn.send(serverMsg{Op: opStarted})
			case opSignal:
				if cur != nil && r.msg.Sig > 0 && r.msg.Sig < 65 {
					_ = syscall.Kill(-cur.pid, syscall.Signal(r.msg.Sig))
				}
			}
		case <-chld:
			pid := 0
			if cur != nil {
				pid = cur.pid
			}
			if status, done, none := reap(pid); done && cur != nil {
				finish(none)
				_ = conn.send(serverMsg{Op: opExit, Code: exitCode(status)})
			}
		case <-death:
			if !nsSweep || os.Getpid() != 1 {
				finish(false)
				return 128 + int(syscall.SIGKILL), nil
			}
		case s := <-stop:
			// dsh's teardown of the server's group.
			finish(false)
			return 128 + int(s.(syscall.Signal)), nil
		}
	}
}

// served is the command the server runs.
type served struct {
	pid int
	in  *os.File
	out *os.File
	sp  *spawner // what forked it; nil for the server's main thread
}

// end releases what the server holds for the command.
func (s *served) end() {
	if s.sp != nil {
		s.sp.out.Store(nil)
		if !s.sp.reusable() {
			// Its thread ends, and its confinement with it.
			s.sp.retire()
		}
	}
	s.in.Close()
	s.out.Close()
}

func closeFds(fds []int) {
	for _, fd := range fds {
		unix.Close(fd)
	}
}

// startServed starts one command, forked with the request's stdin and
// output from a thread confined as the request's spec says: *sp's when
// it was confined the same way, else a new spawner's, which replaces it
// if it may serve later commands (spawnerKey).
// The served value is returned even on error (its output takes the
// reason), with the helper's exit code for it.
func startServed(msg serverMsg, fds []int, sp **spawner) (*served, int, error) {
	s := &served{in: os.NewFile(uintptr(fds[0]), "stdin"), out: os.NewFile(uintptr(fds[1]), "output")}
	if len(msg.Argv) == 0 || msg.Spec == nil {
		return s, helperExitSetup, errors.New("bad run request")
	}
	spec := *msg.Spec
	env := msg.Env
	if spec.TmpDir != "" {
		env = append(slices.DeleteFunc(slices.Clone(env), func(kv string) bool {
			return strings.HasPrefix(kv, "TMPDIR=")
		}), "TMPDIR="+spec.TmpDir)
	}
	path, err := lookPathIn(msg.Argv[0], env, msg.Dir)
	if err != nil {
		return s, helperExitNotFound, err
	}
	attr := &syscall.ProcAttr{
		Dir:   msg.Dir,
		Env:   env,
		Files: []uintptr{s.in.Fd(), s.out.Fd(), s.out.Fd()},
		Sys:   &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL},
	}
	if spec.Lifetime && spec.Gate == nil && !spec.Scope {
		// Nothing to confine per thread (danger-full-access): forked
		// from the server's own goroutine, which init locked to the
		// main thread, so the Pdeathsig fires only when the server
		// ends, and no thread is made and ended per command.
		pid, err := syscall.ForkExec(path, msg.Argv, attr)
		if err != nil {
			return s, helperExitSetup, fmt.Errorf("exec %s: %w", path, err)
		}
		s.pid = pid
		return s, 0, nil
	}
	if *sp != nil && (*sp).key != spawnerKey(spec) {
		(*sp).retire()
		*sp = nil
	}
	use := *sp
	if use == nil {
		n, err := startSpawner(spec, msg.Argv[0])
		if err != nil {
			return s, helperExitSetup, err
		}
		use = n
		if use.reusable() {
			*sp = use
		}
	}
	pid, err := use.spawn(path, msg.Argv, attr, s.out)
	if err != nil {
		if !use.reusable() {
			use.retire()
		}
		return s, helperExitSetup, err
	}
	s.pid, s.sp = pid, use
	return s, 0, nil
}

// sweepNS kills whatever the last command left: in a PID namespace of its
// own, every process but the server (kill(-1) from inside reaches only
// the namespace, and never its init), then, when left says something may
// be (reap did not find the server childless), the server's subtree,
// which also reaps them.
func sweepNS(nsSweep, left bool) {
	if nsSweep {
		_ = syscall.Kill(-1, syscall.SIGKILL)
	}
	if left {
		sweep()
	}
}

// devState is what bubblewrap's /dev (and /dev/shm) held when the
// server started, and each directory's change time then.
type devState struct {
	dirs  map[string]map[string]bool
	ctime map[string]unix.Timespec
}

// devDirs are the directories of bubblewrap's /dev tmpfs a command can
// write to.
var devDirs = []string{"/dev", "/dev/shm"}

func snapshotDev() *devState {
	d := &devState{dirs: map[string]map[string]bool{}, ctime: map[string]unix.Timespec{}}
	for _, dir := range devDirs {
		var st unix.Stat_t
		if unix.Stat(dir, &st) != nil {
			continue
		}
		names := map[string]bool{}
		ents, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		for _, e := range ents {
			names[e.Name()] = true
		}
		d.dirs[dir] = names
		d.ctime[dir] = st.Ctim
	}
	return d
}

// restore removes every entry created since the snapshot (RemoveAll
// does not follow symlinks). A directory whose change time is the
// snapshot's has had no entry added, removed or renamed: the change time
// moves with every one, and nothing but the kernel can set it back.
func (d *devState) restore() {
	if d == nil {
		return
	}
	for dir, names := range d.dirs {
		var st unix.Stat_t
		if unix.Stat(dir, &st) == nil && st.Ctim == d.ctime[dir] {
			continue
		}
		ents, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		for _, e := range ents {
			if !names[e.Name()] {
				_ = os.RemoveAll(filepath.Join(dir, e.Name()))
			}
		}
	}
}

// lookPathIn finds argv0 as exec would with env's PATH, relative names
// taken against dir.
func lookPathIn(argv0 string, env []string, dir string) (string, error) {
	exe := func(p string) bool {
		fi, err := os.Stat(p)
		return err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0
	}
	if strings.Contains(argv0, "/") {
		p := argv0
		if !filepath.IsAbs(p) {
			p = filepath.Join(dir, p)
		}
		if exe(p) {
			return p, nil
		}
		return "", fmt.Errorf("%w: %s", errNotFound, argv0)
	}
	path := ""
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			path = v
		}
	}
	for _, d := range filepath.SplitList(path) {
		if d == "" {
			d = "."
		}
		p := filepath.Join(d, argv0)
		if !filepath.IsAbs(p) {
			p = filepath.Join(dir, p)
		}
		if exe(p) {
			return p, nil
		}
	}
	return "", fmt.Errorf("exec: %q: executable file not found in $PATH", argv0)
}
