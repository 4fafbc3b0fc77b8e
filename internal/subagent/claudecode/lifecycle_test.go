package claudecode_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/dsh-dev/dsh/internal/proc/proctest"
	"github.com/dsh-dev/dsh/internal/subagent"
	"github.com/dsh-dev/dsh/internal/subagent/claudecode"
)

func TestExitWithoutResult(t *testing.T) {
	r, err := newProvider(t, fake{mode: "exit"}).Start(context.Background(), request(t, ""))
	if err != nil {
		t.Fatal(err)
	}
	res := wait(t, r)
	dispose(t, r)
	if res.StopReason != subagent.StopError || res.Text() != "partial work" {
		t.Fatalf("result %+v", res)
	}
	for _, s := range []string{"ended without a result (exit status 3)", "fatal: boom", "claude: partial work"} {
		if !strings.Contains(res.Diagnostic, s) {
			t.Errorf("diagnostic %q lacks %q", res.Diagnostic, s)
		}
	}
}

func TestStartFailsWithoutSession(t *testing.T) {
	_, err := newProvider(t, fake{mode: "noinit"}).Start(context.Background(), request(t, ""))
	if err == nil || !strings.Contains(err.Error(), "fatal: cannot start") || !strings.Contains(err.Error(), "exit status 2") {
		t.Fatalf("Start = %v", err)
	}
}

func TestResumeFailure(t *testing.T) {
	const sid = "0b7e5d8e-1111-4222-8333-444455556666"
	r, err := newProvider(t, fake{mode: "resumefail"}).StartResume(context.Background(), request(t, ""), sid)
	if err != nil {
		t.Fatal(err)
	}
	res := wait(t, r)
	dispose(t, r)
	if res.StopReason != subagent.StopError || res.ChildID != "claude-code/"+sid || !strings.Contains(res.Diagnostic, "No conversation found") {
		t.Fatalf("result %+v", res)
	}
}

func TestCancelInterrupts(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// Only the interrupt can end this run within the test's wait.
	p := newProvider(t, fake{mode: "interrupt", o: claudecode.Options{InterruptGrace: time.Hour}})
	r, err := p.Start(ctx, request(t, ""))
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	res := wait(t, r)
	dispose(t, r)
	if res.StopReason != subagent.StopAborted || !strings.Contains(res.Diagnostic, "interrupted by control request") {
		t.Fatalf("result %+v", res)
	}
}

func TestHangCancelTearsDownGroup(t *testing.T) {
	fifo, pids := proctest.Fifo(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p := newProvider(t, fake{mode: "grandchild,hang", fifo: fifo, o: claudecode.Options{InterruptGrace: 100 * time.Millisecond}})
	r, err := p.Start(ctx, request(t, ""))
	if err != nil {
		t.Fatal(err)
	}
	grandchild := proctest.Pid(t, <-pids)
	claude := proctest.Pid(t, <-pids)
	cancel()
	res := wait(t, r)
	if res.StopReason != subagent.StopAborted || !strings.Contains(res.Diagnostic, "cancelled (parent)") {
		t.Fatalf("result %+v", res)
	}
	for _, pid := range []int{claude, grandchild} {
		if !proctest.WaitExit(pid, 10*time.Second) {
			t.Errorf("pid %d survived", pid)
		}
	}
	errs := make(chan error, 2)
	for range 2 {
		go func() { errs <- r.Dispose() }()
	}
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	dispose(t, r)
}

func TestDisposeWhileRunning(t *testing.T) {
	fifo, pids := proctest.Fifo(t)
	p := newProvider(t, fake{mode: "hang", fifo: fifo, o: claudecode.Options{InterruptGrace: 100 * time.Millisecond}})
	r, err := p.Start(context.Background(), request(t, ""))
	if err != nil {
		t.Fatal(err)
	}
	claude := proctest.Pid(t, <-pids)
	dispose(t, r)
	if !proctest.WaitExit(claude, 10*time.Second) {
		t.Errorf("claude %d survived", claude)
	}
	if res := wait(t, r); res.StopReason != subagent.StopAborted || !strings.Contains(res.Diagnostic, "cancelled (disposed)") {
		t.Fatalf("result %+v", res)
	}
}

func TestTimeout(t *testing.T) {
	fifo, pids := proctest.Fifo(t)
	p := newProvider(t, fake{mode: "hang", fifo: fifo, o: claudecode.Options{Timeout: 300 * time.Millisecond, InterruptGrace: 100 * time.Millisecond}})
	r, err := p.Start(context.Background(), request(t, ""))
	if err != nil {
		t.Fatal(err)
	}
	claude := proctest.Pid(t, <-pids)
	res := wait(t, r)
	dispose(t, r)
	if res.StopReason != subagent.StopError || !strings.Contains(res.Diagnostic, "timed out after 300ms") {
		t.Fatalf("result %+v", res)
	}
	if !proctest.WaitExit(claude, 10*time.Second) {
		t.Errorf("claude %d survived", claude)
	}
}
