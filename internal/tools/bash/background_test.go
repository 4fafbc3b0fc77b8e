package bash

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dsh-dev/dsh/internal/jobs"
	"github.com/dsh-dev/dsh/internal/sandbox"
	"github.com/dsh-dev/dsh/internal/subprocess/proctest"
	"github.com/dsh-dev/dsh/internal/tool"
)

// gate is a FIFO a command blocks on (`read x < gate`) until the test
// opens it. The test holds it open for writing from the start, so the
// command's open never blocks, only its read.
type gate struct {
	path string
	f    *os.File
}

func newGate(t *testing.T) *gate {
	t.Helper()
	path := filepath.Join(t.TempDir(), "gate")
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return &gate{path: path, f: f}
}

func (g *gate) open(t *testing.T) {
	t.Helper()
	if _, err := g.f.WriteString("go\n"); err != nil {
		t.Fatal(err)
	}
}

// newJobs returns a registry closed at the end of the test, so no job
// outlives it.
func newJobs(t *testing.T, opts jobs.Options) *jobs.Registry {
	t.Helper()
	r := jobs.New(opts)
	t.Cleanup(func() { r.Close() })
	return r
}

// startJob runs a background call and returns the job it started.
func startJob(t *testing.T, h *harness, r *jobs.Registry, args map[string]any) jobs.Job {
	t.Helper()
	args["run_in_background"] = true
	res := h.run(context.Background(), t, args)
	var m startMeta
	if res.IsError || json.Unmarshal(res.Meta, &m) != nil || !m.Background {
		t.Fatalf("start: isError=%v %q meta %s", res.IsError, text(res), res.Meta)
	}
	j, ok := r.Get(m.JobID)
	if !ok {
		t.Fatalf("no job %s", m.JobID)
	}
	return j
}

func waitJob(t *testing.T, r *jobs.Registry, id string) (jobs.Job, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), exitWait)
	defer cancel()
	j, err := r.Wait(ctx, id)
	if err != nil {
		t.Fatalf("wait %s: %v", id, err)
	}
	out, _, _, _ := r.Output(id, 0)
	return j, string(out)
}

func TestBackgroundSchemaAndDescription(t *testing.T) {
	r := newJobs(t, jobs.Options{})
	tests := []struct {
		name      string
		opts      Options
		wantProps int
		wantBg    bool
	}{
		{"no registry", Options{}, 4, false},
		{"registry", Options{Jobs: r}, 5, true},
		{"registry and sandbox", Options{Jobs: r, Confine: (&fakeSandbox{}).confine}, 7, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			def := New(tt.opts)
			var schema struct {
				Properties map[string]struct {
					Type string `json:"type"`
				} `json:"properties"`
			}
			if err := json.Unmarshal(def.Parameters, &schema); err != nil {
				t.Fatalf("%v: %s", err, def.Parameters)
			}
			p, has := schema.Properties["run_in_background"]
			if len(schema.Properties) != tt.wantProps || has != tt.wantBg || (has && p.Type != "boolean") {
				t.Fatalf("schema %s", def.Parameters)
			}
			if strings.Contains(def.Description, "run_in_background") != tt.wantBg ||
				strings.Contains(def.Description, "job_output") != tt.wantBg ||
				strings.Contains(def.Description, "<!--") || strings.Contains(def.Description, "\n\n\n") {
				t.Fatalf("description:\n%s", def.Description)
			}
		})
	}
}

func TestBackgroundArgs(t *testing.T) {
	tests := []struct {
		name string
		jobs bool
		bg   any
		want string // "" = runs in the foreground
	}{
		{"unavailable", false, true, "run_in_background is not available"},
		{"false without a registry", false, false, ""},
		{"null", true, nil, ""},
		{"not a boolean", true, "yes", "run_in_background must be a boolean"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := Options{}
			if tt.jobs {
				opts.Jobs = newJobs(t, jobs.Options{})
			}
			h := newHarness(t, opts)
			r := h.run(context.Background(), t, map[string]any{"command": "echo fg", "run_in_background": tt.bg})
			if tt.want == "" {
				if r.IsError || text(r) != "fg\n\n[exit code: 0]" {
					t.Fatalf("got %q", text(r))
				}
				return
			}
			if code(r) != tool.CodeInvalidArgs || !strings.Contains(text(r), tt.want) {
				t.Fatalf("got code=%q %q", code(r), text(r))
			}
		})
	}
}

// TestBackgroundStreams checks that the call returns while the command
// still runs, that its output reaches the job as it is printed, and how
// the job ends.
func TestBackgroundStreams(t *testing.T) {
	r := newJobs(t, jobs.Options{})
	h := newHarness(t, Options{Jobs: r})
	g := newGate(t)
	j := startJob(t, h, r, map[string]any{
		"command":     "for i in 1 2 3; do echo $i; done; read x < " + g.path + "; echo after $x; echo $DSH_SESSION_ID; cat",
		"description": "Count",
	})
	// The command is blocked on the gate, so this call returned first.
	if j.ID != "bash-1" || j.Kind != JobKind || j.Owner != "sess-42" || j.Description != "Count" || j.Status != jobs.Running {
		t.Fatalf("job %+v", j)
	}
	ctx, cancel := context.WithTimeout(context.Background(), exitWait)
	defer cancel()
	if _, err := r.WaitOutput(ctx, j.ID, 5); err != nil {
		t.Fatal(err)
	}
	if out, next, _, _ := r.Output(j.ID, 0); string(out) != "1\n2\n3\n" || next != 6 {
		t.Fatalf("output while running: %q", out)
	}
	if now, _ := r.Get(j.ID); now.Status != jobs.Running {
		t.Fatalf("status while blocked: %s", now.Status)
	}
	g.open(t)
	// cat proves stdin is /dev/null, not the output pipe.
	if j, out := waitJob(t, r, j.ID); j.Status != jobs.Completed || *j.ExitCode != 0 || out != "1\n2\n3\nafter go\nsess-42\n" {
		t.Fatalf("ended %+v with %q", j, out)
	}
}

func TestBackgroundStartResult(t *testing.T) {
	r := newJobs(t, jobs.Options{})
	h := newHarness(t, Options{Jobs: r, MaxTimeout: 5 * time.Second})
	res := h.run(context.Background(), t, map[string]any{"command": "true\nfalse", "run_in_background": true, "timeout_ms": 9000})
	want := "Started background job bash-1 (true …).\nIt is killed if it still runs after 5s.\n" +
		"Read its output with job_output (job_id \"bash-1\"); stop it with job_kill.\n" +
		"[timeout_ms 9000 is over the maximum of 5000; used 5000]"
	if res.IsError || text(res) != want {
		t.Fatalf("got %q\nwant %q", text(res), want)
	}
	var m startMeta
	if err := json.Unmarshal(res.Meta, &m); err != nil || m.JobID != "bash-1" || m.TimeoutMs != 5000 || m.Workdir != h.cwd {
		t.Fatalf("meta %s", res.Meta)
	}
	if got := commandLabel(strings.Repeat("x", 100)); len([]rune(got)) != maxJobLabel {
		t.Fatalf("long label %q", got)
	}
}

// grandchild starts a background job whose shell leaves a sleeping
// grandchild and reports its pid.
func grandchild(t *testing.T, h *harness, r *jobs.Registry, extra map[string]any) (jobs.Job, int) {
	t.Helper()
	fifo, lines := proctest.Fifo(t)
	args := map[string]any{"command": "echo started; sleep 100 & echo $! > " + fifo + "; wait"}
	for k, v := range extra {
		args[k] = v
	}
	j := startJob(t, h, r, args)
	select {
	case line := <-lines:
		return j, proctest.Pid(t, line)
	case <-t.Context().Done():
		t.Fatal("test ended before the pid came")
	}
	return j, 0
}

func TestBackgroundKillKillsProcessGroup(t *testing.T) {
	r := newJobs(t, jobs.Options{})
	h := newHarness(t, Options{Jobs: r})
	j, pid := grandchild(t, h, r, nil)
	k, err := r.Kill(context.Background(), j.ID)
	if err != nil || k.Status != jobs.Killed || k.Note != "process group killed" {
		t.Fatalf("kill: %+v %v", k, err)
	}
	if !proctest.WaitExit(pid, exitWait) {
		t.Fatalf("grandchild %d survived job_kill", pid)
	}
}

func TestBackgroundTimeout(t *testing.T) {
	r := newJobs(t, jobs.Options{})
	h := newHarness(t, Options{Jobs: r})
	// The timeout is the mechanism under test, so it is real.
	j, pid := grandchild(t, h, r, map[string]any{"timeout_ms": 300})
	j, out := waitJob(t, r, j.ID)
	if j.Status != jobs.Failed || j.Summary() != "failed, exit code 143, timed out after 300ms" ||
		out != "started\n[timed out after 300ms; process group killed]\n" {
		t.Fatalf("ended %+v (%s) with %q", j, j.Summary(), out)
	}
	if !proctest.WaitExit(pid, exitWait) {
		t.Fatalf("grandchild %d survived the timeout", pid)
	}
}

func TestBackgroundIgnoresDefaultTimeout(t *testing.T) {
	r := newJobs(t, jobs.Options{})
	h := newHarness(t, Options{Jobs: r, DefaultTimeout: 50 * time.Millisecond})
	// Outlasting the foreground default takes real time.
	j := startJob(t, h, r, map[string]any{"command": "sleep 0.3; echo done"})
	if j, out := waitJob(t, r, j.ID); j.Status != jobs.Completed || out != "done\n" {
		t.Fatalf("ended %+v with %q", j, out)
	}
}

func TestBackgroundCancelOwnerAndClose(t *testing.T) {
	tests := []struct {
		name string
		stop func(r *jobs.Registry)
	}{
		{"owner disposed", func(r *jobs.Registry) { r.CancelOwner("sess-42") }},
		{"registry closed", func(r *jobs.Registry) { r.Close() }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newJobs(t, jobs.Options{})
			ended := make(chan jobs.Job, 1)
			r.OnDone(func(j jobs.Job) { ended <- j })
			h := newHarness(t, Options{Jobs: r})
			_, pid := grandchild(t, h, r, nil)
			tt.stop(r)
			if j := <-ended; j.Status != jobs.Killed {
				t.Fatalf("ended %+v", j)
			}
			if !proctest.WaitExit(pid, exitWait) {
				t.Fatalf("grandchild %d survived", pid)
			}
		})
	}
}

func TestBackgroundConfined(t *testing.T) {
	tests := []struct {
		name    string
		box     fakeSandbox
		want    string
		summary string
	}{
		{"wrapper environment reaches the command", fakeSandbox{env: []string{"WRAPPED=yes"},
			policy: sandbox.Policy{Mode: sandbox.WorkspaceWrite}}, "yes\n", "completed, exit code 0"},
		{"denial", fakeSandbox{script: `printf "touch: cannot touch '/etc/x': Read-only file system" >&2; exit 1`,
			policy: sandbox.Policy{Mode: sandbox.ReadOnly}, denied: deniedBy("Read-only file system")},
			"touch: cannot touch '/etc/x': Read-only file system\n" +
				"[sandbox: file access denied — the command tried to write outside the writable roots of read-only mode]\n",
			"failed, exit code 1, sandbox: file access denied — the command tried to write outside the writable roots of read-only mode"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newJobs(t, jobs.Options{})
			h := newHarness(t, Options{Jobs: r, Confine: tt.box.confine})
			j := startJob(t, h, r, map[string]any{"command": "echo $WRAPPED"})
			if !slices.Equal(tt.box.gotArgv, []string{"bash", "-c", "echo $WRAPPED"}) {
				t.Fatalf("confiner got %q", tt.box.gotArgv)
			}
			if j, out := waitJob(t, r, j.ID); out != tt.want || j.Summary() != tt.summary {
				t.Fatalf("ended %q with %q", j.Summary(), out)
			}
		})
	}
	// A confinement failure starts nothing, exactly as in the foreground.
	r := newJobs(t, jobs.Options{})
	h := newHarness(t, Options{Jobs: r, Confine: (&fakeSandbox{err: sandbox.ErrUnavailable}).confine})
	res := h.run(context.Background(), t, map[string]any{"command": "true", "run_in_background": true})
	if code(res) != sandbox.CodeUnavailable || len(r.List("")) != 0 {
		t.Fatalf("got code=%q %q, %d jobs", code(res), text(res), len(r.List("")))
	}
}

func TestBackgroundWrapperFailureIsOutput(t *testing.T) {
	r := newJobs(t, jobs.Options{})
	confine := func(*tool.Call, []string) (Confinement, error) {
		return Confinement{Confined: sandbox.Confined{Argv: []string{"/nonexistent/wrapper"}}}, nil
	}
	h := newHarness(t, Options{Jobs: r, Confine: confine})
	j := startJob(t, h, r, map[string]any{"command": "true"})
	if j, out := waitJob(t, r, j.ID); j.Status != jobs.Failed || *j.ExitCode != 127 || !strings.Contains(out, "/nonexistent/wrapper") {
		t.Fatalf("ended %+v with %q", j, out)
	}
}

// TestMain lets the test binary serve as the Landlock helper, which
// re-executes os.Executable().
func TestMain(m *testing.M) {
	sandbox.RunHelperIfRequested()
	// Under -race the helper (this binary), which now outlives each
	// command, would sleep a second at exit waiting for reports.
	if os.Getenv("GORACE") == "" {
		os.Setenv("GORACE", "atexit_sleep_ms=0")
	}
	os.Exit(m.Run())
}

// TestBackgroundRealSandbox runs a background command under each real
// backend this machine has: the redirecting wrapper must not get in the
// way of the confinement, of the streaming or of the denial check.
func TestBackgroundRealSandbox(t *testing.T) {
	for _, b := range []sandbox.Backend{sandbox.NewBwrap(""), sandbox.NewLandlock("")} {
		t.Run(b.Name(), func(t *testing.T) {
			if err := b.Probe(); err != nil {
				t.Skipf("%s unavailable: %v", b.Name(), err)
			}
			r := newJobs(t, jobs.Options{})
			var h *harness
			confine := func(c *tool.Call, argv []string) (Confinement, error) {
				p := sandbox.Policy{Mode: sandbox.WorkspaceWrite, Workspace: h.cwd}
				cf, err := b.Confine(argv, p)
				return Confinement{Confined: cf, Policy: p}, err
			}
			h = newHarness(t, Options{Jobs: r, Confine: confine})
			j := startJob(t, h, r, map[string]any{"command": "echo inside; touch allowed && echo wrote; touch /usr/dsh-background-test"})
			j, out := waitJob(t, r, j.ID)
			if !strings.HasPrefix(out, "inside\nwrote\n") || !strings.Contains(out, "[sandbox: file access denied") ||
				j.Status != jobs.Failed || !strings.HasPrefix(j.Note, "sandbox: file access denied") {
				t.Fatalf("ended %q with %q", j.Summary(), out)
			}
			if _, err := os.Stat(filepath.Join(h.cwd, "allowed")); err != nil {
				t.Fatal(err)
			}
		})
	}
}
