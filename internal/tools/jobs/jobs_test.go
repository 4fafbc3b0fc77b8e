package jobs

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/dsh-dev/dsh/internal/jobs"
	"github.com/dsh-dev/dsh/internal/llm"
	"github.com/dsh-dev/dsh/internal/proc/proctest"
	"github.com/dsh-dev/dsh/internal/tool"
	"github.com/dsh-dev/dsh/internal/tools/bash"
)

// waitBound limits waits that only a bug makes long.
const waitBound = 10 * time.Second

// harness runs bash and the job tools through one real pipeline over one
// registry, as a composition does.
type harness struct {
	p    *tool.Pipeline
	jobs *jobs.Registry
	cwd  string
}

func newHarness(t *testing.T, ring int, opts Options) *harness {
	t.Helper()
	r := jobs.New(jobs.Options{OutputLimit: ring})
	t.Cleanup(func() { r.Close() })
	opts.Jobs = r
	reg := tool.NewRegistry()
	for _, d := range append(New(opts), bash.New(bash.Options{Jobs: r})) {
		if err := reg.Register("", d); err != nil {
			t.Fatal(err)
		}
	}
	return &harness{p: tool.NewPipeline(reg), jobs: r, cwd: t.TempDir()}
}

func (h *harness) call(t *testing.T, session, name string, args map[string]any) tool.Result {
	t.Helper()
	return h.callCtx(context.Background(), t, session, name, args)
}

func (h *harness) callCtx(ctx context.Context, t *testing.T, session, name string, args map[string]any) tool.Result {
	t.Helper()
	raw, err := json.Marshal(args)
	if err != nil {
		t.Fatal(err)
	}
	return h.p.Run(ctx, &tool.Call{ID: "c1", Name: name, RawArguments: string(raw), Cwd: h.cwd, SessionID: session})
}

// background starts command as a job of session and returns its id.
func (h *harness) background(t *testing.T, session, command string) string {
	t.Helper()
	r := h.call(t, session, bash.Name, map[string]any{"command": command, "description": "test job", "run_in_background": true})
	var m struct {
		JobID string `json:"jobId"`
	}
	if r.IsError || json.Unmarshal(r.Meta, &m) != nil || m.JobID == "" {
		t.Fatalf("start: %q %s", text(r), r.Meta)
	}
	return m.JobID
}

// waitOutput blocks until job id has written more than n bytes.
func (h *harness) waitOutput(t *testing.T, id string, n int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitBound)
	defer cancel()
	if _, err := h.jobs.WaitOutput(ctx, id, n); err != nil {
		t.Fatal(err)
	}
}

func text(r tool.Result) string {
	var b strings.Builder
	for _, bl := range r.Content {
		b.WriteString(bl.Text)
	}
	return b.String()
}

func code(r tool.Result) string {
	if r.Error == nil {
		return ""
	}
	return r.Error.Code
}

// gate is a FIFO a command blocks on (`read x < gate`) until the test
// opens it; the test holds it open for writing, so only the read blocks.
func gate(t *testing.T) (path string, open func()) {
	t.Helper()
	path = filepath.Join(t.TempDir(), "gate")
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return path, func() {
		if _, err := f.WriteString("go\n"); err != nil {
			t.Error(err)
		}
	}
}

func TestDefinitions(t *testing.T) {
	defs := New(Options{Jobs: jobs.New(jobs.Options{})})
	tests := []struct {
		name       string
		concurrent bool
		required   []string
		timeout    time.Duration
	}{
		{OutputName, true, []string{"job_id"}, DefaultMaxWait + time.Minute}, // above the longest wait
		{ListName, true, nil, 0},
		{KillName, false, []string{"job_id"}, 0},
	}
	for i, tt := range tests {
		d := defs[i]
		var schema struct {
			Required []string `json:"required"`
		}
		if err := json.Unmarshal(d.Parameters, &schema); err != nil {
			t.Fatalf("%s: %v", d.Name, err)
		}
		safe := d.ConcurrencySafe != nil && d.ConcurrencySafe(json.RawMessage(`{}`))
		if d.Name != tt.name || safe != tt.concurrent || strings.Join(schema.Required, ",") != strings.Join(tt.required, ",") ||
			d.Description == "" || strings.Contains(d.Description, "{{") || d.Timeout != tt.timeout {
			t.Fatalf("definition %d: %+v", i, d)
		}
	}
	if !strings.Contains(defs[0].Description, "30000 (30s), at most 600000 (600s)") {
		t.Fatalf("job_output description:\n%s", defs[0].Description)
	}
	defer func() {
		if recover() == nil {
			t.Fatal("no panic without a registry")
		}
	}()
	New(Options{})
}

func TestOutputWaitsForCompletion(t *testing.T) {
	h := newHarness(t, 0, Options{})
	id := h.background(t, "s1", "for i in 1 2 3; do echo $i; done; exit 4")
	r := h.call(t, "s1", OutputName, map[string]any{"job_id": id, "wait": true})
	if want := "1\n2\n3\n\n[status: failed, exit code 4]"; r.IsError || text(r) != want {
		t.Fatalf("got %q, want %q", text(r), want)
	}
	var m outputMeta
	if err := json.Unmarshal(r.Meta, &m); err != nil || m.Status != "failed" || *m.ExitCode != 4 || m.From != 0 || m.Next != 6 {
		t.Fatalf("meta %s", r.Meta)
	}
	id = h.background(t, "s1", "echo ok")
	if r := h.call(t, "s1", OutputName, map[string]any{"job_id": id, "wait": true, "timeout_ms": 60000}); text(r) != "ok\n\n[status: completed, exit code 0]" {
		t.Fatalf("got %q", text(r))
	}
}

func TestIncrementalReads(t *testing.T) {
	h := newHarness(t, 0, Options{})
	path, open := gate(t)
	id := h.background(t, "s1", "echo one; read x < "+path+"; echo two")
	h.waitOutput(t, id, 3)
	steps := []struct {
		args map[string]any
		want string
	}{
		{map[string]any{}, "one\n\n[status: running]"},
		{map[string]any{}, "(no new output)\n\n[status: running]"},
		{map[string]any{"wait": true}, "two\n\n[status: completed, exit code 0]"},
		{map[string]any{}, "(no new output)\n\n[status: completed, exit code 0]"},
		{map[string]any{"since": 0}, "one\ntwo\n\n[status: completed, exit code 0]"},
		{map[string]any{"since": 2}, "e\ntwo\n\n[status: completed, exit code 0]"},
		{map[string]any{"since": 1000}, "(no new output)\n\n[status: completed, exit code 0]"},
	}
	for i, s := range steps {
		if i == 2 {
			open()
		}
		s.args["job_id"] = id
		if r := h.call(t, "s1", OutputName, s.args); r.IsError || text(r) != s.want {
			t.Fatalf("step %d: got %q, want %q", i, text(r), s.want)
		}
	}
}

func TestOutputWaitTimesOut(t *testing.T) {
	h := newHarness(t, 0, Options{})
	path, _ := gate(t)
	id := h.background(t, "s1", "echo waiting; read x < "+path)
	h.waitOutput(t, id, 0)
	// The wait limit is the mechanism under test, so it is real.
	r := h.call(t, "s1", OutputName, map[string]any{"job_id": id, "wait": true, "timeout_ms": 50})
	if want := "waiting\n\n[waited 50ms; the job is still running]\n[status: running]"; r.IsError || text(r) != want {
		t.Fatalf("got %q, want %q", text(r), want)
	}

	// A cancelled call stops waiting at once and leaves the job alone.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if r := h.callCtx(ctx, t, "s1", OutputName, map[string]any{"job_id": id, "wait": true}); code(r) != tool.CodeAborted {
		t.Fatalf("cancelled: %q", text(r))
	}
	if j, _ := h.jobs.Get(id); j.Status != jobs.Running {
		t.Fatalf("job %+v", j)
	}
}

func TestKillKillsProcessGroup(t *testing.T) {
	h := newHarness(t, 0, Options{})
	fifo, lines := proctest.Fifo(t)
	id := h.background(t, "s1", "sleep 100 & echo $! > "+fifo+"; wait")
	var pid int
	select {
	case line := <-lines:
		pid = proctest.Pid(t, line)
	case <-time.After(waitBound):
		t.Fatal("no pid from the job")
	}
	r := h.call(t, "s1", KillName, map[string]any{"job_id": id, "reason": "test"})
	if !regexp.MustCompile(`^Job bash-1 stopped \[status: killed, exit code \d+, process group killed\]\. Its output stays readable with job_output\.$`).MatchString(text(r)) {
		t.Fatalf("kill: %q", text(r))
	}
	if !proctest.WaitExit(pid, waitBound) {
		t.Fatalf("grandchild %d survived job_kill", pid)
	}
	r = h.call(t, "s1", KillName, map[string]any{"job_id": id})
	if !strings.HasPrefix(text(r), "Job bash-1 had already finished [status: killed") || r.IsError {
		t.Fatalf("second kill: %q", text(r))
	}
	var m killMeta
	if err := json.Unmarshal(r.Meta, &m); err != nil || !m.AlreadyEnded || m.Status != "killed" {
		t.Fatalf("meta %s", r.Meta)
	}
}

func TestOwnerIsolation(t *testing.T) {
	h := newHarness(t, 0, Options{})
	path, open := gate(t)
	defer open()
	id := h.background(t, "owner", "read x < "+path)
	for _, tt := range []struct {
		name string
		args map[string]any
	}{
		{OutputName, map[string]any{"job_id": id}},
		{OutputName, map[string]any{"job_id": id, "wait": true}},
		{KillName, map[string]any{"job_id": id}},
		{OutputName, map[string]any{"job_id": "bash-99"}},
	} {
		r := h.call(t, "intruder", tt.name, tt.args)
		if code(r) != CodeJobNotFound || text(r) != "Error: no job "+tt.args["job_id"].(string)+"; job_list shows your jobs" {
			t.Fatalf("%s %v: code=%q %q", tt.name, tt.args, code(r), text(r))
		}
	}
	if r := h.call(t, "intruder", ListName, map[string]any{}); text(r) != "No background jobs." {
		t.Fatalf("intruder's list: %q", text(r))
	}
	if r := h.call(t, "owner", ListName, map[string]any{}); !strings.HasPrefix(text(r), id+" [bash] running — test job (started ") {
		t.Fatalf("owner's list: %q", text(r))
	}
}

func TestOutputBounded(t *testing.T) {
	h := newHarness(t, 1000, Options{OutputLimit: 300})
	id := h.background(t, "s1", "seq 1 10000")
	r := h.call(t, "s1", OutputName, map[string]any{"job_id": id, "wait": true})
	got := text(r)
	// seq 1 10000 prints 48894 bytes; the ring keeps the last 1000,
	// which start 1 byte into "9801\n"; that partial line is dropped too.
	if !strings.HasPrefix(got, "9802\n9803\n") || !strings.Contains(got, "\n[… ") ||
		!strings.HasSuffix(got, "\n10000\n\n[47898 bytes of earlier output were dropped: a job keeps only the end of a long output]\n[status: completed, exit code 0]") {
		t.Fatalf("got %q", got)
	}
	if body, _, _ := strings.Cut(got, "\n\n["); len(body) > 360 {
		t.Fatalf("body of %d bytes", len(body))
	}
	var m outputMeta
	if err := json.Unmarshal(r.Meta, &m); err != nil || m.DroppedBytes != 47898 || m.ElidedBytes < 690 || m.From != 47898 || m.Next != 48894 {
		t.Fatalf("meta %s", r.Meta)
	}
}

func TestList(t *testing.T) {
	h := newHarness(t, 0, Options{})
	path, open := gate(t)
	defer open()
	done := h.background(t, "s1", "exit 0")
	h.call(t, "s1", OutputName, map[string]any{"job_id": done, "wait": true})
	h.background(t, "s1", "read x < "+path)
	h.background(t, "s2", "true")
	r := h.call(t, "s1", ListName, map[string]any{})
	want := regexp.MustCompile(`^bash-1 \[bash\] completed, exit code 0 — test job \(ran \d+s, ended \d+s ago\)\n` +
		`bash-2 \[bash\] running — test job \(started \d+s ago\)$`)
	if !want.MatchString(text(r)) {
		t.Fatalf("list:\n%s", text(r))
	}
}

func TestInvalidArgs(t *testing.T) {
	h := newHarness(t, 0, Options{})
	tests := []struct {
		tool string
		args map[string]any
		want string
	}{
		{OutputName, map[string]any{}, "job_id is required"},
		{OutputName, map[string]any{"job_id": 3}, "job_id is required"},
		{OutputName, map[string]any{"job_id": "bash-1", "wait": "yes"}, "wait must be a boolean"},
		{OutputName, map[string]any{"job_id": "bash-1", "timeout_ms": 0}, "timeout_ms must be a positive integer"},
		{OutputName, map[string]any{"job_id": "bash-1", "timeout_ms": 1.5}, "timeout_ms must be a positive integer"},
		{OutputName, map[string]any{"job_id": "bash-1", "since": -1}, "since must be a byte offset"},
		{KillName, map[string]any{"job_id": ""}, "job_id is required"},
		{KillName, map[string]any{"job_id": "bash-1", "reason": 1}, "reason must be a string"},
	}
	for _, tt := range tests {
		r := h.call(t, "s1", tt.tool, tt.args)
		if code(r) != tool.CodeInvalidArgs || !strings.Contains(text(r), tt.want) {
			t.Errorf("%s %v: code=%q %q, want %q", tt.tool, tt.args, code(r), text(r), tt.want)
		}
	}
}

// owner records notices for TestCompletionNotice.
type owner struct {
	mu    sync.Mutex
	woken []llm.Message
	got   chan struct{}
}

func (o *owner) Busy() bool                 { return false }
func (o *owner) Inject(m llm.Message) error { return o.Wake(m) }
func (o *owner) Wake(m llm.Message) error {
	o.mu.Lock()
	o.woken = append(o.woken, m)
	o.mu.Unlock()
	o.got <- struct{}{}
	return nil
}

// TestCompletionNotice wires the registry to a Notifier the way the
// composition root does and checks what a finished job announces, and
// that a killed one announces nothing.
func TestCompletionNotice(t *testing.T) {
	h := newHarness(t, 0, Options{})
	o := &owner{got: make(chan struct{}, 4)}
	n := &jobs.Notifier{Jobs: h.jobs, Owner: func(id string) jobs.Owner {
		if id == "s1" {
			return o
		}
		return nil
	}}
	notices := make(chan jobs.Delivery, 4)
	h.jobs.OnDone(func(j jobs.Job) {
		d, _ := n.Deliver(j)
		notices <- d
	})

	path, _ := gate(t)
	killed := h.background(t, "s1", "read x < "+path)
	h.call(t, "s1", KillName, map[string]any{"job_id": killed})
	if d := <-notices; d != jobs.Skipped {
		t.Fatalf("killed job: %s", d)
	}
	h.background(t, "s1", "echo built; exit 2")
	if d := <-notices; d != jobs.Woken {
		t.Fatalf("finished job: %s", d)
	}
	<-o.got
	msg := o.woken[0]
	if msg.Role != llm.RoleUser || msg.Source.Plugin != "jobs" || msg.Source.Form != "notice" ||
		!strings.Contains(msg.Text(), "Background job bash-2 (bash: test job) finished [status: failed, exit code 2].\nIts output:\nbuilt\n") {
		t.Fatalf("notice %+v", msg)
	}
}
