package bash

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/dsh-dev/dsh/internal/jobs"
	"github.com/dsh-dev/dsh/internal/proc"
	"github.com/dsh-dev/dsh/internal/redact"
	"github.com/dsh-dev/dsh/internal/tool"
)

// JobKind is the kind of the jobs run_in_background starts.
const JobKind = "bash"

// A background command streams its output into its job while it runs,
// but proc.Run hands output back only when the process has ended.
// So the command gets the write end of a pipe of ours as its stdin, and a
// tiny unconfined shell in front of the confined argv moves it to stdout
// and stderr (stdin becomes /dev/null, as in the foreground) before it
// execs that argv. The confined argv, the process group and its teardown
// are exactly those of a foreground call; only the wrapper, which execs
// away at once, sits outside the sandbox.
//
// A command too long for an argument (longcmd.go) reaches the confined
// shell's stdin the same way: the wrapper opens the temp file that holds
// it (redirectFileScript, the file as its first argument) and removes it.
const (
	redirectShell      = "/bin/sh"
	redirectScript     = `exec >&0 2>&0 </dev/null && exec "$@"`
	redirectFileScript = `exec >&0 2>&0 <"$1" && rm -f -- "$1" && shift && exec "$@"`
)

// drainDelay bounds the read of output still arriving after the command's
// group was killed: only a process that left the group (setsid) can
// still hold the pipe, and waiting for it could take forever.
const drainDelay = 250 * time.Millisecond

// maxJobLabel bounds a job label made from the command itself.
const maxJobLabel = 80

// backgroundParam is the schema of run_in_background, offered only with a
// registry to run jobs in.
func backgroundParam(o Options) string {
	if o.Jobs == nil {
		return ""
	}
	return `,"run_in_background":{"type":"boolean","description":"Run the command as a background job and return its job id at once; read its output with job_output."}`
}

// docSection keeps (without its markers) or drops the part of doc between
// "<!-- name -->" and "<!-- /name -->".
func docSection(doc, name string, keep bool) string {
	open, closing := "<!-- "+name+" -->", "<!-- /"+name+" -->"
	start := strings.Index(doc, open)
	end := strings.Index(doc, closing)
	if start < 0 || end < start {
		return doc
	}
	inner := doc[start+len(open) : end]
	if !keep {
		inner = ""
	}
	out := doc[:start] + strings.Trim(inner, "\n") + doc[end+len(closing):]
	// Dropping a section leaves a run of blank lines behind.
	for strings.Contains(out, "\n\n\n") {
		out = strings.ReplaceAll(out, "\n\n\n", "\n\n")
	}
	return out
}

// background is a command ready to start as a job.
type background struct {
	argv, env []string
	// secrets are the values scrubbed from env, redacted from the output.
	secrets []string
	dir     string
	conf    *Confinement
	timeout time.Duration // 0: none
	notes   []string
	// command is a command too long for an argument, which argv's shell
	// reads from its stdin; "" otherwise.
	command string
}

// startMeta is the logged side of a started background job.
type startMeta struct {
	Background  bool   `json:"background"`
	JobID       string `json:"jobId"`
	Workdir     string `json:"workdir"`
	TimeoutMs   int64  `json:"timeoutMs,omitempty"`
	SandboxMode string `json:"sandboxMode,omitempty"`
}

// startBackground registers the command as a job of the call's session
// and returns at once.
func startBackground(ctx context.Context, o Options, c *tool.Call, a args, b background) (tool.Result, error) {
	label := a.Description
	if strings.TrimSpace(label) == "" {
		label = commandLabel(a.Command)
	}
	job, err := o.Jobs.Start(ctx, jobs.Spec{
		Kind:        JobKind,
		Owner:       c.SessionID,
		Description: label,
		Run: func(jctx context.Context, out io.Writer) (jobs.Outcome, error) {
			return b.run(jctx, o, out)
		},
	})
	if err != nil {
		return tool.Result{}, tool.Errorf(tool.CodeFailed, "could not start the background job: %v", err)
	}
	var text strings.Builder
	fmt.Fprintf(&text, "Started background job %s (%s).\n", job.ID, label)
	if b.timeout > 0 {
		fmt.Fprintf(&text, "It is killed if it still runs after %s.\n", human(b.timeout))
	}
	fmt.Fprintf(&text, "Read its output with job_output (job_id %q); stop it with job_kill.", job.ID)
	for _, n := range b.notes {
		text.WriteString("\n" + n)
	}
	m := startMeta{Background: true, JobID: job.ID, Workdir: b.dir, TimeoutMs: b.timeout.Milliseconds()}
	if b.conf != nil {
		m.SandboxMode = string(b.conf.Policy.Mode)
	}
	res := tool.Text(text.String())
	res.Meta, _ = json.Marshal(m)
	return res, nil
}

// commandLabel is the first line of the command, shortened.
func commandLabel(cmd string) string {
	line, _, cut := strings.Cut(strings.TrimSpace(cmd), "\n")
	if utf8.RuneCountInString(line) > maxJobLabel {
		line = string([]rune(line)[:maxJobLabel-1]) + "…"
	} else if cut {
		line += " …"
	}
	return line
}

// run is the job body: the command runs under ctx (cancelled by job_kill,
// the owner's disposal or shutdown) and streams into out.
func (b background) run(ctx context.Context, o Options, out io.Writer) (jobs.Outcome, error) {
	argv, err := b.wrapped()
	if err != nil {
		return jobs.Outcome{}, err
	}
	if b.command != "" {
		defer os.Remove(argv[4]) // the wrapper removes it once open, unless it failed first
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		return jobs.Outcome{}, fmt.Errorf("could not start %s: %w", b.argv[0], err)
	}
	defer pr.Close()
	// The tail is what the sandbox's denial check looks at, as the
	// foreground's bounded output is.
	tail := &tailBuffer{limit: o.OutputLimit}
	// The job's output is read while it runs (job_output), so it is
	// redacted as a stream, as the foreground result is as a whole.
	red := redact.NewWriter(out, redact.New(redactedMarker, b.secrets...))
	w := io.MultiWriter(red, tail)
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		_, _ = io.Copy(w, pr) // ends at EOF or at the drain deadline
	}()

	runCtx := ctx
	if b.timeout > 0 {
		var cancel context.CancelFunc
		runCtx, cancel = context.WithTimeoutCause(ctx, b.timeout, errTimeout)
		defer cancel()
	}
	spec := proc.Spec{
		Argv:        argv,
		Dir:         b.dir,
		Env:         proc.EnvPolicy{Exact: b.env},
		Stdin:       pw,
		OutputLimit: o.OutputLimit,
	}
	if b.conf != nil {
		// The wrapper execs the helper in place, so the namespaces it is
		// created in are the helper's.
		spec.SysProcAttr = b.conf.ProcAttr
	}
	res, err := proc.Run(runCtx, spec)
	pw.Close() // the group is gone; only escaped processes can hold it now
	_ = pr.SetReadDeadline(time.Now().Add(drainDelay))
	<-copied
	if err != nil {
		return jobs.Outcome{}, fmt.Errorf("could not start %s: %w", b.argv[0], err)
	}
	// What the wrapper itself printed before the redirect (normally
	// nothing: a failure to exec the confined command comes later).
	_, _ = w.Write(res.Output)
	_ = red.Flush()

	outcome := jobs.Exited(res.ExitCode)
	var marker string
	switch {
	case res.TimedOut:
		outcome.Note = fmt.Sprintf("timed out after %s", human(b.timeout))
		marker = fmt.Sprintf("[timed out after %s; process group killed]", human(b.timeout))
	case res.Cancelled:
		outcome.Note = "process group killed"
	case res.Signaled:
		sig := syscall.Signal(res.ExitCode - 128)
		outcome.Note = fmt.Sprintf("killed by signal %d (%s)", int(sig), sig)
	}
	// A killed command proves nothing about the sandbox.
	if c := b.conf; c != nil && !res.TimedOut && !res.Cancelled && c.Denied != nil && c.Denied(res.ExitCode, tail.buf) {
		marker = denialMarker(c.Policy, tail.buf)
		outcome.Note = strings.TrimPrefix(strings.TrimSuffix(marker, "]"), "[")
	}
	if marker != "" {
		if n := len(tail.buf); n > 0 && tail.buf[n-1] != '\n' {
			marker = "\n" + marker
		}
		_, _ = io.WriteString(out, marker+"\n")
	}
	return outcome, nil
}

// wrapped is the command line of the job: the redirecting wrapper and
// the confined argv, with the temp file that holds a long command.
func (b background) wrapped() ([]string, error) {
	if b.command == "" {
		return append([]string{redirectShell, "-c", redirectScript, "sh"}, b.argv...), nil
	}
	f, err := os.CreateTemp("", "dsh-command-")
	if err != nil {
		return nil, fmt.Errorf("could not hand over a command of %d bytes: %w", len(b.command), err)
	}
	_, err = io.WriteString(f, b.command)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(f.Name())
		return nil, fmt.Errorf("could not hand over a command of %d bytes: %w", len(b.command), err)
	}
	return append([]string{redirectShell, "-c", redirectFileScript, "sh", f.Name()}, b.argv...), nil
}

// tailBuffer keeps the last limit bytes written to it.
type tailBuffer struct {
	limit int
	buf   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.buf = append(t.buf, p...)
	// Compacted only at twice the limit: amortised O(1) per byte.
	if len(t.buf) > 2*t.limit {
		t.buf = append(t.buf[:0], t.buf[len(t.buf)-t.limit:]...)
	}
	return len(p), nil
}
