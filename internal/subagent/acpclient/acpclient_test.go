package acpclient_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/dsh-dev/dsh/internal/llm"
	"github.com/dsh-dev/dsh/internal/oop"
	"github.com/dsh-dev/dsh/internal/permission"
	"github.com/dsh-dev/dsh/internal/sandbox"
	"github.com/dsh-dev/dsh/internal/session"
	"github.com/dsh-dev/dsh/internal/subagent"
	"github.com/dsh-dev/dsh/internal/subagent/acpclient"
	"github.com/dsh-dev/dsh/internal/subprocess/proctest"
)

func newProvider(t *testing.T, mode, fifo string) *acpclient.Provider {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	p, err := acpclient.New(acpclient.Options{
		Name:      "acp:fake",
		Command:   []string{exe},
		Env:       oop.EnvPolicy{Set: map[string]string{"ACPCLIENT_FAKE": mode, "ACPCLIENT_FIFO": fifo}},
		KillGrace: 500 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func request(t *testing.T, mode sandbox.Mode) subagent.Request {
	t.Helper()
	log, err := session.NewLog(session.Header{Version: session.FormatVersion, ID: "parent", Cwd: t.TempDir()}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return subagent.Request{
		Prompt:     []llm.Block{{Type: llm.BlockText, Text: "do it"}},
		Parent:     log,
		Permission: permission.State{Mode: mode},
	}
}

func wait(t *testing.T, r subagent.Run) subagent.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, err := r.Wait(ctx)
	if err != nil {
		t.Fatalf("Wait: %v", err)
	}
	return res
}

func TestDelegationThroughService(t *testing.T) {
	svc, err := subagent.NewService(subagent.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := svc.Register(newProvider(t, "plain", "")); err != nil {
		t.Fatal(err)
	}
	req := request(t, "")
	h, err := svc.Start(context.Background(), "acp:fake", req)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, err := h.Wait(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if res.StopReason != subagent.StopCompleted || res.Text() != "hello world" {
		t.Fatalf("result %+v", res)
	}
	if res.ChildID != "acp:fake/s1" || h.ChildID() != "acp:fake/s1" {
		t.Errorf("child id %q / %q", res.ChildID, h.ChildID())
	}
	if res.Usage.InputTokens != 7 || res.Usage.OutputTokens != 3 {
		t.Errorf("usage %+v", res.Usage)
	}
	if !strings.Contains(res.Diagnostic, "tool c1 touch x: completed") {
		t.Errorf("activity %q", res.Diagnostic)
	}
	if err := h.Dispose(); err != nil {
		t.Fatal(err)
	}
}

func TestServiceRefusesOutputSchema(t *testing.T) {
	svc, err := subagent.NewService(subagent.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// The command would fail if it were ever started.
	p, err := acpclient.New(acpclient.Options{Name: "acp:none", Command: []string{"/nonexistent/agent"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := svc.Register(p); err != nil {
		t.Fatal(err)
	}
	req := request(t, "")
	req.OutputSchema = []byte(`{"type":"object"}`)
	_, err = svc.Start(context.Background(), "acp:none", req)
	var se *subagent.Error
	if !errors.As(err, &se) || se.Code != subagent.CodeUnsupportedCapability {
		t.Fatalf("Start = %v, want %s", err, subagent.CodeUnsupportedCapability)
	}
}

func TestPermissionPerMode(t *testing.T) {
	for _, tc := range []struct {
		mode sandbox.Mode
		want string
	}{
		{sandbox.ReadOnly, "perm=selected:no "},
		{sandbox.WorkspaceWrite, "perm=selected:no "},
		{sandbox.DangerFullAccess, "perm=selected:yes "},
	} {
		t.Run(string(tc.mode), func(t *testing.T) {
			r, err := newProvider(t, "perm", "").Start(context.Background(), request(t, tc.mode))
			if err != nil {
				t.Fatal(err)
			}
			res := wait(t, r)
			if res.StopReason != subagent.StopCompleted || res.Text() != tc.want+"hello world" {
				t.Fatalf("result %+v", res)
			}
			if err := r.Dispose(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestEarlyExitIsErrorResult(t *testing.T) {
	r, err := newProvider(t, "exit", "").Start(context.Background(), request(t, ""))
	if err != nil {
		t.Fatal(err)
	}
	res := wait(t, r)
	if res.StopReason != subagent.StopError || !strings.Contains(res.Diagnostic, "fatal: boom") {
		t.Fatalf("result %+v", res)
	}
	if len(res.Diagnostic) > subagent.MaxDiagnostic {
		t.Errorf("diagnostic is %d bytes", len(res.Diagnostic))
	}
	if err := r.Dispose(); err != nil {
		t.Fatal(err)
	}
}

func TestHandshakeFailureReleases(t *testing.T) {
	_, err := newProvider(t, "badinit", "").Start(context.Background(), request(t, ""))
	if err == nil || !strings.Contains(err.Error(), "cannot initialize") {
		t.Fatalf("Start = %v", err)
	}
}

func TestCancelCooperative(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	r, err := newProvider(t, "wait", "").Start(ctx, request(t, ""))
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	res := wait(t, r)
	if res.StopReason != subagent.StopAborted {
		t.Fatalf("result %+v", res)
	}
	if err := r.Dispose(); err != nil {
		t.Fatal(err)
	}
}

func TestHangCancelTearsDownGroup(t *testing.T) {
	fifo, lines := proctest.Fifo(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r, err := newProvider(t, "grandchild,hang", fifo).Start(ctx, request(t, ""))
	if err != nil {
		t.Fatal(err)
	}
	grandchild := proctest.Pid(t, <-lines)
	agent := proctest.Pid(t, <-lines)
	cancel()
	res := wait(t, r)
	if res.StopReason != subagent.StopAborted {
		t.Fatalf("result %+v", res)
	}
	for _, pid := range []int{agent, grandchild} {
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
	if err := r.Dispose(); err != nil {
		t.Fatal(err)
	}
}

func TestDisposeWhileRunning(t *testing.T) {
	fifo, lines := proctest.Fifo(t)
	r, err := newProvider(t, "hang", fifo).Start(context.Background(), request(t, ""))
	if err != nil {
		t.Fatal(err)
	}
	agent := proctest.Pid(t, <-lines)
	if err := r.Dispose(); err != nil {
		t.Fatal(err)
	}
	if !proctest.WaitExit(agent, 10*time.Second) {
		t.Errorf("agent %d survived", agent)
	}
	if res := wait(t, r); res.StopReason != subagent.StopAborted {
		t.Fatalf("result %+v", res)
	}
}

func TestNewValidates(t *testing.T) {
	for _, o := range []acpclient.Options{
		{Command: []string{"x"}},
		{Name: "acp:x"},
		{Name: "acp:x", Command: []string{"x"}, Dir: "/nonexistent/dir"},
		{Name: "acp:x", Command: []string{"x"}, Timeout: -1},
	} {
		if _, err := acpclient.New(o); err == nil {
			t.Errorf("New(%+v) accepted", o)
		}
	}
}
