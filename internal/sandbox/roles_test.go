package sandbox

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/dsh-dev/dsh/internal/proc"
)

// The attack and escape tests re-execute the test binary in two roles
// around the confined command: an "ancestor" (a user's shell: holds a
// secret in its environment and on its command line, and leaks a
// descriptor to a deleted secret file) and above the command a "parent"
// that plays dsh (holds secrets, hardens itself unless told not to,
// confines the command and runs it with a scrubbed environment).
const (
	roleAncestor = "__dsh_test_ancestor"
	roleParent   = "__dsh_test_parent"
)

// roleConfig is what a parent runs, passed as JSON in its argv.
type roleConfig struct {
	Backend string   `json:"backend"` // "bwrap", "landlock" or "none"
	NS      nsMode   `json:"ns"`
	Harden  bool     `json:"harden"`
	Script  string   `json:"script"`
	Mode    Mode     `json:"mode"`
	Dir     string   `json:"dir"`
	Spawn   int      `json:"spawn,omitempty"` // >0: start this many copies, wait for none
	Extra   []string `json:"extra,omitempty"` // more argv for the role (a secret on a command line)
	// Server runs the command through a Session's server (Confined.Run)
	// instead of starting it; Backend "none" is then full access's
	// lifetime-only server.
	Server bool `json:"server,omitempty"`
}

// runTestRole serves the roles; it returns when os.Args names none.
func runTestRole() {
	if len(os.Args) < 3 {
		return
	}
	switch os.Args[1] {
	case roleAncestor:
		os.Exit(runAncestor(os.Args[2:]))
	case roleParent:
		os.Exit(runParent(os.Args[2]))
	}
}

// runAncestor leaks an fd to a deleted file holding SECRET_FD, then runs
// the parent with its own argv (which carries SECRET_ARG).
func runAncestor(args []string) int {
	f, err := os.CreateTemp("", "secret-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	fmt.Fprintf(f, "SECRET_FD=%s\n", os.Getenv("SECRET_FD_VALUE"))
	os.Remove(f.Name())
	// Not close-on-exec: inherited by the parent, as dsh inherits
	// whatever its caller left open.
	fd, err := syscall.Dup(int(f.Fd()))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	_ = fd
	self, _ := os.Executable()
	cmd := exec.Command(self, roleParent, args[0])
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			return ee.ExitCode()
		}
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	return 0
}

// runParent confines cfg.Script and runs it as dsh would: own session,
// Pdeathsig, namespaces, environment without the secrets.
func runParent(raw string) int {
	var cfg roleConfig
	if err := json.Unmarshal([]byte(raw), &cfg); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	if cfg.Harden {
		if err := Harden(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
	}
	argv := []string{"bash", "-c", cfg.Script}
	p := Policy{Mode: cfg.Mode, Workspace: cfg.Dir}
	if cfg.Server {
		return runServed(cfg, argv, p)
	}
	var (
		c   Confined
		err error
	)
	ns := cfg.NS
	switch cfg.Backend {
	case "bwrap":
		c, err = (&Bwrap{ns: &ns}).Confine(argv, p)
	case "landlock":
		c, err = (&Landlock{ns: &ns}).Confine(argv, p)
	default:
		c = Unconfined(argv)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SECRET_") {
			env = append(env, kv)
		}
	}
	start := func() (*exec.Cmd, error) {
		cmd := command(c)
		cmd.Dir, cmd.Env = cfg.Dir, env
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		return cmd, cmd.Start()
	}
	if cfg.Spawn > 0 {
		// Keep starting until killed: the test kills this process at a
		// random moment of a spawn.
		for range cfg.Spawn {
			if _, err := start(); err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 2
			}
		}
		select {}
	}
	cmd, err := start()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	if err := cmd.Wait(); err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			return ee.ExitCode()
		}
		return 2
	}
	return 0
}

// sandboxConfig is one backend in one namespace mode.
type sandboxConfig struct {
	name    string
	backend string
	ns      nsMode
}

// sandboxConfigs are the configurations that work here: bwrap, and
// Landlock in each namespace mode (the detected one, the user namespace
// one, none), so one machine exercises all of them.
func sandboxConfigs(t *testing.T) []sandboxConfig {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	var out []sandboxConfig
	if NewBwrap("").Probe() == nil {
		out = append(out, sandboxConfig{"bwrap", "bwrap", namespaceFor(self)}, sandboxConfig{"bwrap/no-ns", "bwrap", nsNone})
	}
	if landlockABI() >= 1 {
		for _, m := range []nsMode{nsPID, nsUser, nsNone} {
			if m != nsNone && probeNS(self, m) != nil {
				continue
			}
			name := string(m)
			if m == nsNone {
				name = "no-ns"
			}
			out = append(out, sandboxConfig{"landlock/" + name, "landlock", m})
		}
	}
	if len(out) == 0 {
		t.Skip("no sandbox backend works here")
	}
	return out
}

// startRole starts the test binary in role with cfg, returning the
// command and a reader of its stdout.
func startRole(t *testing.T, role string, cfg roleConfig, env ...string) (*exec.Cmd, *bufio.Reader) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(cfg)
	cmd := exec.Command(self, append([]string{role, string(raw)}, cfg.Extra...)...)
	cmd.Env = append(os.Environ(), env...)
	if cfg.Spawn == 0 {
		// Killed spawners make their helpers complain, as they should.
		cmd.Stderr = os.Stderr
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd, bufio.NewReader(out)
}

// workDir is a workspace for the role tests.
func workDir(t *testing.T) string {
	t.Helper()
	d, err := resolvePath("/", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(d, "ws"), 0o755); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(d, "ws")
}

// runServed is runParent through a session's server: the command's
// output is collected, so readiness goes through the workspace (the
// script says how).
func runServed(cfg roleConfig, argv []string, p Policy) int {
	ns := cfg.NS
	var (
		c   Confined
		err error
	)
	switch cfg.Backend {
	case "bwrap":
		c, err = New(&Bwrap{ns: &ns}).Session().Confine(argv, p)
	case "landlock":
		c, err = New(&Landlock{ns: &ns}).Session().Confine(argv, p)
	default:
		c = New().Session().Supervise(argv)
	}
	if err != nil || c.Run == nil {
		fmt.Fprintln(os.Stderr, "no server:", err)
		return 2
	}
	out, err := c.Run(context.Background(), proc.Spec{Argv: c.Argv, Dir: cfg.Dir, Env: proc.EnvPolicy{Exact: os.Environ()}, SysProcAttr: c.ProcAttr})
	os.Stdout.Write(out.Output)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	return out.ExitCode
}
