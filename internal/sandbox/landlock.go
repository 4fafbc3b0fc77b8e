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
// (network, TIOCSTI) and no_new_privs, without namespaces, so it works in
// containers where bubblewrap does not. Go's os/exec has no pre-exec hook,
// so Confine re-executes this binary as a helper that restricts a thread
// and starts the command from it; main must call RunHelperIfRequested
// first thing. The helper stays to serve the UNIX socket gate
// (unixgate.go) until the command exits, then exits the same way; where
// the kernel cannot run the gate it execs the command instead and
// Confine reports the gap.
//
// Landlock is an allow-list: reads and execution everywhere; writes in
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
// sockets; host processes stay visible. Pathname UNIX sockets outside
// the workspace, the writable roots, TMPDIR and Policy.UnixSockets are
// refused by the gate in every mode but danger-full-access (Landlock
// itself covers them only from ABI 9). Gaps reported as Partial: no
// truncate right (ABI < 3), no seccomp for this architecture, no
// socket gate (seccomp user notification or pidfd_getfd missing), .git
// inside a temp dir (temp dirs are granted whole: carving them would
// break mktemp), LooseGit. Before ABI 2, moving files between
// directories is always refused.
type Landlock struct {
	self string

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
	return os.Executable()
}

// helperSpec is the policy as the helper receives it, already resolved by
// Confine so the helper (run on every command) only opens and grants.
type helperSpec struct {
	// Roots are granted writable except for Protected beneath them.
	Roots []string `json:"roots,omitempty"`
	// Whole are granted writable entirely (temp dirs, scratch).
	Whole     []string `json:"whole,omitempty"`
	Protected []string `json:"protected,omitempty"`
	// Shm grants /dev/shm (POSIX shared memory, e.g. Python
	// multiprocessing) like a temp dir.
	Shm     bool `json:"shm,omitempty"`
	Network bool `json:"network,omitempty"`
	// TmpDir, when set, becomes the command's TMPDIR.
	TmpDir string `json:"tmpdir,omitempty"`
	// Gate, when set, makes the helper serve the UNIX socket gate
	// (unixgate.go) instead of exec'ing the command.
	Gate *gateSpec `json:"gate,omitempty"`
	// GateOnly skips Landlock and the helper's own seccomp filter:
	// bubblewrap already confines the command and runs the helper only
	// for the gate.
	GateOnly bool `json:"gate_only,omitempty"`
}

// Confine implements Backend.
func (l *Landlock) Confine(argv []string, p Policy) (Confined, error) {
	if err := validate(argv, p); err != nil {
		return Confined{}, err
	}
	if p.Mode == DangerFullAccess {
		return Unconfined(argv), nil
	}
	abi := landlockABI()
	if abi < 1 {
		return Confined{}, fmt.Errorf("%w: Landlock is not enabled in this kernel", ErrUnavailable)
	}
	self, err := l.executable()
	if err != nil {
		return Confined{}, fmt.Errorf("%w: cannot find own executable: %v", ErrUnavailable, err)
	}
	lay, err := newLayout(p)
	if err != nil {
		return Confined{}, err
	}
	spec, gaps := landlockSpec(lay, p.Network, abi, seccompSupported(), l.LooseGit)
	if spec.Gate, gaps, err = withGate(lay, p, gaps); err != nil {
		return Confined{}, err
	}
	enc, err := json.Marshal(spec)
	if err != nil {
		return Confined{}, err
	}
	out := make([]string, 0, 4+len(argv))
	out = append(out, self, HelperArg, base64.RawURLEncoding.EncodeToString(enc), "--")
	out = append(out, argv...)
	c := Confined{
		Argv:        out,
		Backend:     l.Name(),
		Enforcement: Full,
		Gaps:        gaps,
		Denied:      outputDenied,
	}
	if len(gaps) > 0 {
		c.Enforcement = Partial
	}
	return c, nil
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
			gaps = append(gaps, "git metadata inside the writable roots is writable (LooseGit)")
		}
	}
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
	out, err := exec.CommandContext(ctx, c.Argv[0], c.Argv[1:]...).CombinedOutput()
	if _, serr := os.Lstat(target); serr == nil {
		return errors.New("a write outside the writable roots was not refused")
	}
	if err != nil || !bytes.Contains(out, []byte("refused")) {
		return fmt.Errorf("the helper did not confine (does main call sandbox.RunHelperIfRequested?): %v: %s", err, bytes.TrimSpace(out))
	}
	return nil
}

// RunHelperIfRequested turns this process into the Landlock helper when
// it was started as one (os.Args[1] == HelperArg): it confines itself and
// execs the command, never returning. Otherwise it returns at once. Call
// it first thing in main, and in the TestMain of any package whose tests
// use the Landlock backend; it costs one comparison.
func RunHelperIfRequested() {
	if len(os.Args) < 2 {
		return
	}
	switch os.Args[1] {
	case HelperArg:
		os.Exit(runHelper(os.Args[2:]))
	case probeArg:
		os.Exit(runProbeWrite(os.Args[2:]))
	}
}

// runHelper decodes the policy and hands over to the platform's
// confine-and-exec; it returns only on failure.
func runHelper(args []string) int {
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
	// keeps the confined part to the exec itself.
	path, err := exec.LookPath(argv[0])
	if err != nil {
		return fail(helperExitNotFound, "%v", err)
	}
	if spec.Gate != nil {
		return runGated(spec, path, argv, env)
	}
	if spec.GateOnly {
		return fail(helperExitSetup, "gate-only policy without a gate")
	}
	err = confineAndExec(spec, path, argv, env)
	return fail(helperExitSetup, "%v", err)
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
