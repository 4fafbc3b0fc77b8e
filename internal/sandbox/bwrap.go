package sandbox

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"slices"
	"sync"
	"syscall"
	"time"
)

// probeTimeout bounds a backend probe: a wedged bwrap or helper must not
// hang session start.
const probeTimeout = 10 * time.Second

// Bwrap confines commands with bubblewrap: the host root bound read-only,
// a fresh /dev and /proc, a private PID namespace (host processes are
// invisible and unsignalable), no controlling terminal (--new-session, so
// no TIOCSTI injection), killed with its parent, no network unless
// Policy.Network, and writable binds for exactly what the mode allows:
//
//   - workspace-write: the workspace, the WritableRoots, and the temp dirs
//     (os.TempDir(), plus /tmp and /var/tmp when present; they are the
//     host's, so files left there by one command are seen by the next,
//     as with Landlock). Each root's .git (and a worktree's git dir) is
//     bound read-only again on top. TMPDIR is the session's private
//     directory (inside os.TempDir(), bound again on its own so that
//     nothing can be linked or moved into it from the shared temp
//     dirs), the one temp area whose UNIX sockets are reachable.
//   - read-only: nothing of the host; TMPDIR points at a private scratch
//     directory, the only writable place. The host's /tmp stays readable
//     but read-only, because every mode lets commands read everywhere (a
//     private tmpfs over /tmp would hide it).
//
// In both, the deny-read list is covered (an empty mode-0000 tmpfs over a
// directory, /dev/null bound nodev over a file: "Permission denied"), and
// under ConfineReads only the system roots, the workspace, the writable
// roots and ReadRoots are bound, not the host root (bwrap_reads.go). The
// repository's agent configuration and Policy.Protected are bound
// read-only like .git, their parent directories pinned (bwrap_protect.go).
//
// /dev is bubblewrap's minimal one (null, zero, random, tty, pts, shm):
// host devices such as GPUs are not visible.
//
// A read-only bind does not stop connect(2) to the pathname UNIX socket
// of a host daemon (e.g. /var/run/docker.sock), so inside bwrap the
// command runs under this binary re-executed as a gate-only helper
// (`bwrap … -- self HelperArg <spec> -- argv…`, see unixgate.go):
// sockets outside the workspace, the writable roots, TMPDIR and
// Policy.UnixSockets are refused.
//
// bwrap runs under the same helper as Landlock, in lifetime-only mode
// (supervised): bwrap's --die-with-parent alone left the sandboxed
// command running when bwrap was killed between its clone and the
// child's prctl. Run as root, the command loses droppedCaps (bwrap keeps
// root's capabilities otherwise, and CAP_SYS_ADMIN could remount the
// read-only root writable). Descriptors: the helper passes only 0-2.
type Bwrap struct {
	path string
	// self is the binary run as the helper ("" is os.Executable()); ns,
	// when set, overrides the namespace mode found by probing.
	self string
	ns   *nsMode

	once    sync.Once
	bin     string
	lookErr error
}

// NewBwrap returns the bubblewrap backend running the bwrap binary at
// path, or the one found on $PATH when path is "".
func NewBwrap(path string) *Bwrap { return &Bwrap{path: path} }

// Name implements Backend.
func (b *Bwrap) Name() string { return "bwrap" }

func (b *Bwrap) binary() (string, error) {
	b.once.Do(func() {
		p := b.path
		if p == "" {
			p = "bwrap"
		}
		b.bin, b.lookErr = exec.LookPath(p)
	})
	return b.bin, b.lookErr
}

// baseArgs are the namespace and mount flags common to every policy.
// Run as root, bwrap keeps the caller's capabilities for the command
// unless told otherwise; the ones that reach past the sandbox (remount /
// writable, ptrace, raw devices…) are dropped, as under Landlock.
func baseArgs(network bool) []string {
	return append(nsArgs(network), "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc")
}

// nsArgs are baseArgs without the mounts.
func nsArgs(network bool) []string {
	args := []string{"--die-with-parent", "--new-session", "--unshare-pid"}
	if !network {
		args = append(args, "--unshare-net")
	}
	if os.Geteuid() == 0 {
		for _, c := range droppedCapNames {
			args = append(args, "--cap-drop", c)
		}
	}
	return args
}

func (b *Bwrap) executable() (string, error) {
	if b.self != "" {
		return b.self, nil
	}
	return selfExecutable()
}

// supervised wraps a bwrap command line in the helper, in lifetime-only
// mode: bwrap's own --die-with-parent is set by its sandboxed child
// after the clone, so a bwrap killed in between (dsh killed, say) left
// that child and the command running. Under the helper, the command's
// lifetime no longer rests on that prctl: the helper's PID namespace
// dies with it, or, without one, orphans are re-parented to the helper
// (a subreaper) and killed by it.
func (b *Bwrap) supervised(bwrapArgv []string) (argv []string, procAttr func(*syscall.SysProcAttr), ns nsMode, err error) {
	self, err := b.executable()
	if err != nil {
		return nil, nil, nsNone, fmt.Errorf("cannot find own executable: %w", err)
	}
	if b.ns != nil {
		ns = *b.ns
	} else {
		ns = namespaceFor(self)
	}
	spec := helperSpec{Lifetime: true, NS: string(ns), Parent: os.Getpid()}
	return helperArgv(self, spec, bwrapArgv), ns.procAttr(), ns, nil
}

// Probe implements Backend: it runs `bwrap … true` with the namespaces
// Confine uses, which fails where user namespaces or mount propagation
// are unavailable (many containers: "Failed to make / slave",
// "Creating new namespace failed").
func (b *Bwrap) Probe() error {
	if nestedProbe() || (b.self == "" && !helperHosted.Load()) {
		return errNestedProbe
	}
	bin, err := b.binary()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), probeTimeout)
	defer cancel()
	// The command is `true` under the gate helper where the gate works,
	// so the probe also proves the helper starts inside bwrap.
	inner := []string{"true"}
	if unixGateSupported() == nil {
		if inner, err = b.gateArgv(inner, gateSpec{}); err != nil {
			return err
		}
	}
	argv, procAttr, _, err := b.supervised(append(append(append([]string{bin}, baseArgs(false)...), "--"), inner...))
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = probeEnv()
	cmd.SysProcAttr = spawnAttr(procAttr)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s does not work here (under the helper: does main call sandbox.RunHelperIfRequested?): %v: %s", bin, err, bytes.TrimSpace(out))
	}
	return nil
}

// gateArgv wraps argv in the gate-only helper that runs inside bwrap:
// lifetime-only (bwrap confines the rest) plus the UNIX socket gate.
func (b *Bwrap) gateArgv(argv []string, g gateSpec) ([]string, error) {
	self, err := b.executable()
	if err != nil {
		return nil, fmt.Errorf("%w: cannot find own executable for the socket gate: %v", ErrUnavailable, err)
	}
	return helperArgv(self, helperSpec{Gate: &g, Lifetime: true, Scope: true}, argv), nil
}

// Confine implements Backend.
func (b *Bwrap) Confine(argv []string, p Policy) (Confined, error) {
	c, _, err := b.confineServed(argv, p)
	return c, err
}

// confineServed is Confine, and the plan of a session server inside the
// same bubblewrap options (serverBackend).
func (b *Bwrap) confineServed(argv []string, p Policy) (Confined, serverPlan, error) {
	if err := validate(argv, p); err != nil {
		return Confined{}, serverPlan{}, err
	}
	if p.Mode == DangerFullAccess {
		return Unconfined(argv), serverPlan{}, nil
	}
	bin, err := b.binary()
	if err != nil {
		return Confined{}, serverPlan{}, fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	l, err := newLayout(p)
	if err != nil {
		return Confined{}, serverPlan{}, err
	}
	args, gaps := bwrapArgs(l, p.Network)
	gate, gaps, err := withGate(l, p, gaps)
	if err != nil {
		return Confined{}, serverPlan{}, err
	}
	cmd := argv
	if gate != nil {
		if cmd, err = b.gateArgv(argv, *gate); err != nil {
			return Confined{}, serverPlan{}, err
		}
	}
	out := make([]string, 0, 1+len(args)+1+len(cmd))
	out = append(out, bin)
	out = append(out, args...)
	out = append(out, "--")
	out = append(out, cmd...)
	out, procAttr, ns, err := b.supervised(out)
	if err != nil {
		return Confined{}, serverPlan{}, fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	if ns == nsNone {
		gaps = append(gaps, gapNoNamespaceBwrap)
	}
	c := Confined{
		Argv:        out,
		ProcAttr:    procAttr,
		Backend:     b.Name(),
		Enforcement: Full,
		Gaps:        gaps,
		Denied:      outputDenied,
	}
	if len(gaps) > 0 {
		c.Enforcement = Partial
	}
	tmp := l.scratch
	if tmp == "" {
		tmp = l.tmpdir
	}
	return c, b.plan(bin, args, helperSpec{Lifetime: true, Scope: true, Gate: gate, TmpDir: tmp}), nil
}

// bwrapArgs turns a layout into bwrap options, returning what they leave
// unprotected.
func bwrapArgs(l layout, network bool) (args, gaps []string) {
	args = append(nsArgs(network), readCapArgs(l.reads)...)
	args = append(args, rootArgs(l.reads)...)
	// Parents before children: a later bind of a parent would hide an
	// earlier bind beneath it. The deny-read mounts are sorted in with
	// them (readlayout.go: the most specific entry wins).
	// TMPDIR is a mount of its own, although it lies in a temp dir that
	// is bound whole: link(2) and rename(2) never cross mounts (EXDEV),
	// so no host socket in the shared temp dirs (ssh-agent, tmux, X11)
	// can be linked or moved to where the socket gate lets commands
	// connect. The workspace and the writable roots are mounts of their
	// own anyway.
	writable := slices.Concat(l.temps, l.roots)
	for _, d := range []string{l.scratch, l.tmpdir} {
		if d != "" {
			writable = append(writable, d)
			args = append(args, "--setenv", "TMPDIR", d)
		}
	}
	args = append(args, orderedMounts(l.reads, writable)...)
	args = append(args, pinParents(l)...)
	// Read-only binds come last so they win over the writable ones.
	for _, g := range l.protected {
		fi, err := os.Lstat(g)
		if err != nil || l.reads.denied(g) {
			continue
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			// mount(2) follows the link, so only its target (also in
			// protected) can be made read-only.
			gaps = append(gaps, g+" is a symlink: its target is read-only, but the link itself can be replaced")
			continue
		}
		args = append(args, "--ro-bind", g, g)
	}
	return append(args, readFinalArgs(l.reads)...), gaps
}
