// Package jobs is the model-facing side of background jobs: job_output
// (read a job's output and status, optionally waiting for its end),
// job_list and job_kill, for jobs of every kind in an internal/jobs
// registry.
//
// A session sees only its own jobs (and ownerless ones): job ids are
// predictable ("bash-1"), so every call checks the owner, and a job of
// another session is reported exactly like one that does not exist.
package jobs

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/dsh-dev/dsh/internal/jobs"
	"github.com/dsh-dev/dsh/internal/tool"
)

// Model-facing tool names.
const (
	OutputName = "job_output"
	ListName   = "job_list"
	KillName   = "job_kill"
)

// CodeJobNotFound is the error code for a job that does not exist or
// belongs to another session.
const CodeJobNotFound = "JOB_NOT_FOUND"

// Defaults for zero Options fields.
const (
	DefaultOutputLimit = 30000
	DefaultWait        = 30 * time.Second
	DefaultMaxWait     = 600 * time.Second
)

var (
	//go:embed job_output.md
	outputDoc string
	//go:embed job_list.md
	listDoc string
	//go:embed job_kill.md
	killDoc string
)

// Options configures the tools.
type Options struct {
	// Jobs is the registry the tools read; required.
	Jobs *jobs.Registry
	// OutputLimit bounds the output one job_output result shows; 0 means
	// DefaultOutputLimit.
	OutputLimit int
	// DefaultWait is how long job_output waits with wait but no
	// timeout_ms; 0 means DefaultWait.
	DefaultWait time.Duration
	// MaxWait caps timeout_ms; 0 means DefaultMaxWait.
	MaxWait time.Duration
}

func (o Options) withDefaults() Options {
	if o.OutputLimit <= 0 {
		o.OutputLimit = DefaultOutputLimit
	}
	if o.MaxWait <= 0 {
		o.MaxWait = DefaultMaxWait
	}
	if o.DefaultWait <= 0 {
		o.DefaultWait = DefaultWait
	}
	o.DefaultWait = min(o.DefaultWait, o.MaxWait)
	return o
}

// New returns job_output, job_list and job_kill, in that order. Like the
// single constructors it panics without a registry: that is a wiring
// mistake.
func New(opts Options) []tool.Definition {
	return []tool.Definition{OutputTool(opts), ListTool(opts), KillTool(opts)}
}

// OutputTool returns job_output alone (for compositions that register
// one tool per module).
func OutputTool(opts Options) tool.Definition { return outputTool(opts.check()) }

// ListTool returns job_list alone.
func ListTool(opts Options) tool.Definition { return listTool(opts.check()) }

// KillTool returns job_kill alone.
func KillTool(opts Options) tool.Definition { return killTool(opts.check()) }

func (o Options) check() Options {
	if o.Jobs == nil {
		panic("tools/jobs: Options.Jobs is required")
	}
	return o.withDefaults()
}

// always marks reads as concurrency-safe: they change nothing but the
// caller's own read cursor.
func always(json.RawMessage) bool { return true }

func outputTool(o Options) tool.Definition {
	desc := strings.NewReplacer(
		"{{DEFAULT_WAIT_MS}}", strconv.FormatInt(o.DefaultWait.Milliseconds(), 10),
		"{{DEFAULT_WAIT}}", human(o.DefaultWait),
		"{{MAX_WAIT_MS}}", strconv.FormatInt(o.MaxWait.Milliseconds(), 10),
		"{{MAX_WAIT}}", human(o.MaxWait),
		"{{OUTPUT_LIMIT}}", strconv.Itoa(o.OutputLimit),
	).Replace(strings.TrimSpace(outputDoc))
	params := fmt.Sprintf(`{"type":"object","properties":{`+
		`"job_id":{"type":"string","description":"The job id, as run_in_background or job_list gave it."},`+
		`"wait":{"type":"boolean","description":"Wait until the job finishes (at most timeout_ms) before returning. Default false: return at once."},`+
		`"timeout_ms":{"type":"integer","minimum":1,"maximum":%d,"description":"With wait: the longest to wait, in milliseconds (default %d)."},`+
		`"since":{"type":"integer","minimum":0,"description":"Byte offset to read from (0 rereads what is kept). Default: where your previous job_output of this job stopped."}`+
		`},"required":["job_id"],"additionalProperties":false}`,
		o.MaxWait.Milliseconds(), o.DefaultWait.Milliseconds())
	return tool.Definition{
		Name:            OutputName,
		Description:     desc,
		Parameters:      json.RawMessage(params),
		ConcurrencySafe: always,
		// A wait may last MaxWait; the pipeline's limit stays above it.
		Timeout: o.MaxWait + time.Minute,
		Execute: func(ctx context.Context, c *tool.Call) (tool.Result, error) {
			return output(ctx, o, c)
		},
	}
}

func listTool(o Options) tool.Definition {
	return tool.Definition{
		Name:            ListName,
		Description:     strings.TrimSpace(listDoc),
		Parameters:      json.RawMessage(`{"type":"object","properties":{},"additionalProperties":false}`),
		ConcurrencySafe: always,
		Execute: func(_ context.Context, c *tool.Call) (tool.Result, error) {
			return list(o, c, time.Now()), nil
		},
	}
}

func killTool(o Options) tool.Definition {
	return tool.Definition{
		Name:        KillName,
		Description: strings.TrimSpace(killDoc),
		Parameters: json.RawMessage(`{"type":"object","properties":{` +
			`"job_id":{"type":"string","description":"The id of the job to stop."},` +
			`"reason":{"type":"string","description":"Why you stop it, in a few words (shown to the user)."}` +
			`},"required":["job_id"],"additionalProperties":false}`),
		Execute: func(ctx context.Context, c *tool.Call) (tool.Result, error) {
			return kill(ctx, o, c)
		},
	}
}

// outputArgs are job_output's validated arguments.
type outputArgs struct {
	JobID   string
	Wait    bool
	Timeout time.Duration // 0: not given
	Since   int64         // -1: from the read cursor
}

// parseOutputArgs validates by hand, like the bash tool, so every wrong
// type gets a message naming the field; null counts as absent.
func parseOutputArgs(name string, raw json.RawMessage, withWait bool) (outputArgs, error) {
	a := outputArgs{Since: -1}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil || fields == nil {
		return a, invalid(name, "arguments must be a JSON object")
	}
	has := func(k string) bool { v, ok := fields[k]; return ok && string(v) != "null" }
	if !has("job_id") || json.Unmarshal(fields["job_id"], &a.JobID) != nil || strings.TrimSpace(a.JobID) == "" {
		return a, invalid(name, "job_id is required and must be a non-empty string")
	}
	if !withWait {
		return a, nil
	}
	if has("wait") && json.Unmarshal(fields["wait"], &a.Wait) != nil {
		return a, invalid(name, "wait must be a boolean")
	}
	if has("timeout_ms") {
		ms, err := integer(fields["timeout_ms"])
		if err != nil || ms < 1 {
			return a, invalid(name, "timeout_ms must be a positive integer number of milliseconds")
		}
		a.Timeout = time.Duration(min(ms, int64(1e12))) * time.Millisecond
	}
	if has("since") {
		n, err := integer(fields["since"])
		if err != nil || n < 0 {
			return a, invalid(name, "since must be a byte offset (an integer, 0 or more)")
		}
		a.Since = n
	}
	return a, nil
}

// integer parses a JSON number that is integral (120000.0 is tolerated).
func integer(v json.RawMessage) (int64, error) {
	var f float64
	if err := json.Unmarshal(v, &f); err != nil || f != math.Trunc(f) {
		return 0, errors.New("not an integer")
	}
	// Far beyond any offset or wait; capping keeps the conversion exact.
	return int64(max(-1e15, min(f, 1e15))), nil
}

func invalid(name, format string, v ...any) error {
	return tool.Errorf(tool.CodeInvalidArgs, "invalid arguments for "+name+": "+format, v...)
}

// owned returns job id if the caller may see it: its owner is the
// caller's session, or it has no owner.
func owned(r *jobs.Registry, c *tool.Call, id string) (jobs.Job, error) {
	j, ok := r.Get(id)
	if !ok || (j.Owner != "" && j.Owner != c.SessionID) {
		return jobs.Job{}, notFound(id)
	}
	return j, nil
}

func notFound(id string) error {
	return &tool.Error{Name: "ToolError", Code: CodeJobNotFound,
		Message: fmt.Sprintf("no job %s; job_list shows your jobs", id)}
}

// outputMeta is job_output's logged side.
type outputMeta struct {
	JobID    string `json:"jobId"`
	Status   string `json:"status"`
	ExitCode *int   `json:"exitCode,omitempty"`
	// From and Next delimit the bytes this call read (output offsets).
	From         int64 `json:"from"`
	Next         int64 `json:"next"`
	DroppedBytes int64 `json:"droppedBytes,omitempty"`
	ElidedBytes  int64 `json:"elidedBytes,omitempty"`
	WaitTimedOut bool  `json:"waitTimedOut,omitempty"`
}

func output(ctx context.Context, o Options, c *tool.Call) (tool.Result, error) {
	a, err := parseOutputArgs(OutputName, c.Arguments, true)
	if err != nil {
		return tool.Result{}, err
	}
	j, err := owned(o.Jobs, c, a.JobID)
	if err != nil {
		return tool.Result{}, err
	}
	var notes []string
	waitTimedOut := false
	if a.Wait && !j.Status.Terminal() {
		limit := o.DefaultWait
		if a.Timeout > 0 {
			limit = min(a.Timeout, o.MaxWait)
		}
		wctx, cancel := context.WithTimeout(ctx, limit)
		j, err = o.Jobs.Wait(wctx, a.JobID)
		cancel()
		switch {
		case errors.Is(err, jobs.ErrNotFound):
			return tool.Result{}, notFound(a.JobID) // its owner went away meanwhile
		case err != nil && ctx.Err() != nil:
			return tool.Result{}, tool.Errorf(tool.CodeAborted, "tool call cancelled")
		case err != nil:
			waitTimedOut = true
			notes = append(notes, fmt.Sprintf("[waited %s; the job is still running]", human(limit)))
		}
	}
	chunk, next, dropped, err := o.Jobs.Read(a.JobID, a.Since)
	if err != nil {
		return tool.Result{}, notFound(a.JobID)
	}
	if dropped > 0 {
		// The ring cut the output mid-line: drop the partial line too,
		// so the model does not take a fragment for a whole line.
		if i := bytes.IndexByte(chunk, '\n'); i >= 0 && i < len(chunk)/2 {
			chunk, dropped = chunk[i+1:], dropped+int64(i+1)
		}
		notes = append([]string{fmt.Sprintf("[%d bytes of earlier output were dropped: a job keeps only the end of a long output]", dropped)}, notes...)
	}
	body, elided := bound(chunk, o.OutputLimit)
	var text strings.Builder
	text.WriteString(body)
	text.WriteString("\n\n")
	for _, n := range notes {
		text.WriteString(n + "\n")
	}
	fmt.Fprintf(&text, "[status: %s]", j.Summary())
	res := tool.Text(text.String())
	res.Meta, _ = json.Marshal(outputMeta{
		JobID: j.ID, Status: string(j.Status), ExitCode: j.ExitCode,
		From: next - int64(len(chunk)), Next: next, DroppedBytes: dropped, ElidedBytes: elided, WaitTimedOut: waitTimedOut,
	})
	return res, nil
}

// headShare of the limit shows the start of a long chunk, the rest its
// end, like the bash tool's own output bound.
const headShare = 0.4

// bound renders chunk as text of at most about limit bytes: the start and
// the end, cut at line boundaries where possible, around an elision
// marker. It returns the text and the number of bytes left out.
func bound(chunk []byte, limit int) (string, int64) {
	if len(chunk) == 0 {
		return "(no new output)", 0
	}
	if len(chunk) <= limit {
		return string(bytes.ToValidUTF8(bytes.TrimRight(chunk, "\n"), []byte("\uFFFD"))), 0
	}
	h := int(float64(limit) * headShare)
	head, tail := chunk[:h], chunk[len(chunk)-(limit-h):]
	if i := bytes.LastIndexByte(head, '\n'); i >= len(head)/2 {
		head = head[:i+1]
	}
	if i := bytes.IndexByte(tail, '\n'); i >= 0 && i < len(tail)/2 {
		tail = tail[i+1:]
	}
	elided := int64(len(chunk) - len(head) - len(tail))
	var b strings.Builder
	b.Write(bytes.ToValidUTF8(head, []byte("\uFFFD")))
	if !bytes.HasSuffix(head, []byte("\n")) {
		b.WriteByte('\n')
	}
	fmt.Fprintf(&b, "[… %d bytes elided …]\n", elided)
	b.Write(bytes.ToValidUTF8(bytes.TrimRight(tail, "\n"), []byte("\uFFFD")))
	return b.String(), elided
}

func list(o Options, c *tool.Call, now time.Time) tool.Result {
	var b strings.Builder
	for _, j := range o.Jobs.List("") {
		if j.Owner != "" && j.Owner != c.SessionID {
			continue
		}
		label := j.Description
		if label == "" {
			label = "(no description)"
		}
		fmt.Fprintf(&b, "%s [%s] %s — %s (%s)\n", j.ID, j.Kind, j.Summary(), label, age(j, now))
	}
	if b.Len() == 0 {
		return tool.Text("No background jobs.")
	}
	return tool.Text(strings.TrimSuffix(b.String(), "\n"))
}

// age says how long a job has run, or how long ago it ended.
func age(j jobs.Job, now time.Time) string {
	if j.Ended.IsZero() {
		return "started " + human(now.Sub(j.Started).Round(time.Second)) + " ago"
	}
	return fmt.Sprintf("ran %s, ended %s ago", human(j.Ended.Sub(j.Started).Round(time.Second)),
		human(now.Sub(j.Ended).Round(time.Second)))
}

// killMeta is job_kill's logged side.
type killMeta struct {
	JobID    string `json:"jobId"`
	Status   string `json:"status"`
	ExitCode *int   `json:"exitCode,omitempty"`
	Reason   string `json:"reason,omitempty"`
	// AlreadyEnded reports that the job had ended before the call.
	AlreadyEnded bool `json:"alreadyEnded,omitempty"`
}

func kill(ctx context.Context, o Options, c *tool.Call) (tool.Result, error) {
	a, err := parseOutputArgs(KillName, c.Arguments, false)
	if err != nil {
		return tool.Result{}, err
	}
	var reason string
	var fields map[string]json.RawMessage
	_ = json.Unmarshal(c.Arguments, &fields)
	if v, ok := fields["reason"]; ok && string(v) != "null" && json.Unmarshal(v, &reason) != nil {
		return tool.Result{}, invalid(KillName, "reason must be a string")
	}
	j, err := owned(o.Jobs, c, a.JobID)
	if err != nil {
		return tool.Result{}, err
	}
	m := killMeta{JobID: j.ID, Reason: reason, AlreadyEnded: j.Status.Terminal()}
	var text string
	if m.AlreadyEnded {
		text = fmt.Sprintf("Job %s had already finished [status: %s].", j.ID, j.Summary())
	} else {
		j, err = o.Jobs.Kill(ctx, a.JobID)
		switch {
		case errors.Is(err, jobs.ErrNotFound):
			return tool.Result{}, notFound(a.JobID)
		case err != nil:
			// The stop was requested; only the wait for it was cut short.
			return tool.Result{}, tool.Errorf(tool.CodeAborted, "tool call cancelled while job %s was stopping", a.JobID)
		}
		text = fmt.Sprintf("Job %s stopped [status: %s]. Its output stays readable with job_output.", j.ID, j.Summary())
	}
	m.Status, m.ExitCode = string(j.Status), j.ExitCode
	res := tool.Text(text)
	res.Meta, _ = json.Marshal(m)
	return res, nil
}

// human formats whole seconds as "30s" and anything else the way
// time.Duration does.
func human(d time.Duration) string {
	if d >= time.Second && d%time.Second == 0 {
		return strconv.FormatInt(int64(d/time.Second), 10) + "s"
	}
	return d.String()
}
