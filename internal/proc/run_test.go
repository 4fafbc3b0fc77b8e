package proc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/dsh-dev/dsh/internal/proc/proctest"
)

// exitWait bounds every wait for a process to die; generous because -race
// on two cores is slow, and only reached when the code under test is broken.
const exitWait = 10 * time.Second

func bash(script string) []string { return []string{"bash", "-c", script} }

// manualCtx is a context that ends when the test says so, with the error
// the test chose: it lets a test simulate a deadline at an exact point of
// the child's run instead of racing a timer.
type manualCtx struct {
	context.Context
	done chan struct{}
	err  error
	once sync.Once
}

func newManualCtx(err error) *manualCtx {
	return &manualCtx{Context: context.Background(), done: make(chan struct{}), err: err}
}

func (c *manualCtx) Done() <-chan struct{} { return c.done }
func (c *manualCtx) Err() error {
	select {
	case <-c.done:
		return c.err
	default:
		return nil
	}
}
func (c *manualCtx) end() { c.once.Do(func() { close(c.done) }) }

func TestExitCodesAndOutput(t *testing.T) {
	tests := []struct {
		name     string
		script   string
		wantCode int
		wantSig  bool
		wantOut  string
	}{
		{"success", "echo hello", 0, false, "hello\n"},
		{"exit code", "echo out; exit 3", 3, false, "out\n"},
		{"interleaved stdout and stderr", "echo a; echo b >&2; echo c; echo d >&2", 0, false, "a\nb\nc\nd\n"},
		{"killed by SIGTERM", "kill -TERM $$", 143, true, ""},
		{"killed by SIGKILL", "kill -KILL $$", 137, true, ""},
		{"no output", "true", 0, false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := Run(context.Background(), Spec{Dir: "/", Argv: bash(tt.script)})
			if err != nil {
				t.Fatal(err)
			}
			if out.ExitCode != tt.wantCode || out.Signaled != tt.wantSig || string(out.Output) != tt.wantOut {
				t.Fatalf("got code=%d signaled=%v output=%q; want %d %v %q", out.ExitCode, out.Signaled, out.Output, tt.wantCode, tt.wantSig, tt.wantOut)
			}
			if out.TimedOut || out.Cancelled || out.Elided != 0 || out.TotalBytes != int64(len(tt.wantOut)) {
				t.Fatalf("unexpected outcome %+v", out)
			}
		})
	}
}

func TestStdinEnvDir(t *testing.T) {
	dir := t.TempDir()
	out, err := Run(context.Background(), Spec{
		Argv:  bash(`pwd; echo "$FOO"; cat`),
		Dir:   dir,
		Env:   EnvPolicy{Exact: []string{"FOO=bar", "PATH=/usr/bin:/bin"}},
		Stdin: strings.NewReader("from stdin"),
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := dir + "\nbar\nfrom stdin"; string(out.Output) != want {
		t.Fatalf("output %q, want %q", out.Output, want)
	}
	// Default stdin is /dev/null: cat must see EOF, not hang.
	out, err = Run(context.Background(), Spec{Dir: "/", Argv: []string{"cat"}})
	if err != nil || out.ExitCode != 0 || len(out.Output) != 0 {
		t.Fatalf("cat with default stdin: %+v %v", out, err)
	}
}

func TestRunErrors(t *testing.T) {
	done, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name string
		ctx  context.Context
		spec Spec
	}{
		{"empty argv", context.Background(), Spec{}},
		{"missing program", context.Background(), Spec{Dir: "/", Argv: []string{"/nonexistent/program"}}},
		{"missing dir", context.Background(), Spec{Argv: []string{"true"}, Dir: "/nonexistent/dir"}},
		{"no dir", context.Background(), Spec{Argv: []string{"true"}}},
		{"control channel", context.Background(), Spec{Argv: []string{"true"}, Dir: "/", ControlChannel: true}},
		{"bad env", context.Background(), Spec{Argv: []string{"true"}, Dir: "/", Env: EnvPolicy{Set: map[string]string{"A=B": "x"}}}},
		{"context already done", done, Spec{Dir: "/", Argv: []string{"true"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := Run(tt.ctx, tt.spec); err == nil {
				t.Fatal("Run succeeded")
			}
		})
	}
	if _, err := Run(done, Spec{Dir: "/", Argv: []string{"true"}}); !errors.Is(err, context.Canceled) {
		t.Fatalf("error %v should wrap context.Canceled", err)
	}
}

func TestBoundedOutput(t *testing.T) {
	const n, limit = 200000, 1000
	var full bytes.Buffer
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&full, "%d\n", i)
	}
	out, err := Run(context.Background(), Spec{Dir: "/", Argv: []string{"seq", "1", strconv.Itoa(n)}, OutputLimit: limit})
	if err != nil {
		t.Fatal(err)
	}
	if out.TotalBytes != int64(full.Len()) {
		t.Fatalf("TotalBytes = %d, want %d", out.TotalBytes, full.Len())
	}
	marker := regexp.MustCompile(`(?m)^\[… (\d+) bytes elided …\]\n`)
	m := marker.FindSubmatchIndex(out.Output)
	if m == nil {
		t.Fatalf("no elision marker in %q", out.Output)
	}
	head, tail := out.Output[:m[0]], out.Output[m[1]:]
	if got, _ := strconv.ParseInt(string(out.Output[m[2]:m[3]]), 10, 64); got != out.Elided {
		t.Fatalf("marker says %d, Elided is %d", got, out.Elided)
	}
	if int64(len(head)+len(tail))+out.Elided != out.TotalBytes || len(head)+len(tail) > limit {
		t.Fatalf("kept %d+%d bytes, elided %d, total %d, limit %d", len(head), len(tail), out.Elided, out.TotalBytes, limit)
	}
	// Both ends are exact prefixes/suffixes of the real output, cut at
	// line boundaries, and roughly split 40/60.
	if !bytes.HasPrefix(full.Bytes(), head) || !bytes.HasSuffix(full.Bytes(), tail) {
		t.Fatal("head or tail is not the real start or end of the output")
	}
	if !bytes.HasSuffix(head, []byte("\n")) || !bytes.HasPrefix(full.Bytes()[full.Len()-len(tail)-1:], []byte("\n")) {
		t.Fatal("head or tail not cut at a line boundary")
	}
	if len(head) < limit*3/10 || len(tail) < limit*5/10 {
		t.Fatalf("head %d / tail %d bytes: not the 40/60 split of %d", len(head), len(tail), limit)
	}
}

func TestTimeoutKillsGroup(t *testing.T) {
	tests := []struct {
		name      string
		err       error // what the context reports
		trap      string
		grace     time.Duration
		wantCode  int
		wantTimed bool
	}{
		// bash dies on SIGTERM in the wait builtin.
		{"deadline", context.DeadlineExceeded, "", time.Minute, 143, true},
		{"cancel", context.Canceled, "", time.Minute, 143, false},
		// Ignored SIGTERM (inherited by the grandchild too) needs SIGKILL.
		{"deadline, SIGTERM ignored", context.DeadlineExceeded, `trap "" TERM;`, 50 * time.Millisecond, 137, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fifo, lines := proctest.Fifo(t)
			ctx := newManualCtx(tt.err)
			var grandchild int
			go func() {
				// End the context only once the grandchild exists.
				if line, ok := <-lines; ok {
					grandchild = proctest.Pid(t, line)
				}
				ctx.end()
			}()
			out, err := Run(ctx, Spec{
				Argv:      bash(tt.trap + ` echo waiting; sleep 100 & echo $! > ` + fifo + `; wait`),
				Dir:       "/",
				KillGrace: tt.grace,
			})
			if err != nil {
				t.Fatal(err)
			}
			if out.ExitCode != tt.wantCode || !out.Signaled || out.TimedOut != tt.wantTimed || out.Cancelled == tt.wantTimed {
				t.Fatalf("outcome %+v", out)
			}
			if string(out.Output) != "waiting\n" {
				t.Fatalf("output %q", out.Output)
			}
			if td := out.Teardown; !td.Confirmed || len(td.Signals) == 0 || td.Signals[0] != "SIGTERM" {
				t.Fatalf("teardown %+v", td)
			}
			if grandchild == 0 || !proctest.WaitExit(grandchild, exitWait) {
				t.Fatalf("grandchild %d survived the group kill", grandchild)
			}
		})
	}
}

func TestCancelWhileRunning(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// exec starts its stdin copier only after the process exists, so the
	// first Read is a safe point to cancel a running child.
	stdin := readerFunc(func(p []byte) (int, error) { cancel(); return 0, io.EOF })
	out, err := Run(ctx, Spec{Dir: "/", Argv: []string{"sleep", "100"}, Stdin: stdin})
	if err != nil {
		t.Fatal(err)
	}
	if !out.Cancelled || out.TimedOut || !out.Signaled || out.ExitCode != 143 {
		t.Fatalf("outcome %+v", out)
	}
}

func killPid(pid int) error { return syscall.Kill(pid, syscall.SIGKILL) }

type readerFunc func([]byte) (int, error)

func (f readerFunc) Read(p []byte) (int, error) { return f(p) }

func TestLeftoversKilledAfterExit(t *testing.T) {
	start := time.Now()
	out, err := Run(context.Background(), Spec{Dir: "/", Argv: bash(`sleep 100 & echo $!`)})
	if err != nil {
		t.Fatal(err)
	}
	if out.ExitCode != 0 || out.TimedOut || out.Cancelled {
		t.Fatalf("outcome %+v", out)
	}
	pid := proctest.Pid(t, string(out.Output))
	if !proctest.WaitExit(pid, exitWait) {
		t.Fatalf("background sleep %d survived its group leader", pid)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("Run took %v: it waited for the background process", d)
	}
}

func TestEscapedProcessDoesNotHang(t *testing.T) {
	if _, err := exec.LookPath("setsid"); err != nil {
		t.Skip("setsid not installed")
	}
	// The leader waits (on a private fifo) until the escaped process has
	// left the session, so the group kill cannot race the escape. The
	// escaped sleep then holds the output pipe open in another session,
	// where the group kill cannot reach it.
	ready := filepath.Join(t.TempDir(), "ready")
	if err := syscall.Mkfifo(ready, 0o600); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	out, err := Run(context.Background(), Spec{Dir: "/", Argv: bash(
		`setsid sh -c 'echo $$ > ` + ready + `; exec sleep 100' & read pid < ` + ready + `; echo $pid`)})
	if err != nil {
		t.Fatal(err)
	}
	pid := proctest.Pid(t, string(out.Output))
	t.Cleanup(func() {
		_ = killPid(pid)
		proctest.WaitExit(pid, exitWait)
	})
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("Run took %v: it waited for a pipe held by an escaped process", d)
	}
	if !proctest.Alive(pid) {
		t.Fatal("the escaped process was expected to survive (it left the group)")
	}
}

func TestHeadTail(t *testing.T) {
	tests := []struct {
		name   string
		limit  int
		writes []string
		want   string
	}{
		{"under limit", 10, []string{"abc", "def"}, "abcdef"},
		{"exactly limit", 10, []string{"0123456789"}, "0123456789"},
		{"one big write", 10, []string{"0123456789ABCDEF"}, "0123\n[… 6 bytes elided …]\nABCDEF"},
		{"many small writes", 10, strings.Split("0123456789ABCDEF", ""), "0123\n[… 6 bytes elided …]\nABCDEF"},
		{"lines kept whole", 30, []string{"line1\nline2\nline3\nline4\nline5\nline6\n"}, "line1\nline2\n[… 6 bytes elided …]\nline4\nline5\nline6\n"},
		{"cut to line boundaries", 20, []string{"abcdef\nghijkl\nmnopqr\nstuvwx\n"}, "abcdef\n[… 14 bytes elided …]\nstuvwx\n"},
		{"utf-8 tail not split", 10, []string{strings.Repeat("é", 9) + "x"}, "éé\n[… 10 bytes elided …]\nééx"},
		{"utf-8 head not split", 10, []string{"x" + strings.Repeat("é", 9)}, "xé\n[… 10 bytes elided …]\nééé"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := newHeadTail(tt.limit)
			total := 0
			for _, w := range tt.writes {
				b.Write([]byte(w))
				total += len(w)
			}
			if got := string(b.Bytes()); got != tt.want {
				t.Fatalf("got %q, want %q", got, tt.want)
			}
			if b.total != int64(total) {
				t.Fatalf("total %d, want %d", b.total, total)
			}
		})
	}
}

// A program named by a relative path is found relative to Dir, as with
// os/exec, not relative to dsh's own directory.
func TestRelativeProgramInDir(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "hello.sh"), []byte("#!/bin/sh\necho \"hi $1\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := Run(context.Background(), Spec{Dir: dir, Argv: []string{"./hello.sh", "there"}})
	if err != nil || out.ExitCode != 0 || string(out.Output) != "hi there\n" {
		t.Fatalf("Run = %+v, %v", out, err)
	}
}

// BenchmarkRun measures the cost of one guarded run of a trivial command
// (guardian, gate, command, confirmed teardown).
func BenchmarkRun(b *testing.B) {
	for b.Loop() {
		if out, err := Run(context.Background(), Spec{Dir: "/", Argv: []string{"true"}}); err != nil || out.ExitCode != 0 {
			b.Fatal(out, err)
		}
	}
}
