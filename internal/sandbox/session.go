package sandbox

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"

	"github.com/dsh-dev/dsh/internal/proc"
)

// Session is one dsh session's use of a Sandbox. It confines exactly as
// the Sandbox does, and adds a way to run each confined command that
// does not start the sandbox afresh: a sandbox server (the helper, in
// server mode) started at the session's first confined command, whose
// namespaces and mounts are set up once and which forks every later
// command from inside them with the same per-command isolation (own
// process group, Landlock and seccomp on the forking thread, the socket
// gate, the request's environment and working directory, everything the
// command left killed before its exit is reported). Confined.Run uses
// it; Confined.Argv stays the per-call command line.
//
// The server runs the policy it was started for: a command whose
// confinement differs (bubblewrap's mounts and network for another mode,
// an approved escalation, new git metadata to protect) replaces it with
// one for the new policy, and Landlock commands carry their whole rule
// set with them. Whatever goes wrong fails closed: a server that cannot
// start, is busy with another command, refuses it or could not receive it
// leaves it to the per-call helper (which refuses to run unconfined); a
// server that dies once it has the command fails the call (the command
// may have run).
//
// Close ends the server (and with it every process in its namespaces);
// dsh dying ends it too (it is pid 1 of its namespace, with a parent
// death signal). Safe for concurrent use.
type Session struct {
	sb *Sandbox

	mu     sync.Mutex
	srv    *server // guarded by mu; nil until needed, or after a failure
	busy   bool    // guarded by mu; a command holds srv
	closed bool    // guarded by mu
	// tmpDir is the session's private TMPDIR, made at its first
	// confined command and removed by Close; guarded by mu.
	tmpDir string
	// roots are the directories the socket gate's roots were when the
	// session first confined a command with them (Policy.pin); guarded
	// by mu.
	roots map[string]fileID

	perCall bool // ServerEnv=0: no server

	// served counts the commands the server ran (tests tell the server
	// from the per-call fallback by it).
	served atomic.Int64
}

// ServerEnv is the operator's switch for the session server: set to 0,
// every command is confined per call (Confined.Run stays nil), as before
// the server existed; benchmarks compare the two with it.
const ServerEnv = "DSH_SANDBOX_SERVER"

// Session returns a new session's view of the sandbox. No process starts
// before the first confined command.
func (s *Sandbox) Session() *Session {
	return &Session{sb: s, perCall: os.Getenv(ServerEnv) == "0"}
}

// Supervise is Sandbox.Supervise, with Run set where the helper can
// serve: danger-full-access commands then run on a lifetime-only server
// (no namespace, no confinement; a subreaper that kills whatever a
// command left when it exits, and everything when dsh dies), as the
// per-call lifetime-only helper would run them.
func (ss *Session) Supervise(argv []string) Confined {
	c := ss.sb.Supervise(argv)
	if ss.perCall || len(argv) == 0 || len(c.Argv) == len(argv) {
		return c // not supervised here: nothing to serve either
	}
	plan, err := supervisePlan()
	if err != nil {
		return c
	}
	argv = append([]string(nil), argv...)
	c.Run = func(ctx context.Context, spec proc.Spec) (proc.Outcome, error) {
		return ss.run(ctx, spec, plan, argv)
	}
	return c
}

// Confine is Sandbox.Confine, with Run set where the backend can serve
// the command from the session's server. The command's TMPDIR is the
// session's own directory (TmpDir), whether it runs on the server or
// per call.
func (ss *Session) Confine(argv []string, p Policy) (Confined, error) {
	if err := validate(argv, p); err != nil {
		return Confined{}, err
	}
	if p.Mode == DangerFullAccess {
		return Unconfined(argv), nil
	}
	b, err := ss.sb.Backend()
	if err != nil {
		return Confined{}, err
	}
	tmp, err := ss.TmpDir()
	if err != nil {
		return Confined{}, err
	}
	p.sessionTmp = tmp
	p.pin = ss.pin
	if ss.perCall {
		return b.Confine(argv, p)
	}
	sp, ok := b.(serverBackend)
	if !ok {
		return b.Confine(argv, p)
	}
	c, plan, err := sp.confineServed(argv, p)
	if err != nil || plan.argv == nil {
		return c, err // the per-call command line still confines
	}
	argv = append([]string(nil), argv...)
	c.Run = func(ctx context.Context, spec proc.Spec) (proc.Outcome, error) {
		return ss.run(ctx, spec, plan, argv)
	}
	return c, nil
}

// TmpDir returns the session's private TMPDIR, creating it on first use:
// a fresh 0700 directory in the system's temp dir that only this
// session's confined commands use (read-only and workspace-write alike),
// removed with everything in it by Close. A Session used again after
// Close makes a new one.
func (ss *Session) TmpDir() (string, error) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.tmpDir != "" {
		// A command may have removed it, or renamed another directory
		// to its name: then the session starts a new one.
		if fi, err := os.Lstat(ss.tmpDir); err == nil && fi.IsDir() {
			if id, ok := fileIDOf(ss.tmpDir); ok && id == ss.roots[ss.tmpDir] {
				return ss.tmpDir, nil
			}
		}
	}
	dir, err := newSessionTmp()
	if err != nil {
		return "", err
	}
	id, ok := fileIDOf(dir)
	if !ok {
		_ = removeTree(dir)
		return "", fmt.Errorf("sandbox TMPDIR: cannot stat %s", dir)
	}
	if ss.roots == nil {
		ss.roots = map[string]fileID{}
	}
	ss.roots[dir] = id
	ss.tmpDir = dir
	return dir, nil
}

// pin returns the directory ID the session first saw at root, recording
// id when it is the first (Policy.pin).
func (ss *Session) pin(root string, id fileID) fileID {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if first, ok := ss.roots[root]; ok {
		return first
	}
	if ss.roots == nil {
		ss.roots = map[string]fileID{}
	}
	ss.roots[root] = id
	return id
}

// removeTmp removes the session's TMPDIR, once its server (and with it
// every command) is gone; a directory that took its name since is not
// the session's and stays.
func (ss *Session) removeTmp() error {
	ss.mu.Lock()
	dir := ss.tmpDir
	want := ss.roots[dir]
	ss.tmpDir = ""
	ss.mu.Unlock()
	if dir == "" {
		return nil
	}
	if id, ok := fileIDOf(dir); !ok || id != want {
		return nil
	}
	if err := removeTree(dir); err != nil {
		return fmt.Errorf("sandbox: remove the session's TMPDIR: %w", err)
	}
	return nil
}
