package sandbox

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
)

// nsMode is the namespace the helper is started in: its own PID and
// mount namespace, created directly (the spawner holds CAP_SYS_ADMIN) or
// inside a user namespace of the caller's own ids, or none.
type nsMode string

const (
	nsNone nsMode = ""
	nsPID  nsMode = "pid"
	nsUser nsMode = "user"
)

// nsProbeArg is os.Args[1] of the command the namespace probe runs under
// the helper.
const nsProbeArg = "__dsh_sandbox_nsprobe"

// gapNoNamespace is the gap reported where the helper gets no PID
// namespace.
const gapNoNamespace = "no PID namespace here (neither CAP_SYS_ADMIN nor user namespaces): " +
	"commands see the host's processes in /proc (their command lines; not their environment or memory), " +
	"and what they leave running is killed by the helper rather than by the kernel"

// gapNoNamespaceBwrap is the same for bubblewrap, whose own PID
// namespace hides the host: only the lifetime part applies.
const gapNoNamespaceBwrap = "no PID namespace for the helper here: what a command leaves running is killed by the helper rather than by the kernel"

// probingEnv is set in the environment of every probe the package runs.
// A binary that does not call RunHelperIfRequested (a package's test
// binary, typically) runs as itself when probed, its tests included;
// finding the variable there, its own probes fail at once instead of
// probing again, level after level.
const probingEnv = "DSH_SANDBOX_PROBING"

// errNestedProbe is the error of a probe made inside another's.
var errNestedProbe = errors.New("this binary does not host the sandbox helper (main must call sandbox.RunHelperIfRequested)")

// probeEnv is the environment of a probe.
func probeEnv() []string { return append(os.Environ(), probingEnv+"=1") }

// nestedProbe reports whether this process is a probe's command that is
// not the helper.
func nestedProbe() bool { return os.Getenv(probingEnv) != "" }

// helperHosted is set by RunHelperIfRequested: this binary can serve as
// the helper, so the default backends (which re-execute it) and
// Supervise may use it without a probe re-running a binary that cannot.
var helperHosted atomic.Bool

// Supervise wraps argv for danger-full-access: no confinement, but the
// same lifetime guarantee as the sandboxed modes (nothing the command
// starts outlives it, or dsh), through the helper in lifetime-only mode
// as a subreaper, without a PID namespace, since full access exists to
// reach the host's processes. In a binary that does not host the helper
// (no RunHelperIfRequested) it is Unconfined: process-group teardown
// only.
func (s *Sandbox) Supervise(argv []string) Confined {
	c := Unconfined(argv)
	if len(argv) == 0 || !helperHosted.Load() || !supervisable {
		return c
	}
	self, err := selfExecutable()
	if err != nil {
		return c
	}
	c.Argv = helperArgv(self, helperSpec{Lifetime: true, Parent: os.Getpid()}, argv)
	return c
}

var nsModes = struct {
	sync.Mutex
	m map[string]nsMode
}{m: map[string]nsMode{}}

// namespaceFor is the best namespace mode in which the helper at self
// starts here, found on first need by trying each (a few milliseconds)
// and remembered for the process: privileges and kernel settings do not
// change mid-session.
func namespaceFor(self string) nsMode {
	nsModes.Lock()
	defer nsModes.Unlock()
	if m, ok := nsModes.m[self]; ok {
		return m
	}
	m := nsNone
	if exe, err := selfExecutable(); nestedProbe() || (!helperHosted.Load() && err == nil && exe == self) {
		// This binary cannot be the helper: probing would run it as
		// itself. Its commands fail anyway (Probe says why).
		return m
	}
	for _, c := range nsCandidates() {
		if probeNS(self, c) == nil {
			m = c
			break
		}
	}
	nsModes.m[self] = m
	return m
}

// helperArgv is the command line that runs argv under the helper at self.
func helperArgv(self string, spec helperSpec, argv []string) []string {
	enc, _ := json.Marshal(spec) // plain strings, ints and bools: cannot fail
	out := make([]string, 0, 4+len(argv))
	out = append(out, self, HelperArg, base64.RawURLEncoding.EncodeToString(enc), "--")
	return append(out, argv...)
}

// ControllingTTY wraps argv so that it runs as the leader of a new
// session whose controlling terminal is its standard input, which must
// be a terminal (the slave of a PTY dsh holds). It goes inside the
// confinement: `Confine(ControllingTTY(argv))`. Bubblewrap starts its
// command without a controlling terminal (--new-session), and the
// helpers run theirs in a process group of their own session, where a
// read from the terminal would stop the command (SIGTTIN); under this
// helper the command, and the jobs a shell in it starts, are the
// terminal's foreground, so ^C written to the PTY and TIOCSIG on its
// master reach them, and nothing they start outlives them (the helper
// is a subreaper and sweeps on exit, as in lifetime-only mode). A PTY
// opened by its own process cannot be used to inject input into any
// other terminal, so the TIOCSTI reason for --new-session does not apply.
// It fails in a binary that does not host the helper.
func ControllingTTY(argv []string) ([]string, error) {
	if len(argv) == 0 {
		return nil, errors.New("sandbox: empty argv")
	}
	if !helperHosted.Load() || !supervisable {
		return nil, errors.New("sandbox: this binary does not host the helper (main must call sandbox.RunHelperIfRequested)")
	}
	self, err := selfExecutable()
	if err != nil {
		return nil, fmt.Errorf("sandbox: cannot find own executable: %w", err)
	}
	return helperArgv(self, helperSpec{Lifetime: true, TTY: true}, argv), nil
}
