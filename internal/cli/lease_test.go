package cli_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dsh-dev/dsh/internal/cli"
	"github.com/dsh-dev/dsh/internal/llm/llmtest"
	"github.com/dsh-dev/dsh/internal/session"
	"github.com/dsh-dev/dsh/internal/session/sessiontest"
)

// TestResumeBusySessionAndTakeoverAfterKill: while one dsh run --resume
// holds a session, a second one exits at once with SESSION_BUSY's exit
// code and a plain message naming the holder; after the holder is killed
// with SIGKILL, the next --resume takes the session over, repairs it and
// continues; after a clean exit the session is free again.
func TestResumeBusySessionAndTakeoverAfterKill(t *testing.T) {
	e := newEnv(t)
	e.srv.Enqueue(llmtest.Response{Text: "first"})
	out, stderr, code := e.dsh("", "run", "--json", "start")
	if code != 0 {
		t.Fatalf("first run: %d %s", code, stderr)
	}
	_, res := parseJSONRun(t, out)
	sid := res.SessionID

	// The holder: its model answer stalls, so it keeps the session open.
	e.srv.Enqueue(llmtest.Response{Text: "a stalled answer", ChunkRunes: 4, StallAfter: 2})
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	holder := e.cmd(ctx, "run", "--resume", sid, "keep going")
	var holderErr strings.Builder
	holder.Stderr = &holderErr
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- holder.Wait() }()
	if err := e.srv.WaitRequests(ctx, 2); err != nil {
		t.Fatalf("holder never asked the model: %v\n%s", err, holderErr.String())
	}

	_, stderr, code = e.dsh("", "run", "--resume", sid, "me too")
	if code != cli.ExitBusy {
		t.Fatalf("second resume: exit %d, want %d\n%s", code, cli.ExitBusy, stderr)
	}
	host, _ := os.Hostname()
	for _, want := range []string{
		"session " + sid + " is in use by dsh run",
		"(pid " + strconv.Itoa(holder.Process.Pid) + " on " + host + ", since ",
		"wait for it to finish",
	} {
		if !strings.Contains(stderr, want) {
			t.Errorf("busy message lacks %q:\n%s", want, stderr)
		}
	}
	if strings.Contains(stderr, "seq conflict") {
		t.Errorf("busy message shows the internal phrase:\n%s", stderr)
	}
	if n := e.srv.RequestCount(); n != 2 {
		t.Errorf("the refused run reached the model: %d requests", n)
	}

	// kill -9 the holder (and its process group), then resume.
	if err := syscall.Kill(-holder.Process.Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	var ee *exec.ExitError
	if err := <-exited; !errors.As(err, &ee) {
		t.Fatalf("holder exit: %v", err)
	}
	e.srv.Enqueue(llmtest.Response{Text: "took over"})
	out, stderr, code = e.dsh("", "run", "--json", "--resume", sid, "after the crash")
	if code != 0 {
		t.Fatalf("resume after SIGKILL: exit %d\n%s", code, stderr)
	}
	if !strings.Contains(stderr, "taking it over") {
		t.Errorf("takeover not reported:\n%s", stderr)
	}
	if _, res := parseJSONRun(t, out); res.Text != "took over" {
		t.Fatalf("run/result %+v", res)
	}
	_, events, _ := exportEvents(t, e, sid)
	sessiontest.CheckBalanced(t, events)
	// The killed holder's open turn was closed by the repair.
	interrupted := 0
	for _, te := range sessiontest.EventsOf[session.TurnEnd](t, events, session.TypeTurnEnd) {
		if te.Reason.Kind == session.EndInterrupted {
			interrupted++
		}
	}
	if interrupted != 1 {
		t.Errorf("%d interrupted turns after the takeover, want 1", interrupted)
	}

	// The clean exit released the lease: the session resumes at once.
	e.srv.Enqueue(llmtest.Response{Text: "again"})
	if _, stderr, code := e.dsh("", "run", "--resume", sid, "once more"); code != 0 || strings.Contains(stderr, "taking it over") {
		t.Fatalf("resume after a clean exit: %d\n%s", code, stderr)
	}
}
