package terminal

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/dsh-dev/dsh/internal/jobs"
	"github.com/dsh-dev/dsh/internal/leakcheck"
	"github.com/dsh-dev/dsh/internal/sandbox"
	"github.com/dsh-dev/dsh/internal/terminal"
	"github.com/dsh-dev/dsh/internal/tool"
)

// TestMain lets the test binary serve as the sandbox helper (terminals
// run under sandbox.ControllingTTY, which re-executes it) and hardens it
// as dsh's main does.
func TestMain(m *testing.M) {
	sandbox.RunHelperIfRequested()
	if err := sandbox.Harden(); err != nil {
		panic(err)
	}
	if g := os.Getenv("GORACE"); !strings.Contains(g, "atexit_sleep_ms") {
		os.Setenv("GORACE", strings.TrimSpace(g+" atexit_sleep_ms=0"))
	}
	os.Exit(leakcheck.Run(m))
}

// eventually bounds the waits of a test: long, since the machine may be
// loaded; nothing here sleeps for a fixed time.
const eventually = 60 * time.Second

// harness is the six tools over a manager, for one session.
type harness struct {
	t     *testing.T
	mgr   *terminal.Manager
	jobs  *jobs.Registry
	tools map[string]tool.Definition
	cwd   string
	sid   string
}

func newHarness(t *testing.T, o Options) *harness {
	t.Helper()
	h := &harness{t: t, mgr: terminal.New(terminal.Options{}), cwd: t.TempDir(), sid: "session-1", tools: map[string]tool.Definition{}}
	if o.Jobs == nil {
		h.jobs = jobs.New(jobs.Options{})
		o.Jobs = h.jobs
		t.Cleanup(func() { _ = h.jobs.Close() })
	}
	o.Manager = h.mgr
	if o.Wait == 0 {
		// A send settles on its prompt; the wait only bounds a stuck one.
		o.Wait = eventually
	}
	if o.Quiet == 0 {
		// Never settle on a pause, which a loaded machine can make:
		// only the prompt, the exit or the wait end a send here.
		o.Quiet = eventually
	}
	for _, d := range New(o) {
		h.tools[d.Name] = d
	}
	t.Cleanup(h.mgr.Shutdown)
	return h
}

// call runs a tool and returns its result; a Go error fails the test
// unless wantErr.
func (h *harness) call(name string, args map[string]any) (tool.Result, error) {
	h.t.Helper()
	raw, _ := json.Marshal(args)
	d := h.tools[name]
	ctx, cancel := context.WithTimeout(context.Background(), 2*eventually)
	defer cancel()
	return d.Execute(ctx, &tool.Call{ID: "c", Name: name, Arguments: raw, SessionID: h.sid, Cwd: h.cwd})
}

func (h *harness) ok(name string, args map[string]any) (string, map[string]any) {
	h.t.Helper()
	r, err := h.call(name, args)
	if err != nil {
		h.t.Fatalf("%s %v: %v", name, args, err)
	}
	var meta map[string]any
	_ = json.Unmarshal(r.Meta, &meta)
	return text(r), meta
}

func text(r tool.Result) string {
	var b strings.Builder
	for _, c := range r.Content {
		b.WriteString(c.Text)
	}
	return b.String()
}

// code is the tool error code of err ("" when none).
func code(err error) string {
	if te, ok := err.(*tool.Error); ok {
		return te.Code
	}
	return ""
}

// waitFor waits until the terminal's output from offset contains want.
func waitFor(t *testing.T, term *terminal.Terminal, from int64, want string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), eventually)
	defer cancel()
	for {
		ch, _, running := term.Changed()
		got := term.Text(term.Read(from, 0).Data)
		if strings.Contains(got, want) {
			return got
		}
		if !running {
			t.Fatalf("terminal ended without %q in its output:\n%s", want, got)
		}
		select {
		case <-ch:
		case <-ctx.Done():
			t.Fatalf("no %q in the output:\n%s", want, got)
		}
	}
}
