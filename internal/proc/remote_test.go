//go:build linux

package proc

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// execRemote runs a command itself, as a stand-in for the process that
// runs one on dsh's behalf: its output goes to the file RunRemote gives,
// signals go to its group, and failed makes Result report the runner's
// failure.
type execRemote struct {
	cmd     *exec.Cmd
	done    chan struct{}
	exit    ExitInfo
	signals chan syscall.Signal
	failed  error
}

func startExecRemote(t *testing.T, script string, failed error) func(stdin, out *os.File) (Remote, error) {
	return func(stdin, out *os.File) (Remote, error) {
		cmd := exec.Command("bash", "-c", script)
		cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, out, out
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Start(); err != nil {
			return nil, err
		}
		r := &execRemote{cmd: cmd, done: make(chan struct{}), signals: make(chan syscall.Signal, 4), failed: failed}
		go func() {
			defer close(r.done)
			err := cmd.Wait()
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				if ws := ee.Sys().(syscall.WaitStatus); ws.Signaled() {
					r.exit = ExitInfo{Code: 128 + int(ws.Signal()), Signaled: true, Signal: ws.Signal()}
				} else {
					r.exit = ExitInfo{Code: ws.ExitStatus()}
				}
			}
		}()
		return r, nil
	}
}

func (r *execRemote) Done() <-chan struct{}     { return r.done }
func (r *execRemote) Result() (ExitInfo, error) { return r.exit, r.failed }
func (r *execRemote) Signal(sig syscall.Signal) {
	r.signals <- sig
	_ = syscall.Kill(-r.cmd.Process.Pid, sig)
}

// RunRemote captures the output, its head and tail beyond the limit, and
// the exit as Run does.
func TestRunRemoteOutput(t *testing.T) {
	out, err := RunRemote(context.Background(), Spec{Dir: "/", OutputLimit: 100},
		startExecRemote(t, `read -r line; echo "got:$line"; head -c 5000 /dev/zero | tr '\0' x; echo; echo tail-end >&2; exit 3`, nil))
	if err != nil {
		t.Fatal(err)
	}
	s := string(out.Output)
	if out.ExitCode != 3 || !strings.HasPrefix(s, "got:") || !strings.Contains(s, "tail-end") || out.Elided == 0 || out.TotalBytes < 5000 {
		t.Fatalf("exit %d elided %d total %d: %q", out.ExitCode, out.Elided, out.TotalBytes, s)
	}
	if !out.Teardown.Confirmed {
		t.Fatal("teardown not confirmed")
	}
}

// A deadline signals TERM, then KILL after the grace when TERM is
// ignored, and reports a timeout.
func TestRunRemoteTimeout(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	var r *execRemote
	start := startExecRemote(t, `trap "" TERM; echo started; while :; do sleep 0.05; done`, nil)
	out, err := RunRemote(ctx, Spec{Dir: "/", KillGrace: 100 * time.Millisecond}, func(stdin, o *os.File) (Remote, error) {
		rr, err := start(stdin, o)
		if rr != nil {
			r = rr.(*execRemote)
		}
		return rr, err
	})
	if err != nil {
		t.Fatal(err)
	}
	if !out.TimedOut || out.Cancelled || !strings.Contains(string(out.Output), "started") {
		t.Fatalf("%+v", out)
	}
	if got := strings.Join(out.Teardown.Signals, ","); got != "SIGTERM,SIGKILL" {
		t.Fatalf("signals %s", got)
	}
	if s1, s2 := <-r.signals, <-r.signals; s1 != syscall.SIGTERM || s2 != syscall.SIGKILL {
		t.Fatalf("remote got %v %v", s1, s2)
	}
}

// A runner that fails under the command returns its error with what was
// collected; a start error means nothing ran.
func TestRunRemoteFailures(t *testing.T) {
	boom := errors.New("runner died")
	out, err := RunRemote(context.Background(), Spec{Dir: "/"}, startExecRemote(t, "echo partial", boom))
	if !errors.Is(err, boom) || !strings.Contains(string(out.Output), "partial") || out.Teardown.Confirmed || out.ExitCode != -1 {
		t.Fatalf("%v %+v", err, out)
	}
	refused := errors.New("refused")
	if _, err := RunRemote(context.Background(), Spec{Dir: "/"}, func(*os.File, *os.File) (Remote, error) { return nil, refused }); !errors.Is(err, refused) {
		t.Fatal(err)
	}
	if _, err := RunRemote(context.Background(), Spec{Dir: "/", Stdin: strings.NewReader("x")}, startExecRemote(t, "true", nil)); err == nil {
		t.Fatal("a non-file stdin was accepted")
	}
}

// Start can give the child a socket as its stdin, read directly.
func TestStartSocketStdin(t *testing.T) {
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	mine, theirs := os.NewFile(uintptr(fds[0]), "mine"), os.NewFile(uintptr(fds[1]), "theirs")
	defer mine.Close()
	p, err := Start(context.Background(), Spec{Argv: []string{"bash", "-c", `read -r x; echo "echo:$x" >&0`}, Dir: "/", Stdin: theirs})
	theirs.Close()
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.FileConn(mine)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write([]byte("hello\n")); err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(io.LimitReader(c, 11))
	if string(b) != "echo:hello\n" {
		t.Fatalf("%q", b)
	}
	if res := p.Teardown(context.Background()); !res.Confirmed {
		t.Fatal(res.Err())
	}
	if _, err := Start(context.Background(), Spec{Argv: []string{"true"}, Dir: "/", Stdin: strings.NewReader("x")}); err == nil {
		t.Fatal("a non-file stdin was accepted")
	}
}
