// Package terminal is the model-facing terminal tools over the PTY
// manager internal/terminal: terminal_open, terminal_send, terminal_read,
// terminal_signal, terminal_list and terminal_close. Terminals are owned
// by the calling session (a terminal id of another session is not
// found), run under the bash tool's sandbox and environment (Confine and
// the same secret scrubbing), and background sends are jobs of kind
// "terminal" read through job_output.
package terminal

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"syscall"
	"time"

	"github.com/dsh-dev/dsh/internal/jobs"
	"github.com/dsh-dev/dsh/internal/sandbox"
	"github.com/dsh-dev/dsh/internal/terminal"
	"github.com/dsh-dev/dsh/internal/tool"
	"github.com/dsh-dev/dsh/internal/tools/bash"
)

// Tool names.
const (
	OpenName   = "terminal_open"
	SendName   = "terminal_send"
	ReadName   = "terminal_read"
	SignalName = "terminal_signal"
	ListName   = "terminal_list"
	CloseName  = "terminal_close"
)

// Names lists the six tools in order.
var Names = []string{OpenName, SendName, ReadName, SignalName, ListName, CloseName}

// JobKind is the kind of the jobs run_in_background starts.
const JobKind = "terminal"

// Defaults for zero Options fields.
const (
	DefaultQuiet     = 750 * time.Millisecond
	DefaultWait      = 15 * time.Second
	DefaultMaxWait   = 120 * time.Second
	DefaultReadLimit = 16000
	maxReadLimit     = 200000
)

// Options configures the tools.
type Options struct {
	// Manager holds the terminals. Required.
	Manager *terminal.Manager
	// Confine wraps each terminal's argv for the sandbox under the call's
	// policy: the bash tool's confiner (nil: unconfined). An error means
	// the terminal must not start.
	Confine func(c *tool.Call, argv []string) (bash.Confinement, error)
	// TTY wraps the program so that the PTY becomes its controlling
	// terminal inside the sandbox (sandbox.ControllingTTY; nil uses it
	// when the binary hosts the helper, else leaves argv as is).
	TTY func(argv []string) ([]string, error)
	// Jobs runs run_in_background sends as jobs; nil removes the
	// parameter.
	Jobs *jobs.Registry
	// EnvPassthrough names secret-looking variables terminals may see
	// (the bash tool's list).
	EnvPassthrough []string
	// Quiet is how long output must pause before a send without a known
	// prompt counts as settled; <= 0 means DefaultQuiet.
	Quiet time.Duration
	// Wait is how long a send waits for its output to settle by default,
	// MaxWait the most wait_ms may ask; <= 0 means the defaults.
	Wait, MaxWait time.Duration
	// ReadLimit is how many bytes a read or send returns at most by
	// default; <= 0 means DefaultReadLimit.
	ReadLimit int
	// MaxPerSession and Scrollback override the Manager's limits
	// (terminal.Spec) when > 0.
	MaxPerSession, Scrollback int
}

func (o Options) withDefaults() Options {
	if o.Quiet <= 0 {
		o.Quiet = DefaultQuiet
	}
	if o.MaxWait <= 0 {
		o.MaxWait = DefaultMaxWait
	}
	if o.Wait <= 0 {
		o.Wait = DefaultWait
	}
	o.Wait = min(o.Wait, o.MaxWait)
	if o.ReadLimit <= 0 {
		o.ReadLimit = DefaultReadLimit
	}
	if o.TTY == nil {
		o.TTY = func(argv []string) ([]string, error) {
			if w, err := sandbox.ControllingTTY(argv); err == nil {
				return w, nil
			}
			return argv, nil
		}
	}
	return o
}

// New returns the six tool definitions, in Names order.
func New(o Options) []tool.Definition {
	o = o.withDefaults()
	return []tool.Definition{openTool(o), sendTool(o), readTool(o), signalTool(o), listTool(o), closeTool(o)}
}

// toolError turns a manager error into a tool error with its code.
func toolError(err error) error {
	var te *terminal.Error
	if errors.As(err, &te) {
		return &tool.Error{Name: "TerminalError", Code: te.Code, Message: te.Message}
	}
	var tl *tool.Error
	if errors.As(err, &tl) {
		return tl
	}
	return tool.Errorf(tool.CodeFailed, "%v", err)
}

func result(text string, meta any) tool.Result {
	r := tool.Text(text)
	r.Meta, _ = json.Marshal(meta)
	return r
}

// describeInfo is one line about a terminal.
func describeInfo(i terminal.Info) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s", i.ID)
	if i.Name != "" {
		fmt.Fprintf(&b, " %q", i.Name)
	}
	fmt.Fprintf(&b, " (%s", i.Type)
	if i.Command != "" && i.Type == TypeCommand {
		fmt.Fprintf(&b, ": %s", i.Command)
	}
	b.WriteString(")")
	switch {
	case i.Running:
		fmt.Fprintf(&b, " running, pid %d", i.Pid)
	case i.ExitCode != nil:
		fmt.Fprintf(&b, " exited with status %d", *i.ExitCode)
	default:
		b.WriteString(" closed")
	}
	fmt.Fprintf(&b, ", in %s, %d bytes of output", i.Dir, i.OutputBytes)
	if i.Sandbox != "" {
		fmt.Fprintf(&b, ", sandbox %s", i.Sandbox)
	}
	return b.String()
}

// signals are the signals terminal_signal sends.
var signals = map[string]syscall.Signal{
	"INT": syscall.SIGINT, "TERM": syscall.SIGTERM, "KILL": syscall.SIGKILL, "HUP": syscall.SIGHUP,
	"QUIT": syscall.SIGQUIT, "TSTP": syscall.SIGTSTP, "CONT": syscall.SIGCONT,
}

// settled says how a wait for output ended.
type settled string

const (
	settledPrompt  settled = "prompt"
	settledQuiet   settled = "quiet"
	settledTimeout settled = "timeout"
	settledExited  settled = "exited"
)

// settle waits after input written at offset from until the output since
// then ends with the terminal's prompt, the command exits, the output
// has paused for quiet (only after some arrived, when a prompt is known,
// the pause must be twice as long), or wait has passed.
//
// lines is how many lines the input typed (0: none, as after a signal):
// the prompt counts only after that many line ends in the output, the
// echo of the input, so that a prompt printed just before the input was
// read does not end the wait.
func settle(ctx context.Context, t *terminal.Terminal, from int64, lines int, quiet, wait time.Duration) (settled, error) {
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	if t.Prompt() != nil {
		quiet *= 2
	}
	q := time.NewTimer(quiet)
	defer q.Stop()
	for {
		ch, total, running := t.Changed()
		if !running {
			return settledExited, nil
		}
		if atPrompt(t, from, total, lines) {
			return settledPrompt, nil
		}
		select {
		case <-ch:
			if !q.Stop() {
				select {
				case <-q.C:
				default:
				}
			}
			q.Reset(quiet)
		case <-q.C:
			return settledQuiet, nil
		case <-deadline.C:
			return settledTimeout, nil
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}
}

// atPrompt reports whether the output from offset from to end ends with
// the terminal's prompt after at least lines line ends. Only that span
// is read: output arriving meanwhile is the next check's, so a caller
// that has passed on the output up to end has passed on all of what the
// answer rests on.
func atPrompt(t *terminal.Terminal, from, end int64, lines int) bool {
	p := t.Prompt()
	if p == nil || end <= from {
		return false
	}
	page := t.Read(from, 0)
	data := page.Data
	if n := end - page.Start; n < int64(len(data)) {
		data = data[:max(0, n)]
	}
	text := terminal.Clean(data)
	for range lines {
		i := strings.IndexByte(text, '\n')
		if i < 0 {
			return false
		}
		text = text[i+1:]
	}
	return p.MatchString("\n" + text)
}

// status is the closing line of a send or signal result.
func status(t *terminal.Terminal, s settled, waited time.Duration, next int64) string {
	i := t.Info()
	switch s {
	case settledExited:
		if i.ExitCode != nil {
			return fmt.Sprintf("[%s exited with status %d; close it with terminal_close]", i.ID, *i.ExitCode)
		}
		return fmt.Sprintf("[%s is closed]", i.ID)
	case settledPrompt:
		return fmt.Sprintf("[%s is waiting for input; output offset %d]", i.ID, next)
	case settledTimeout:
		return fmt.Sprintf("[%s is still running after %s; read what follows with terminal_read (offset %d), interrupt it with terminal_signal INT]", i.ID, waited.Round(time.Millisecond), next)
	}
	return fmt.Sprintf("[%s output paused; it may still be running: read what follows with terminal_read (offset %d)]", i.ID, next)
}

// tail returns the output of t from offset from, at most limit bytes
// of it (the end), with a note on what was left out, and the offset
// after it.
func tail(t *terminal.Terminal, from int64, limit int) (string, int64) {
	page := t.Read(from, 0)
	var b strings.Builder
	data, start := page.Data, page.Start
	if page.Dropped > 0 {
		fmt.Fprintf(&b, "[%d bytes of this output scrolled out of the terminal's buffer]\n", page.Dropped)
	}
	if len(data) > limit {
		cut := len(data) - limit
		// Start at a line when one begins near the cut.
		if i := strings.IndexByte(string(data[cut:min(len(data), cut+200)]), '\n'); i >= 0 {
			cut += i + 1
		}
		fmt.Fprintf(&b, "[%d earlier bytes not shown: terminal_read with offset %d has them]\n", cut, start)
		data = data[cut:]
	}
	text := t.Text(data)
	if text == "" && b.Len() == 0 {
		text = "(no output)"
	}
	b.WriteString(text)
	return b.String(), page.Next
}

// schema marks a literal JSON schema.
func schema(s string) json.RawMessage { return json.RawMessage(s) }
