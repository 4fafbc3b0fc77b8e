package proc

import (
	"bufio"
	"context"
	"errors"
	"io"
	"os"
	"reflect"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/dsh-dev/dsh/internal/proc/proctest"
)

func start(t *testing.T, spec Spec) *Process {
	t.Helper()
	if spec.Dir == "" {
		spec.Dir = t.TempDir()
	}
	p, err := Start(context.Background(), spec)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		if r := p.Teardown(context.Background()); !r.Confirmed {
			t.Errorf("cleanup teardown not confirmed: %+v", r)
		}
	})
	return p
}

func next(t *testing.T, lines <-chan string) string {
	t.Helper()
	select {
	case l, ok := <-lines:
		if !ok {
			t.Fatal("fifo closed")
		}
		return l
	case <-time.After(exitWait):
		t.Fatal("timed out waiting for a fifo line")
	}
	return ""
}

func TestEnvScrubbed(t *testing.T) {
	t.Setenv("OOPTEST_SECRET", "s3cret")
	t.Setenv("OOPPASS_A", "a")
	t.Setenv("OOPPASS_B", "b")
	t.Setenv("OOPEXACT", "e")
	t.Setenv("OOPEXACTNOT", "no")
	t.Setenv("HOME", "/home/x")
	p := start(t, Spec{
		Argv: []string{"env"},
		Env: EnvPolicy{
			Passthrough: []string{"OOPPASS_*", "OOPEXACT"},
			Set:         map[string]string{"OOPSET": "v", "HOME": "/override"},
		},
	})
	out, err := io.ReadAll(p.Stdout())
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		k, v, _ := strings.Cut(l, "=")
		got[k] = v
	}
	for k, want := range map[string]string{"OOPPASS_A": "a", "OOPPASS_B": "b", "OOPEXACT": "e", "OOPSET": "v", "HOME": "/override", "PATH": os.Getenv("PATH")} {
		if got[k] != want {
			t.Errorf("%s = %q, want %q", k, got[k], want)
		}
	}
	for _, k := range []string{"OOPTEST_SECRET", "OOPEXACTNOT"} {
		if _, ok := got[k]; ok {
			t.Errorf("%s leaked into the child", k)
		}
	}
}

func TestEnvRejectsBadNames(t *testing.T) {
	for _, name := range []string{"", "A=B", "A\x00"} {
		if _, err := (EnvPolicy{Set: map[string]string{name: "x"}}).Build(nil); err == nil {
			t.Errorf("Set name %q accepted", name)
		}
	}
}

func TestStdioRoundTrip(t *testing.T) {
	p := start(t, Spec{Argv: []string{"cat"}})
	if _, err := io.WriteString(p.Stdin(), "hello\nworld\n"); err != nil {
		t.Fatal(err)
	}
	p.Stdin().Close()
	out, err := io.ReadAll(p.Stdout())
	if err != nil || string(out) != "hello\nworld\n" {
		t.Fatalf("stdout %q, %v", out, err)
	}
	if ex, err := p.Wait(); err != nil || ex.Code != 0 || ex.Signaled {
		t.Fatalf("Wait = %+v, %v", ex, err)
	}
	r := p.Teardown(context.Background())
	if !r.Confirmed || len(r.Signals) != 0 {
		t.Fatalf("teardown of an exited group = %+v", r)
	}
}

func TestControlChannel(t *testing.T) {
	p := start(t, Spec{Argv: []string{"sh", "-c", "cat <&3 >&4"}, ControlChannel: true})
	w, r := p.Control()
	if _, err := io.WriteString(w, "ping\n"); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(r).ReadString('\n')
	if err != nil || line != "ping\n" {
		t.Fatalf("control read %q, %v", line, err)
	}
	w.Close()
	if ex, err := p.Wait(); err != nil || ex.Code != 0 {
		t.Fatalf("Wait = %+v, %v", ex, err)
	}
	if w, r := start(t, Spec{Argv: []string{"true"}}).Control(); w != nil || r != nil {
		t.Fatal("Control without ControlChannel is not nil")
	}
}

func TestStderrBounded(t *testing.T) {
	p := start(t, Spec{
		Argv:        []string{"sh", "-c", `echo START >&2; head -c 100000 /dev/zero | tr '\0' x >&2; echo END >&2`},
		StderrLimit: 1000,
	})
	if _, err := p.Wait(); err != nil {
		t.Fatal(err)
	}
	p.Teardown(context.Background())
	got := string(p.Stderr())
	if !strings.HasPrefix(got, "START\n") || !strings.HasSuffix(got, "xEND\n") {
		t.Errorf("head/tail lost: %q…%q", got[:20], got[len(got)-20:])
	}
	if !strings.Contains(got, "bytes elided") || len(got) > 1100 {
		t.Errorf("stderr not bounded: %d bytes", len(got))
	}
}

// A grandchild that ignores SIGTERM forces the SIGKILL step, and teardown
// still ends only when it is gone.
func TestTeardownKillsStubbornGrandchild(t *testing.T) {
	fifo, lines := proctest.Fifo(t)
	p := start(t, Spec{
		Argv: []string{"sh", "-c",
			`sh -c 'trap "" TERM; echo $$ >"$1"; exec sleep 1000' _ "$1" & wait`, "_", fifo},
		KillGrace: 200 * time.Millisecond,
	})
	gc := proctest.Pid(t, next(t, lines))
	r := p.Teardown(context.Background())
	if !r.Confirmed || !reflect.DeepEqual(r.Signals, []string{"SIGTERM", "SIGKILL"}) || len(r.Remaining) != 0 {
		t.Fatalf("teardown = %+v", r)
	}
	if !proctest.WaitExit(gc, 0) {
		t.Fatal("grandchild alive after a confirmed teardown")
	}
	if m := groupMembers(p.Pgid()); len(m) != 0 {
		t.Fatalf("group members left: %v", m)
	}
	ex, err := p.Wait()
	if err != nil || !ex.Signaled || ex.Signal != syscall.SIGTERM || ex.Code != 128+int(syscall.SIGTERM) {
		t.Fatalf("Wait = %+v, %v", ex, err)
	}
}

// A cooperative group dies on SIGTERM: no SIGKILL is sent.
func TestTeardownGraceful(t *testing.T) {
	p := start(t, Spec{Argv: []string{"cat"}, KillGrace: exitWait})
	r := p.Teardown(context.Background())
	if !r.Confirmed || !reflect.DeepEqual(r.Signals, []string{"SIGTERM"}) {
		t.Fatalf("teardown = %+v", r)
	}
}

func TestTeardownIdempotentConcurrent(t *testing.T) {
	// The child says when its trap is in place: SIGTERM arriving before
	// that would kill it and skip the SIGKILL step this test expects.
	fifo, lines := proctest.Fifo(t)
	p := start(t, Spec{
		Argv:      []string{"sh", "-c", `trap "" TERM; echo ready >"$1"; exec cat`, "_", fifo},
		KillGrace: 100 * time.Millisecond,
	})
	if l := next(t, lines); l != "ready" {
		t.Fatalf("unexpected line %q", l)
	}
	h := NewHandle(p, nil)
	const n = 8
	results := make([]TeardownResult, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			if i%2 == 0 {
				results[i] = p.Teardown(context.Background())
			} else {
				errs[i] = h.Dispose()
				results[i], _ = h.Result()
			}
		})
	}
	wg.Wait()
	for i := range n {
		if errs[i] != nil || !reflect.DeepEqual(results[i], results[0]) {
			t.Fatalf("call %d: %+v, %v; call 0: %+v", i, results[i], errs[i], results[0])
		}
	}
	if !results[0].Confirmed || !reflect.DeepEqual(results[0].Signals, []string{"SIGTERM", "SIGKILL"}) {
		t.Fatalf("teardown = %+v", results[0])
	}
	if again := p.Teardown(context.Background()); !reflect.DeepEqual(again, results[0]) {
		t.Fatalf("repeated Teardown = %+v", again)
	}
}

func TestHandleDispose(t *testing.T) {
	p := start(t, Spec{Argv: []string{"cat"}})
	calls := 0
	h := NewHandle(p, func() { calls++ })
	if _, ok := h.Result(); ok {
		t.Fatal("Result before Dispose")
	}
	if err := h.Dispose(); err != nil {
		t.Fatal(err)
	}
	if err := h.Dispose(); err != nil || calls != 1 {
		t.Fatalf("second Dispose: %v, cancel calls %d", err, calls)
	}
	if !proctest.WaitExit(p.Pid(), 0) {
		t.Fatal("child alive after Dispose")
	}
	if h.Process() != p {
		t.Fatal("Process() mismatch")
	}
}

func TestTeardownResultErr(t *testing.T) {
	if err := (TeardownResult{Confirmed: true}).Err(); err != nil {
		t.Fatal(err)
	}
	err := TeardownResult{Remaining: []int{42}}.Err()
	if !errors.Is(err, ErrCleanupUnconfirmed) || !strings.Contains(err.Error(), "42") {
		t.Fatalf("Err = %v", err)
	}
}

func TestContextCancelTearsDown(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	p, err := Start(ctx, Spec{Argv: []string{"cat"}, Dir: "/"})
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	if ex, err := p.Wait(); err != nil || !ex.Signaled {
		t.Fatalf("Wait = %+v, %v", ex, err)
	}
	if r := p.Teardown(context.Background()); !r.Confirmed {
		t.Fatalf("teardown = %+v", r)
	}
}

func TestStartErrors(t *testing.T) {
	ctx := context.Background()
	for _, spec := range []Spec{
		{},
		{Argv: []string{"true"}},
		{Argv: []string{"/nonexistent/prog"}, Dir: "/"},
		{Argv: []string{"true"}, Dir: "/nonexistent/dir"},
		{Argv: []string{"true"}, Dir: "/", Env: EnvPolicy{Set: map[string]string{"": "x"}}},
		{Argv: []string{"true"}, Dir: "/", Stdin: strings.NewReader("x")},
	} {
		if p, err := Start(ctx, spec); err == nil {
			p.Teardown(ctx)
			t.Errorf("Start(%+v) succeeded", spec)
		}
	}
	done, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := Start(done, Spec{Argv: []string{"true"}, Dir: "/"}); err == nil {
		t.Error("Start with a done context succeeded")
	}
}

// Once the command has exited, Stderr holds everything it wrote, however
// far the copier had got when the exit was seen.
func TestStderrCompleteAfterExit(t *testing.T) {
	for range 20 {
		p := start(t, Spec{Argv: []string{"sh", "-c",
			`i=0; while [ $i -lt 300 ]; do echo "line $i" >&2; i=$((i+1)); done; echo last >&2; exit 3`}})
		if ex, err := p.Wait(); err != nil || ex.Code != 3 {
			t.Fatalf("Wait = %+v, %v", ex, err)
		}
		if got := string(p.Stderr()); !strings.HasSuffix(got, "line 299\nlast\n") {
			t.Fatalf("stderr after exit ends %q", got[max(0, len(got)-40):])
		}
	}
}
