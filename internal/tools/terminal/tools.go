package terminal

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/dsh-dev/dsh/internal/jobs"
	"github.com/dsh-dev/dsh/internal/terminal"
	"github.com/dsh-dev/dsh/internal/tool"
	"github.com/dsh-dev/dsh/internal/tools/bash"
)

const idParam = `"session_id":{"type":"string","description":"The terminal's id from terminal_open or terminal_list (term-N)."}`

func openTool(o Options) tool.Definition {
	return tool.Definition{
		Name: OpenName,
		Description: "Open a persistent terminal (a pseudo-terminal that stays open across calls): an interactive shell, a Python or Node REPL, or any command " +
			"(a dev server, an interactive installer). It runs in the same sandbox as bash and belongs to this session; it is closed with it. " +
			"Returns the terminal id (session_id for the other terminal_* tools) and the first output. " +
			"Use it for state that must persist between commands (a REPL, a long-running server); use bash for one-off commands.",
		Parameters: schema(`{"type":"object","properties":{` +
			`"type":{"type":"string","enum":["shell","python","node","command"],"description":"shell (interactive bash), python (python3 REPL), node (Node.js REPL), or command (runs the command parameter)."},` +
			`"name":{"type":"string","description":"A short label for the terminal."},` +
			`"cwd":{"type":"string","description":"Directory to start in; relative paths resolve against the session working directory (the default)."},` +
			`"command":{"type":"string","description":"With type command: the command line to run (through bash -c)."},` +
			fmt.Sprintf(`"wait_ms":{"type":"integer","minimum":1,"maximum":%d,"description":"How long to wait for the first output to settle (default %d)."}`, o.MaxWait.Milliseconds(), o.Wait.Milliseconds()) +
			`},"required":["type"],"additionalProperties":false}`),
		Timeout: o.MaxWait + time.Minute,
		Execute: func(ctx context.Context, c *tool.Call) (tool.Result, error) { return open(ctx, o, c) },
	}
}

func open(ctx context.Context, o Options, c *tool.Call) (tool.Result, error) {
	f, err := parseFields(OpenName, c.Arguments)
	if err != nil {
		return tool.Result{}, err
	}
	typ, err := f.str("type", true)
	if err != nil {
		return tool.Result{}, err
	}
	k, ok := types[typ]
	if !ok {
		return tool.Result{}, invalid(OpenName, "type must be one of %s", typeNames())
	}
	name, err := f.str("name", false)
	if err != nil {
		return tool.Result{}, err
	}
	cwd, err := f.str("cwd", false)
	if err != nil {
		return tool.Result{}, err
	}
	command, err := f.str("command", false)
	if err != nil {
		return tool.Result{}, err
	}
	wait := o.Wait
	if ms, ok, err := f.integer("wait_ms", 1, o.MaxWait.Milliseconds()); err != nil {
		return tool.Result{}, err
	} else if ok {
		wait = time.Duration(ms) * time.Millisecond
	}
	argv := k.argv
	switch {
	case typ == TypeCommand && strings.TrimSpace(command) == "":
		return tool.Result{}, invalid(OpenName, "type command needs a non-empty command")
	case typ == TypeCommand && len(command) > bash.MaxInlineCommand:
		// The command would travel as one argument, which Linux limits to
		// 128 KiB, and the terminal's standard input is its PTY.
		return tool.Result{}, invalid(OpenName, "a terminal command is at most %d KiB (this one is %d KiB): write it to a script file and run that", bash.MaxInlineCommand>>10, (len(command)+1023)>>10)
	case typ == TypeCommand:
		argv = []string{"bash", "-c", command}
	case command != "":
		return tool.Result{}, invalid(OpenName, "command is only used with type command")
	default:
		command = strings.Join(argv, " ")
	}
	dir, err := resolveDir(c.Cwd, cwd)
	if err != nil {
		return tool.Result{}, err
	}
	env, secrets := bash.Environ(c.SessionID, o.EnvPassthrough)
	env = withEnv(env, append(append([]string(nil), commonEnv...), k.env...)...)
	argv, err = o.TTY(argv)
	if err != nil {
		return tool.Result{}, tool.Errorf(tool.CodeFailed, "cannot give the terminal a controlling terminal: %v", err)
	}
	spec := terminal.Spec{
		Owner: c.SessionID, Name: name, Type: typ, Command: command, Argv: argv, Dir: dir, Env: env, Prompt: k.prompt,
		Redact:      func(s string) string { return bash.RedactSecrets(s, secrets) },
		MaxPerOwner: o.MaxPerSession, Scrollback: o.Scrollback,
	}
	if o.Confine != nil {
		cf, err := o.Confine(c, argv)
		if err != nil {
			var te *tool.Error
			if asToolError(err, &te) {
				return tool.Result{}, te
			}
			return tool.Result{}, &tool.Error{Name: "SandboxError", Code: "SANDBOX_UNAVAILABLE", Message: "the terminal was not opened because it could not be sandboxed: " + err.Error()}
		}
		spec.Argv, spec.Env, spec.SysProcAttr, spec.Sandbox = cf.Argv, append(spec.Env, cf.Env...), cf.ProcAttr, string(cf.Policy.Mode)
	}
	t, err := o.Manager.Open(ctx, spec)
	if err != nil {
		return tool.Result{}, toolError(err)
	}
	// The first output: a REPL's banner and prompt, a server's start-up.
	start := time.Now()
	s, err := settle(ctx, t, 0, 0, o.Quiet, wait)
	if err != nil {
		return tool.Result{}, tool.Errorf(tool.CodeAborted, "tool call cancelled (%s stays open)", t.ID())
	}
	out, next := tail(t, 0, o.ReadLimit)
	t.SetCursor(next)
	i := t.Info()
	var b strings.Builder
	fmt.Fprintf(&b, "Opened %s.\n", describeInfo(i))
	b.WriteString(out)
	b.WriteString("\n\n" + status(t, s, time.Since(start), next))
	return result(b.String(), map[string]any{"terminalId": i.ID, "pid": i.Pid, "type": typ, "dir": dir, "sandboxMode": i.Sandbox, "offset": next, "state": s}), nil
}

func asToolError(err error, te **tool.Error) bool {
	e, ok := err.(*tool.Error)
	if ok {
		*te = e
	}
	return ok
}

// resolveDir picks the start directory: dir relative to the session cwd.
func resolveDir(cwd, dir string) (string, error) {
	base := cwd
	if base == "" {
		var err error
		if base, err = os.Getwd(); err != nil {
			return "", tool.Errorf(tool.CodeFailed, "cannot determine the working directory: %v", err)
		}
	}
	d := base
	if dir != "" {
		d = dir
		if !filepath.IsAbs(d) {
			d = filepath.Join(base, d)
		}
		d = filepath.Clean(d)
	}
	if fi, err := os.Stat(d); err != nil || !fi.IsDir() {
		return "", invalid(OpenName, "cwd %s is not a directory", d)
	}
	return d, nil
}

func sendTool(o Options) tool.Definition {
	bg := ""
	if o.Jobs != nil {
		bg = `,"run_in_background":{"type":"boolean","description":"Return at once with a job id; the output until the prompt returns (or the terminal exits) is read with job_output; job_kill interrupts it (SIGINT)."}`
	}
	return tool.Definition{
		Name: SendName,
		Description: "Type text into a terminal. With submit (the default) Enter follows and the call waits until the output settles " +
			"(the REPL's or shell's prompt is back, the output pauses, the terminal exits, or wait_ms passes), then returns the output the text produced. " +
			"submit false sends the text as is (keys for an interactive prompt; control characters such as \\u0003 for Ctrl-C) and returns without waiting.",
		Parameters: schema(`{"type":"object","properties":{` + idParam + `,` +
			`"text":{"type":"string","description":"The text to type (a command, code, an answer)."},` +
			`"submit":{"type":"boolean","description":"Press Enter after the text and wait for the output (default true)."},` +
			fmt.Sprintf(`"wait_ms":{"type":"integer","minimum":1,"maximum":%d,"description":"How long to wait for the output to settle (default %d)."}`, o.MaxWait.Milliseconds(), o.Wait.Milliseconds()) +
			bg + `},"required":["session_id","text"],"additionalProperties":false}`),
		Timeout: o.MaxWait + time.Minute,
		Execute: func(ctx context.Context, c *tool.Call) (tool.Result, error) { return send(ctx, o, c) },
	}
}

func send(ctx context.Context, o Options, c *tool.Call) (tool.Result, error) {
	f, err := parseFields(SendName, c.Arguments)
	if err != nil {
		return tool.Result{}, err
	}
	id, err := f.terminalID()
	if err != nil {
		return tool.Result{}, err
	}
	text, err := f.str("text", true)
	if err != nil {
		return tool.Result{}, err
	}
	submit, err := f.boolean("submit", true)
	if err != nil {
		return tool.Result{}, err
	}
	background, err := f.boolean("run_in_background", false)
	if err != nil {
		return tool.Result{}, err
	}
	if background && o.Jobs == nil {
		return tool.Result{}, invalid(SendName, "run_in_background is not available here")
	}
	wait := o.Wait
	if ms, ok, err := f.integer("wait_ms", 1, o.MaxWait.Milliseconds()); err != nil {
		return tool.Result{}, err
	} else if ok {
		wait = time.Duration(ms) * time.Millisecond
	}
	if text == "" && !submit {
		return tool.Result{}, invalid(SendName, "text is empty and submit is false: nothing to send")
	}
	t, err := o.Manager.Get(c.SessionID, id)
	if err != nil {
		return tool.Result{}, toolError(err)
	}
	_, from, _ := t.Changed()
	input := text
	if submit {
		input += "\r"
	}
	if err := t.Write(ctx, []byte(input)); err != nil {
		return tool.Result{}, toolError(err)
	}
	if background {
		return startJob(ctx, o, c, t, text, from, strings.Count(input, "\r")+strings.Count(input, "\n"))
	}
	if !submit {
		return result(fmt.Sprintf("Sent %d bytes to %s (no Enter). Read the output with terminal_read (offset %d).", len(text), id, from),
			map[string]any{"terminalId": id, "offset": from}), nil
	}
	start := time.Now()
	s, err := settle(ctx, t, from, strings.Count(input, "\r")+strings.Count(input, "\n"), o.Quiet, wait)
	if err != nil {
		return tool.Result{}, tool.Errorf(tool.CodeAborted, "tool call cancelled (the text was sent; %s stays open)", id)
	}
	out, next := tail(t, from, o.ReadLimit)
	t.SetCursor(next)
	return result(out+"\n\n"+status(t, s, time.Since(start), next),
		map[string]any{"terminalId": id, "offset": from, "next": next, "state": s}), nil
}

// startJob follows the output of a background send as a job.
func startJob(ctx context.Context, o Options, c *tool.Call, t *terminal.Terminal, text string, from int64, lines int) (tool.Result, error) {
	label := strings.TrimSpace(text)
	if line, _, cut := strings.Cut(label, "\n"); cut {
		label = line + " …"
	}
	if r := []rune(label); len(r) > 80 {
		label = string(r[:79]) + "…"
	}
	label = t.ID() + ": " + label
	job, err := o.Jobs.Start(ctx, jobs.Spec{
		Kind: JobKind, Owner: c.SessionID, Description: label,
		Run: func(jctx context.Context, out io.Writer) (jobs.Outcome, error) {
			return follow(jctx, t, from, lines, out)
		},
	})
	if err != nil {
		return tool.Result{}, tool.Errorf(tool.CodeFailed, "could not start the background job: %v", err)
	}
	return result(fmt.Sprintf("Sent to %s; following its output as background job %s. Read it with job_output (job_id %q); job_kill interrupts it (SIGINT to the terminal).", t.ID(), job.ID, job.ID),
		map[string]any{"terminalId": t.ID(), "background": true, "jobId": job.ID, "offset": from}), nil
}

// follow streams the terminal's output from offset pos into out until
// the prompt returns, the terminal exits, or the job is killed (which
// interrupts the terminal's foreground job).
func follow(ctx context.Context, t *terminal.Terminal, pos int64, lines int, out io.Writer) (jobs.Outcome, error) {
	from := pos
	for {
		ch, _, running := t.Changed()
		page := t.Read(pos, 0)
		if page.Dropped > 0 {
			fmt.Fprintf(out, "\n[%d bytes scrolled out of the terminal's buffer]\n", page.Dropped)
		}
		if len(page.Data) > 0 {
			_, _ = io.WriteString(out, t.Text(page.Data))
		}
		pos = page.Next
		if !running {
			if i := t.Info(); i.ExitCode != nil {
				return jobs.Outcome{ExitCode: i.ExitCode, Failed: *i.ExitCode != 0, Note: t.ID() + " exited"}, nil
			}
			return jobs.Outcome{Note: t.ID() + " closed"}, nil
		}
		// On what was written out, not on what has arrived since: the
		// job's output must hold the prompt the job ended on.
		if atPrompt(t, from, pos, lines) {
			return jobs.Outcome{Note: "the prompt returned"}, nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			_ = t.Signal(syscall.SIGINT)
			return jobs.Outcome{Note: "SIGINT sent to " + t.ID()}, nil
		}
	}
}

func readTool(o Options) tool.Definition {
	return tool.Definition{
		Name: ReadName,
		Description: fmt.Sprintf("Read a terminal's output (escape sequences removed). Offsets count bytes since the terminal opened; "+
			"without offset the read continues where the last send or read stopped; a negative offset counts back from the end. "+
			"Returns at most count bytes (default %d) and the offset to read on from; the terminal keeps a bounded scrollback and says when older output was dropped.", o.ReadLimit),
		Parameters: schema(`{"type":"object","properties":{` + idParam + `,` +
			`"offset":{"type":"integer","description":"Byte offset to read from (default: where the last read stopped; negative: from the end)."},` +
			fmt.Sprintf(`"count":{"type":"integer","minimum":1,"maximum":%d,"description":"How many bytes to read at most (default %d)."}`, maxReadLimit, o.ReadLimit) +
			`},"required":["session_id"],"additionalProperties":false}`),
		ConcurrencySafe: func(json.RawMessage) bool { return true },
		Execute:         func(ctx context.Context, c *tool.Call) (tool.Result, error) { return read(o, c) },
	}
}

func read(o Options, c *tool.Call) (tool.Result, error) {
	f, err := parseFields(ReadName, c.Arguments)
	if err != nil {
		return tool.Result{}, err
	}
	id, err := f.terminalID()
	if err != nil {
		return tool.Result{}, err
	}
	off, hasOff, err := f.integer("offset", -1<<50, 1<<50)
	if err != nil {
		return tool.Result{}, err
	}
	count := int64(o.ReadLimit)
	if n, ok, err := f.integer("count", 1, maxReadLimit); err != nil {
		return tool.Result{}, err
	} else if ok {
		count = n
	}
	t, err := o.Manager.Get(c.SessionID, id)
	if err != nil {
		return tool.Result{}, toolError(err)
	}
	if !hasOff {
		off = t.Cursor()
	}
	page := t.Read(off, int(count))
	t.SetCursor(page.Next)
	i := t.Info()
	var b strings.Builder
	if page.Dropped > 0 {
		fmt.Fprintf(&b, "[%d bytes before offset %d scrolled out of the terminal's buffer (it keeps the last %d bytes)]\n", page.Dropped, page.Start, i.OutputBytes-i.DroppedBytes)
	}
	text := t.Text(page.Data)
	if text == "" {
		text = "(no new output)"
	}
	b.WriteString(text)
	fmt.Fprintf(&b, "\n\n[%s: bytes %d-%d of %d", id, page.Start, page.Next, page.Total)
	switch {
	case page.More:
		fmt.Fprintf(&b, "; more output follows: read on from offset %d", page.Next)
	case i.Running:
		b.WriteString("; running")
	case i.ExitCode != nil:
		fmt.Fprintf(&b, "; exited with status %d", *i.ExitCode)
	}
	b.WriteString("]")
	return result(b.String(), map[string]any{"terminalId": id, "offset": page.Start, "next": page.Next, "total": page.Total, "dropped": page.Dropped, "more": page.More}), nil
}

func signalTool(o Options) tool.Definition {
	return tool.Definition{
		Name: SignalName,
		Description: "Send a signal to the job in a terminal's foreground (as the terminal's own Ctrl-C would): INT interrupts (a running loop, a server), " +
			"TERM and KILL end it, HUP, QUIT, TSTP (suspend) and CONT (resume). Waits briefly for the output that follows.",
		Parameters: schema(`{"type":"object","properties":{` + idParam + `,` +
			`"signal":{"type":"string","enum":["INT","TERM","KILL","HUP","QUIT","TSTP","CONT"],"description":"The signal."}` +
			`},"required":["session_id","signal"],"additionalProperties":false}`),
		Timeout: o.MaxWait + time.Minute,
		Execute: func(ctx context.Context, c *tool.Call) (tool.Result, error) { return signal(ctx, o, c) },
	}
}

func signal(ctx context.Context, o Options, c *tool.Call) (tool.Result, error) {
	f, err := parseFields(SignalName, c.Arguments)
	if err != nil {
		return tool.Result{}, err
	}
	id, err := f.terminalID()
	if err != nil {
		return tool.Result{}, err
	}
	name, err := f.str("signal", true)
	if err != nil {
		return tool.Result{}, err
	}
	sig, ok := signals[strings.TrimPrefix(strings.ToUpper(strings.TrimSpace(name)), "SIG")]
	if !ok {
		return tool.Result{}, invalid(SignalName, "signal must be one of INT, TERM, KILL, HUP, QUIT, TSTP, CONT (got %q)", name)
	}
	t, err := o.Manager.Get(c.SessionID, id)
	if err != nil {
		return tool.Result{}, toolError(err)
	}
	_, from, _ := t.Changed()
	if err := t.Signal(sig); err != nil {
		return tool.Result{}, toolError(err)
	}
	start := time.Now()
	s, err := settle(ctx, t, from, 0, o.Quiet, min(o.Wait, 5*time.Second))
	if err != nil {
		return tool.Result{}, tool.Errorf(tool.CodeAborted, "tool call cancelled (the signal was sent)")
	}
	out, next := tail(t, from, o.ReadLimit)
	t.SetCursor(next)
	return result(fmt.Sprintf("Sent SIG%s to %s.\n%s\n\n%s", strings.TrimPrefix(strings.ToUpper(strings.TrimSpace(name)), "SIG"), id, out, status(t, s, time.Since(start), next)),
		map[string]any{"terminalId": id, "signal": sig.String(), "state": s}), nil
}

func listTool(o Options) tool.Definition {
	return tool.Definition{
		Name:            ListName,
		Description:     "List this session's terminals: id, type, state (running, or the exit status), directory and output size.",
		Parameters:      schema(`{"type":"object","properties":{},"additionalProperties":false}`),
		ConcurrencySafe: func(json.RawMessage) bool { return true },
		Execute: func(_ context.Context, c *tool.Call) (tool.Result, error) {
			if _, err := parseFields(ListName, c.Arguments); err != nil {
				return tool.Result{}, err
			}
			infos := o.Manager.List(c.SessionID)
			if len(infos) == 0 {
				return result("No terminals are open in this session.", map[string]any{"terminals": []string{}}), nil
			}
			lines := make([]string, len(infos))
			ids := make([]string, len(infos))
			for i, in := range infos {
				lines[i], ids[i] = describeInfo(in), in.ID
			}
			return result(strings.Join(lines, "\n"), map[string]any{"terminals": ids}), nil
		},
	}
}

func closeTool(o Options) tool.Definition {
	return tool.Definition{
		Name:        CloseName,
		Description: "Close a terminal: its process and everything it started are ended (SIGTERM, then SIGKILL) and it is removed from the list.",
		Parameters:  schema(`{"type":"object","properties":{` + idParam + `},"required":["session_id"],"additionalProperties":false}`),
		Execute: func(_ context.Context, c *tool.Call) (tool.Result, error) {
			f, err := parseFields(CloseName, c.Arguments)
			if err != nil {
				return tool.Result{}, err
			}
			id, err := f.terminalID()
			if err != nil {
				return tool.Result{}, err
			}
			i, err := o.Manager.Close(c.SessionID, id)
			if err != nil {
				return tool.Result{}, toolError(err)
			}
			msg := fmt.Sprintf("Closed %s.", id)
			if i.ExitCode != nil {
				msg = fmt.Sprintf("Closed %s (status %d).", id, *i.ExitCode)
			}
			return result(msg, map[string]any{"terminalId": id, "pid": i.Pid, "exitCode": i.ExitCode}), nil
		},
	}
}
