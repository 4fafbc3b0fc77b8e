package sandbox

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
)

// HelperArg is os.Args[1] of a process that the Landlock backend
// re-executes as its helper: `self HelperArg <policy> -- argv…`.
// RunHelperIfRequested recognises it.
const HelperArg = "__dsh_sandbox_exec"

// probeArg is os.Args[1] of the command the Landlock probe runs under the
// helper: it tries a write that the sandbox must refuse.
const probeArg = "__dsh_sandbox_probe"

// helperErrPrefix starts every line the helper prints about itself, so
// that a runner failure is not mistaken for a denial of the command.
const helperErrPrefix = "dsh-sandbox: "

// Exit codes of the helper, in the shell's tradition: it could not
// confine (126) or could not find the command (127). It never runs a
// command unconfined.
const (
	helperExitSetup    = 126
	helperExitNotFound = 127
)

// Landlock confines commands with Landlock (filesystem), seccomp
// (network, TIOCSTI) and no_new_privs, without needing user namespaces,
// so it works in containers where bubblewrap does not. Go's os/exec has
// no pre-exec hook, so Confine re-executes this binary as a helper; main
// must call RunHelperIfRequested first thing.
//
// The helper supervises the command (see supervise): it confines one
// locked thread and forks the command from it, so the command inherits
// the confinement while the helper stays free to supervise. Started in
// a new PID and mount namespace where the spawner can create one
// (CAP_SYS_ADMIN, or an unprivileged user namespace mapping only the
// caller's ids; probed once), it is that namespace's pid 1 and mounts a
// fresh /proc: the command sees no host process (dsh, its ancestors,
// other sessions), and when the command exits, is stopped or dsh dies
// (SIGKILL included), the namespace dies and takes everything the
// command started with it, setsid and double forks included. Without a
// namespace (reported as a gap, Partial) the helper is a child subreaper
// that kills its whole subtree at those moments instead, and host
// processes stay visible in /proc: their command lines can be read,
// their environment, memory and descriptors cannot (below).
//
// Whatever the namespace: the command runs without the capabilities that
// reach past the sandbox (droppedCaps: CAP_SYS_PTRACE, CAP_SYS_ADMIN,
// CAP_DAC_READ_SEARCH… from every set, bounding included, so even root
// cannot regain them), which makes Landlock's ptrace scoping hold for
// /proc/<pid>/environ, mem and fd of every process outside the sandbox;
// the helper is non-dumpable, and no descriptor beyond 0-2 reaches the
// command (Harden). dsh itself calls Harden at start, so same-user
// commands without CAP_SYS_PTRACE cannot read its /proc entries under
// any backend.
//
// The helper also serves the UNIX socket gate (unixgate.go) while the
// command runs: pathname UNIX sockets outside the workspace, the
// writable roots, TMPDIR and Policy.UnixSockets are refused in every
// mode but danger-full-access (Landlock itself covers them only from
// ABI 9); where the kernel cannot run the gate, Confine reports the gap.
//
// Landlock is an allow-list: reads and execution everywhere except the
// deny-read entries, carved out like .git below (landlock_reads.go), or
// under ConfineReads only in the read roots; writes in
// the writable roots, the temp dirs (workspace-write) or the private
// scratch TMPDIR (read-only; workspace-write's TMPDIR is that directory
// too); writing to /dev/null, /dev/tty and
// /dev/pts. It cannot subtract a .git from a grant on its parent, so a
// writable root holding .git (or a worktree's git dir) is granted piece
// by piece: every entry except the git metadata, recursively along the
// way to it. The price: new entries cannot be created, and existing ones
// cannot be removed or renamed, directly in such a root (e.g. `touch
// ./new` or `sed -i` of a top-level file fails with "Permission denied";
// files in subdirectories are unaffected, and an entry that the file
// tools create becomes writable for the next command, since each command
// computes its grants afresh). LooseGit trades this for writable .git.
//
// With ABI ≥ 6, signals to processes outside the command's own sandbox
// (dsh itself, the user's other processes, background jobs of earlier
// commands) are refused, and so, without network, are abstract UNIX
// sockets. Gaps reported as Partial: no PID namespace, no truncate
// right (ABI < 3), no seccomp for this architecture, no socket gate
// (seccomp user notification or pidfd_getfd missing), .git inside a
// temp dir (temp dirs are granted whole: carving them would break
// mktemp), LooseGit. Before ABI 2, moving files between directories is
// always refused; from ABI 2 it is allowed within and between TMPDIR and
// the writable roots only, never from or to the shared temp dirs, so
// that no host socket there can be linked or moved to where the socket
// gate allows it (mv copies instead).
type Landlock struct {
	self string
	// ns, when set, overrides the namespace mode found by probing
	// (tests exercise every mode on one machine).
	ns *nsMode

	// LooseGit grants writable roots whole: top-level entries can be
	// created and removed, but .git metadata becomes writable, and
	// Confine reports Partial.
	LooseGit bool
}

// NewLandlock returns the Landlock backend re-executing self as its
// helper, or os.Executable() when self is "".
func NewLandlock(self string) *Landlock { return &Landlock{self: self} }

// Name implements Backend.
func (l *Landlock) Name() string { return "landlock" }

func (l *Landlock) executable() (string, error) {
	if l.self != "" {
		return l.self, nil
	}
	return selfExecutable()
}

// helperSpec is the policy as the helper receives it, already resolved by
// Confine so the helper (run on every command) only opens and grants.
type helperSpec struct {
	// Roots are granted writable except for Protected beneath them.
	Roots []string `json:"roots,omitempty"`
	// Whole are granted writable entirely (temp dirs, scratch), but
	// for moving files in or out (REFER), which only TmpDir and the
	// Roots get.
	Whole     []string `json:"whole,omitempty"`
	Protected []string `json:"protected,omitempty"`
	// Deny are the deny-read entries: carved out of every grant, read
	// and write (readlayout.go).
	Deny []string `json:"deny,omitempty"`
	// Read are the roots granted for reading (carved around Deny);
	// empty, everything ("/") unless Confine.
	Read    []string `json:"read,omitempty"`
	Confine bool     `json:"confine,omitempty"`
	// Shm grants /dev/shm (POSIX shared memory, e.g. Python
	// multiprocessing) like a temp dir.
	Shm     bool `json:"shm,omitempty"`
	Network bool `json:"network,omitempty"`
	// TmpDir, when set, becomes the command's TMPDIR.
	TmpDir string `json:"tmpdir,omitempty"`

	// Lifetime asks for supervision only (bwrap): no Landlock, seccomp
	// or capability drop, just the command's lifetime bound to the
	// helper's and the helper's to the spawner's.
	Lifetime bool `json:"lifetime,omitempty"`
	// NS is the nsMode the spawner starts the helper in ("" for none).
	NS string `json:"ns,omitempty"`
	// Parent is the spawner's pid: the helper checks that it is still
	// its parent once its own death signal is in place.
	Parent int `json:"parent,omitempty"`
	// Inner marks the helper inside a user namespace, started by the
	// outer one (startInner).
	Inner bool `json:"inner,omitempty"`
	// Gate, when set, makes the helper serve the UNIX socket gate
	// (unixgate.go) for the command. With Lifetime (inside bubblewrap,
	// which confines the rest) it is the only restriction the helper
	// adds.
	Gate *gateSpec `json:"gate,omitempty"`
	// Scope keeps a lifetime-only command (bubblewrap's) from
	// signalling or tracing what lies outside its own Landlock domain:
	// the helper or server that forked it and bubblewrap's init, which
	// share its PID namespace (scopeSelf). Landlock commands have it
	// from their own ruleset.
	Scope bool `json:"scope,omitempty"`
	// TTY starts the command as the leader of a new session whose
	// controlling terminal is its standard input (a PTY's slave), instead
	// of in a process group of the helper's session (see ControllingTTY).
	TTY bool `json:"tty,omitempty"`

	// Server makes the helper the session's sandbox server
	// (server_linux.go): it takes commands on its stdin, a UNIX socket,
	// instead of running the one after "--"; each command's confinement
	// comes with it.
	Server bool `json:"server,omitempty"`
	// SweepNS tells a server that it runs alone with its commands in a
	// PID namespace it is not init of (bubblewrap's), so that it may
	// kill everything else in it between commands.
	SweepNS bool `json:"sweepns,omitempty"`
}

// Confine implements Backend.
func (l *Landlock) Confine(argv []string, p Policy) (Confined, error) {
	c, _, err := l.confineServed(argv, p)
	return c, err
}

// confineServed is Confine, and the plan of a session server that runs
// the same command under the same rules (serverBackend).
func (l *Landlock) confineServed(argv []string, p Policy) (Confined, serverPlan, error) {
	if err := validate(argv, p); err != nil {
		return Confined{}, serverPlan{}, err
	}
	if p.Mode == DangerFullAccess {
		return Unconfined(argv), serverPlan{}, nil
	}
	abi := landlockABI()
	if abi < 1 {
		return Confined{}, serverPlan{}, fmt.Errorf("%w: Landlock is not enabled in this kernel", ErrUnavailable)
	}
	self, err := l.executable()
	if err != nil {
		return Confined{}, serverPlan{}, fmt.Errorf("%w: cannot find own executable: %v", ErrUnavailable, err)
	}
	lay, err := newLayout(p)
	if err != nil {
		return Confined{}, serverPlan{}, err
	}
	spec, gaps := landlockSpec(lay, p.Network, abi, seccompSupported(), l.LooseGit)
	if spec.Gate, gaps, err = withGate(lay, p, gaps); err != nil {
		return Confined{}, serverPlan{}, err
	}
	ns := l.namespace(self)
	plan := landlockPlan(self, ns, spec)
	spec.NS, spec.Parent = string(ns), os.Getpid()
	if ns == nsNone {
		gaps = append(gaps, gapNoNamespace)
		if abi < 6 {
			gaps = append(gaps, fmt.Sprintf("a command can signal its supervisor, and by killing it leave processes behind (Landlock ABI %d < 6 and no PID namespace)", abi))
		}
	}
	c := Confined{
		Argv:        helperArgv(self, spec, argv),
		ProcAttr:    ns.procAttr(),
		Backend:     l.Name(),
		Enforcement: Full,
		Gaps:        gaps,
		Denied:      outputDenied,
	}
	if len(gaps) > 0 {
		c.Enforcement = Partial
	}
	return c, plan, nil
}

// namespace is the mode the helper is started in.
func (l *Landlock) namespace(self string) nsMode {
	if l.ns != nil {
		return *l.ns
	}
	return namespaceFor(self)
}

// landlockSpec builds the helper's instructions for a layout on a kernel
// with the given Landlock ABI, and names what they cannot enforce.
func landlockSpec(lay layout, network bool, abi int, seccomp, looseGit bool) (helperSpec, []string) {
	spec := helperSpec{Network: network, TmpDir: lay.scratch}
	var gaps []string
	if lay.scratch != "" {
		spec.Whole = []string{lay.scratch}
	} else {
		spec.Roots = lay.roots
		spec.Whole = lay.temps
		spec.TmpDir = lay.tmpdir
		spec.Shm = true
		for _, g := range lay.protected {
			if looseGit {
				continue
			}
			if t := withinAny(g, lay.temps); t != "" {
				gaps = append(gaps, fmt.Sprintf("%s lies inside temp dir %s, which Landlock grants whole: it stays writable", g, t))
				continue
			}
			spec.Protected = append(spec.Protected, g)
		}
		if looseGit && len(lay.protected) > 0 {
			gaps = append(gaps, "git metadata and the protected configuration (.dsh, .claude, .codex, Policy.Protected) inside the writable roots are writable (LooseGit)")
		}
	}
	spec, gaps = landlockReads(spec, lay, gaps)
	if abi < 3 {
		gaps = append(gaps, fmt.Sprintf("truncating files outside the writable roots is not blocked (Landlock ABI %d < 3)", abi))
	}
	if !network && !seccomp {
		if abi >= 4 {
			gaps = append(gaps, "only TCP connect and bind are blocked: no seccomp socket filter on this system")
		} else {
			gaps = append(gaps, fmt.Sprintf("network access is not blocked: no seccomp socket filter on this system and Landlock ABI %d < 4", abi))
		}
	}
	return spec, gaps
}

// withGate returns the gate for a policy, or nil with a gap saying that
// host UNIX sockets stay reachable when this kernel cannot run it.
func withGate(lay layout, p Policy, gaps []string) (*gateSpec, []string, error) {
	if err := unixGateSupported(); err != nil {
		return nil, append(gaps, "UNIX sockets outside the workspace are not blocked: "+err.Error()), nil
	}
	g, err := newGateSpec(lay, p)
	if err != nil {
		return nil, gaps, err
	}
	return &g, gaps, nil
}

// Probe implements Backend: it runs a write that must be refused through
// the helper (this binary, re-executed) and checks that it was. This
// catches a kernel without Landlock, a binary whose main does not call
// RunHelperIfRequested, and a helper that cannot start.
func (l *Landlock) Probe() error {
	if nestedProbe() || (l.self == "" && !helperHosted.Load()) {
		return errNestedProbe
	}
	if abi := landlockABI(); abi < 1 {
		return errors.New("Landlock is not enabled in this kernel")
	}
	self, err := l.executable()
	if err != nil {
		return fmt.Errorf("cannot find own executable: %w", err)
	}
	dir, err := os.MkdirTemp("", "dsh-landlock-probe-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	target := filepath.Join(dir, "must-not-exist")
	c, err := l.Confine([]string{self, probeArg, target}, Policy{Mode: ReadOnly})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), probeTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.Argv[0], c.Argv[1:]...)
	cmd.Env = probeEnv()
	cmd.SysProcAttr = spawnAttr(c.ProcAttr)
	out, err := cmd.CombinedOutput()
	if _, serr := os.Lstat(target); serr == nil {
		return errors.New("a write outside the writable roots was not refused")
	}
	if err != nil || !bytes.Contains(out, []byte("refused")) {
		return fmt.Errorf("the helper did not confine (does main call sandbox.RunHelperIfRequested?): %v: %s", err, bytes.TrimSpace(out))
	}
	return nil
}

// RunHelperIfRequested turns this process into the sandbox helper when
// it was started as one (os.Args[1] == HelperArg): it supervises the
// command (confined, unless the spec asks for supervision only) and exits
// with its status, never returning. Otherwise it returns at once. Call it
// first thing in main, and in the TestMain of any package whose tests use
// a real sandbox backend (both run commands under the helper); it costs
// one comparison.
func RunHelperIfRequested() {
	helperHosted.Store(true)
	if len(os.Args) < 2 {
		return
	}
	switch os.Args[1] {
	case HelperArg:
		os.Exit(runHelper(os.Args[2:]))
	case probeArg:
		os.Exit(runProbeWrite(os.Args[2:]))
	case nsProbeArg:
		os.Exit(runNSProbe())
	}
}

// runHelper decodes the policy and supervises the command; it returns
// the helper's exit code.
func runHelper(args []string) int {
	// The helper mostly waits: one P keeps it from starting a thread per
	// CPU, which measurably slows every command on a busy machine.
	runtime.GOMAXPROCS(1)
	fail := func(code int, format string, a ...any) int {
		fmt.Fprintf(os.Stderr, helperErrPrefix+format+"\n", a...)
		return code
	}
	if len(args) < 3 || args[1] != "--" {
		return fail(helperExitSetup, "usage: %s <policy> -- command [args…]", HelperArg)
	}
	raw, err := base64.RawURLEncoding.DecodeString(args[0])
	if err != nil {
		return fail(helperExitSetup, "bad policy: %v", err)
	}
	var spec helperSpec
	if err := json.Unmarshal(raw, &spec); err != nil {
		return fail(helperExitSetup, "bad policy: %v", err)
	}
	argv := args[2:]
	env := os.Environ()
	if spec.TmpDir != "" {
		env = append(slices.DeleteFunc(env, func(kv string) bool {
			return strings.HasPrefix(kv, "TMPDIR=")
		}), "TMPDIR="+spec.TmpDir)
	}
	// The helper's PATH is the command's. Looking up before confining
	// keeps the confined part to the exec itself. A server looks up
	// each command as it comes.
	path := ""
	if !spec.Server {
		if path, err = exec.LookPath(argv[0]); err != nil {
			return fail(helperExitNotFound, "%v", err)
		}
	}
	code, err := supervise(spec, path, argv, env)
	if err != nil {
		return fail(code, "%v", err)
	}
	return code
}

// runProbeWrite is the probe's command: it tries to create args[0] and
// reports "refused" (exit 0) when the sandbox stops it.
func runProbeWrite(args []string) int {
	if len(args) != 1 {
		return 2
	}
	err := os.WriteFile(args[0], []byte("sandbox probe\n"), 0o600)
	switch {
	case err == nil:
		fmt.Println("written")
		return 1
	case errors.Is(err, fs.ErrPermission):
		fmt.Println("refused")
		return 0
	}
	fmt.Println(err)
	return 2
}
