// Package bash is the model-facing bash tool: one fresh `bash -c` per
// call, run in its own process group through internal/proc, with a
// per-call timeout, a working directory and bounded output that ends in
// an "[exit code: N]" marker. With Options.Confine each command runs
// wrapped by a sandbox, and a refusal by the sandbox ends the output with
// a "[sandbox: … denied …]" line the model may escalate once. With
// Options.Jobs a call may set run_in_background and get a job id at once
// while the command runs as a background job (background.go).
package bash

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/dsh-dev/dsh/internal/jobs"
	"github.com/dsh-dev/dsh/internal/proc"
	"github.com/dsh-dev/dsh/internal/sandbox"
	"github.com/dsh-dev/dsh/internal/tool"
)

// Name is the tool's model-facing name.
const Name = "bash"

// Defaults for zero Options fields.
const (
	DefaultOutputLimit = 30000
	DefaultTimeout     = 120 * time.Second
	DefaultMaxTimeout  = 600 * time.Second
	DefaultShell       = "bash"
)

// SessionEnv is the environment variable that carries the session id to
// commands, so scripts and hooks can tell which session ran them.
const SessionEnv = "DSH_SESSION_ID"

//go:embed bash.md
var description string

// errTimeout is the cause of the per-call timeout context; it tells our
// own timeout apart from a deadline imposed by the caller.
var errTimeout = errors.New("bash: command timeout")

// Options configures the tool.
type Options struct {
	// OutputLimit is how many bytes of output are kept; 0 means
	// DefaultOutputLimit.
	OutputLimit int
	// DefaultTimeout applies when the call gives no timeout_ms; 0 means
	// DefaultTimeout.
	DefaultTimeout time.Duration
	// MaxTimeout caps timeout_ms (larger values are lowered to it and the
	// output says so); 0 means DefaultMaxTimeout.
	MaxTimeout time.Duration
	// Shell is the program run as `Shell -c command`; "" means
	// DefaultShell.
	Shell string
	// EnvPassthrough names secret-looking environment variables (…KEY…,
	// …TOKEN…, …SECRET…, …PASSWORD…) that commands may still see; all
	// others are removed from their environment and redacted from output.
	EnvPassthrough []string
	// EnvAllow, when not nil, is the whole environment commands get from
	// dsh's: the variables it names (an entry ending in "*" is a prefix,
	// see StrictEnv) and DSH_SESSION_ID, nothing else, secret-named or
	// not. EnvPassthrough does not add to it.
	EnvAllow []string
	// Confine wraps each command's argv for the sandbox under the call's
	// policy. Nil runs commands unconfined (tests, and compositions that
	// run in danger-full-access only). An error means the command must
	// not run: the call fails with the error's code (SANDBOX_UNAVAILABLE
	// unless it is a *tool.Error) and nothing is started. A non-nil
	// Confine also offers the model the sandbox_permissions and
	// justification parameters.
	Confine func(c *tool.Call, argv []string) (Confinement, error)
	// Jobs runs run_in_background commands as jobs of kind "bash" owned
	// by the call's session. Nil removes the parameter from the schema
	// and the description.
	Jobs *jobs.Registry
	// Persistent runs foreground commands in one long-lived shell per
	// session, so that cd, variables and the like carry over between
	// calls (persistent.go). Use NewPersistent, which returns the closer
	// that ends the shells.
	Persistent bool

	shells *shellPool
}

func (o Options) withDefaults() Options {
	if o.OutputLimit <= 0 {
		o.OutputLimit = DefaultOutputLimit
	}
	if o.DefaultTimeout <= 0 {
		o.DefaultTimeout = DefaultTimeout
	}
	if o.MaxTimeout <= 0 {
		o.MaxTimeout = DefaultMaxTimeout
	}
	if o.DefaultTimeout > o.MaxTimeout {
		o.DefaultTimeout = o.MaxTimeout
	}
	if o.Shell == "" {
		o.Shell = DefaultShell
	}
	return o
}

// pipelineBackstop is how far above MaxTimeout the pipeline's limit on a
// bash call lies: room for the kill grace and the output collection after
// the tool's own timeout, so that the pipeline ends a call only when the
// tool failed to.
const pipelineBackstop = time.Minute

// New returns the bash tool definition. It enforces its own per-call
// timeout (from timeout_ms), which keeps the partial output, so its
// Definition.Timeout is only a backstop above MaxTimeout. It is never
// concurrency-safe: commands mutate the workspace.
func New(opts Options) tool.Definition {
	opts = opts.withDefaults()
	return tool.Definition{
		Name:        Name,
		Description: describe(opts),
		Parameters:  parameters(opts),
		Timeout:     opts.MaxTimeout + pipelineBackstop,
		Execute: func(ctx context.Context, c *tool.Call) (tool.Result, error) {
			return execute(ctx, opts, c)
		},
	}
}

// NewPersistent returns the bash tool with a persistent shell per
// session (Options.Persistent) and the closer that kills the shells,
// which the session's owner calls when the session ends.
func NewPersistent(opts Options) (tool.Definition, io.Closer) {
	opts.Persistent = true
	opts.shells = newShellPool()
	return New(opts), opts.shells
}

func describe(o Options) string {
	text := docSection(sandboxSection(description, o.Confine != nil), "background", o.Jobs != nil)
	if o.Persistent {
		text += "\n\nCommands run one after another in the same shell: the working directory after `cd`, variables, functions and `set` options carry over to the next call. " +
			"A command that times out is killed with its shell, and the next call starts a fresh shell in the session directory."
	}
	return strings.NewReplacer(
		"{{DEFAULT_TIMEOUT_MS}}", strconv.FormatInt(o.DefaultTimeout.Milliseconds(), 10),
		"{{DEFAULT_TIMEOUT}}", human(o.DefaultTimeout),
		"{{MAX_TIMEOUT_MS}}", strconv.FormatInt(o.MaxTimeout.Milliseconds(), 10),
		"{{MAX_TIMEOUT}}", human(o.MaxTimeout),
		"{{OUTPUT_LIMIT}}", strconv.Itoa(o.OutputLimit),
	).Replace(strings.TrimSpace(text))
}

func parameters(o Options) json.RawMessage {
	// Written out rather than marshalled from a map so the property order
	// reads naturally for the model (map keys would be sorted).
	return json.RawMessage(fmt.Sprintf(`{"type":"object",`+
		`"properties":{`+
		`"command":{"type":"string","description":"The bash command to run."},`+
		`"description":{"type":"string","description":"A few words saying what the command does, shown to the user."},`+
		`"timeout_ms":{"type":"integer","minimum":1,"maximum":%d,"description":"Timeout in milliseconds (default %d, maximum %d)."},`+
		`"workdir":{"type":"string","description":"Directory to run in; relative paths resolve against the session working directory (the default)."}`+
		`%s%s},"required":["command"],"additionalProperties":false}`,
		o.MaxTimeout.Milliseconds(), o.DefaultTimeout.Milliseconds(), o.MaxTimeout.Milliseconds(), backgroundParam(o), escalationParams(o)))
}

// maxTimeoutMs bounds a parsed timeout_ms (about 31 years).
const maxTimeoutMs = 1e12

// args are the validated call arguments.
type args struct {
	Command     string
	Description string
	Timeout     time.Duration // 0: not given
	TimeoutMs   int64         // as given, for the clamp note
	Workdir     string
	// SandboxPermissions is the escalation requested ("" = none).
	SandboxPermissions string
	Justification      string
	// Background asks for a background job (run_in_background).
	Background bool
}

// parseArgs validates the arguments by hand rather than with
// json.Unmarshal into a struct, so that every wrong type gets a message
// naming the field and the model can fix its call. Unknown fields are
// ignored; null counts as absent.
func parseArgs(raw json.RawMessage) (args, error) {
	var a args
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil || fields == nil {
		return a, invalid("arguments must be a JSON object")
	}
	str := func(name string) (string, bool, error) {
		v, ok := fields[name]
		if !ok || string(v) == "null" {
			return "", false, nil
		}
		var s string
		if err := json.Unmarshal(v, &s); err != nil {
			return "", false, invalid("%s must be a string", name)
		}
		return s, true, nil
	}
	cmd, ok, err := str("command")
	if err != nil {
		return a, err
	}
	if !ok || strings.TrimSpace(cmd) == "" {
		return a, invalid("command is required and must be a non-empty string")
	}
	a.Command = cmd
	if a.Description, _, err = str("description"); err != nil {
		return a, err
	}
	if a.Workdir, _, err = str("workdir"); err != nil {
		return a, err
	}
	if a.SandboxPermissions, _, err = str("sandbox_permissions"); err != nil {
		return a, err
	}
	if a.Justification, _, err = str("justification"); err != nil {
		return a, err
	}
	if err := checkEscalation(a); err != nil {
		return a, err
	}
	if v, ok := fields["run_in_background"]; ok && string(v) != "null" {
		if err := json.Unmarshal(v, &a.Background); err != nil {
			return a, invalid("run_in_background must be a boolean")
		}
	}
	if v, ok := fields["timeout_ms"]; ok && string(v) != "null" {
		ms, err := strconv.ParseFloat(string(bytes.TrimSpace(v)), 64)
		// ParseFloat also accepts "Inf" and "0x10"; the JSON check rules
		// those out, and an integral float (120000.0) is tolerated.
		if err != nil || !json.Valid(v) || ms != math.Trunc(ms) {
			return a, invalid("timeout_ms must be an integer number of milliseconds")
		}
		if ms < 1 {
			return a, invalid("timeout_ms must be at least 1")
		}
		// Anything this large is clamped to MaxTimeout later; capping here
		// keeps the Duration arithmetic from overflowing.
		ms = min(ms, maxTimeoutMs)
		a.TimeoutMs = int64(ms)
		a.Timeout = time.Duration(a.TimeoutMs) * time.Millisecond
	}
	return a, nil
}

func invalid(format string, v ...any) error {
	return tool.Errorf(tool.CodeInvalidArgs, "invalid arguments for bash: "+format, v...)
}

// resolveWorkdir picks the directory: workdir (relative to the session
// cwd, ~ expanded) or the session cwd itself.
func resolveWorkdir(cwd, workdir string) (string, error) {
	base := cwd
	if base == "" {
		var err error
		if base, err = os.Getwd(); err != nil {
			return "", tool.Errorf(tool.CodeFailed, "cannot determine the working directory: %v", err)
		}
	}
	dir := base
	if workdir != "" {
		dir = workdir
		if dir == "~" || strings.HasPrefix(dir, "~/") {
			if home, err := os.UserHomeDir(); err == nil {
				dir = filepath.Join(home, dir[1:])
			}
		}
		if !filepath.IsAbs(dir) {
			dir = filepath.Join(base, dir)
		}
		dir = filepath.Clean(dir)
	}
	fi, err := os.Stat(dir)
	code := tool.CodeFailed // a broken session cwd is not the model's fault
	if workdir != "" {
		code = tool.CodeInvalidArgs
	}
	switch {
	case err != nil:
		return "", tool.Errorf(code, "workdir %s does not exist", dir)
	case !fi.IsDir():
		return "", tool.Errorf(code, "workdir %s is not a directory", dir)
	}
	return dir, nil
}

// meta is the structured, logged side of a result.
type meta struct {
	ExitCode    int    `json:"exitCode"`
	DurationMs  int64  `json:"durationMs"`
	ElidedBytes int64  `json:"elidedBytes"`
	TotalBytes  int64  `json:"totalBytes"`
	Workdir     string `json:"workdir"`
	TimedOut    bool   `json:"timedOut,omitempty"`
	Cancelled   bool   `json:"cancelled,omitempty"`
	// SandboxMode is the mode the command was confined under (set only
	// when the tool confines).
	SandboxMode string `json:"sandboxMode,omitempty"`
	// SandboxDenied reports that the sandbox refused something the
	// command tried; a later call may escalate it.
	SandboxDenied bool `json:"sandboxDenied,omitempty"`
}

func execute(ctx context.Context, o Options, c *tool.Call) (tool.Result, error) {
	a, err := parseArgs(c.Arguments)
	if err != nil {
		return tool.Result{}, err
	}
	dir, err := resolveWorkdir(c.Cwd, a.Workdir)
	if err != nil {
		return tool.Result{}, err
	}
	if a.Background && o.Jobs == nil {
		// Not silently run in the foreground: a server would hang the
		// call until the timeout.
		return tool.Result{}, invalid("run_in_background is not available here")
	}
	var notes []string
	timeout := o.DefaultTimeout
	if a.Background {
		timeout = 0 // a background job has no timeout unless asked for
	}
	if a.Timeout > 0 {
		timeout = a.Timeout
		if timeout > o.MaxTimeout {
			// Clamped rather than rejected: the command is still worth
			// running, and the note tells the model what happened.
			timeout = o.MaxTimeout
			notes = append(notes, fmt.Sprintf("[timeout_ms %d is over the maximum of %d; used %d]",
				a.TimeoutMs, o.MaxTimeout.Milliseconds(), o.MaxTimeout.Milliseconds()))
		}
	}

	if o.shells != nil && !a.Background && a.SandboxPermissions == "" {
		return executePersistent(ctx, o, c, a, timeout, notes)
	}
	env, secrets := o.environ(c.SessionID)
	argv, long := shellArgv(o.Shell, a.Command)
	var conf *Confinement
	if o.Confine != nil {
		cf, err := o.Confine(c, argv)
		if err != nil {
			return tool.Result{}, confineError(err)
		}
		conf = &cf
		argv, env = cf.Argv, append(env, cf.Env...)
	}
	if a.Background {
		b := background{argv: argv, env: env, secrets: secrets, dir: dir, conf: conf, timeout: timeout, notes: notes}
		if long {
			b.command = a.Command
		}
		return startBackground(ctx, o, c, a, b)
	}
	if o.shells != nil && !a.Background {
		notes = append(notes, "[ran in a one-off shell: an escalated command does not see or change the persistent shell's state]")
	}

	runCtx, cancel := context.WithTimeoutCause(ctx, timeout, errTimeout)
	defer cancel()
	spec := proc.Spec{
		Argv:        argv,
		Dir:         dir,
		Env:         proc.EnvPolicy{Exact: env},
		OutputLimit: o.OutputLimit,
	}
	if conf != nil {
		spec.SysProcAttr = conf.ProcAttr
	}
	if long {
		f, err := commandFile(a.Command)
		if err != nil {
			return tool.Result{}, tool.Errorf(tool.CodeFailed, "could not hand over a command of %d bytes: %v", len(a.Command), err)
		}
		defer f.Close()
		spec.Stdin = f
	}
	var out proc.Outcome
	if conf != nil && conf.Run != nil {
		out, err = conf.Run(runCtx, spec) // the session's sandbox server
	} else {
		out, err = proc.Run(runCtx, spec)
	}
	// A command killed for its timeout reports the timeout, whatever
	// became of the sandbox server that ran it (one the command stopped
	// is killed with it).
	if err != nil && !out.TimedOut {
		if ctx.Err() != nil {
			return tool.Result{}, tool.Errorf(tool.CodeAborted, "tool call cancelled")
		}
		if errors.Is(err, sandbox.ErrUnavailable) {
			// The sandbox failed under the command: fail closed.
			return tool.Result{}, confineError(err)
		}
		return tool.Result{}, tool.Errorf(tool.CodeFailed, "could not start %s: %v", argv[0], err)
	}

	var text strings.Builder
	body := redactSecrets(strings.TrimRight(strings.ToValidUTF8(string(out.Output), "\uFFFD"), "\n"), secrets)
	if body == "" {
		body = "(no output)"
	}
	text.WriteString(body)
	text.WriteString("\n\n")
	for _, n := range notes {
		text.WriteString(n + "\n")
	}
	res := tool.Result{}
	switch {
	case out.TimedOut:
		limit := timeout
		if context.Cause(runCtx) != errTimeout {
			limit = out.Duration.Round(time.Millisecond) // the caller's deadline, not ours
		}
		fmt.Fprintf(&text, "[timed out after %s; process group killed]", human(limit))
		res.IsError = true
		res.Error = tool.Errorf(tool.CodeTimeout, "command timed out after %s", human(limit))
	case out.Cancelled:
		text.WriteString("[cancelled; process group killed]")
		res.IsError = true
		res.Error = tool.Errorf(tool.CodeAborted, "tool call cancelled")
	default:
		if out.Signaled {
			sig := syscall.Signal(out.ExitCode - 128)
			fmt.Fprintf(&text, "[killed by signal %d (%s)]\n", int(sig), sig)
		}
		fmt.Fprintf(&text, "[exit code: %d]", out.ExitCode)
	}
	m := meta{
		ExitCode:    out.ExitCode,
		DurationMs:  out.Duration.Milliseconds(),
		ElidedBytes: out.Elided,
		TotalBytes:  out.TotalBytes,
		Workdir:     dir,
		TimedOut:    out.TimedOut,
		Cancelled:   out.Cancelled,
	}
	if conf != nil {
		m.SandboxMode = string(conf.Policy.Mode)
		// A killed command proves nothing about the sandbox.
		if !out.TimedOut && !out.Cancelled && conf.Denied != nil && conf.Denied(out.ExitCode, out.Output) {
			m.SandboxDenied = true
			text.WriteString("\n" + denialMarker(conf.Policy, out.Output))
		}
	}
	res.Content = tool.Text(text.String()).Content
	res.Meta, _ = json.Marshal(m)
	return res, nil
}

// environ is this process's environment without secrets, with the
// session id set, and the secret values removed from it.
func environ(sessionID string, passthrough []string) ([]string, []string) {
	env, secrets := scrubbedEnv(passthrough)
	if sessionID == "" {
		return env, secrets
	}
	out := env[:0]
	for _, kv := range env {
		if !strings.HasPrefix(kv, SessionEnv+"=") {
			out = append(out, kv)
		}
	}
	return append(out, SessionEnv+"="+sessionID), secrets
}

// human formats whole seconds as "120s" (what the docs and markers say)
// and anything else the way time.Duration does ("1.5s", "300ms").
func human(d time.Duration) string {
	if d >= time.Second && d%time.Second == 0 {
		return strconv.FormatInt(int64(d/time.Second), 10) + "s"
	}
	return d.String()
}
