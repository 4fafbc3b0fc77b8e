package permission

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/dsh-dev/dsh/internal/proc/proctest"

	"github.com/dsh-dev/dsh/internal/session"
)

// ttyChildEnv selects the child half of the terminal tests: "ask" asks
// three questions on /dev/tty, "none" expects no terminal.
const ttyChildEnv = "DSH_PERMISSION_TTY_CHILD"

// screen collects what the child writes to the terminal and lets the
// test wait for a text to appear (no sleeping: each write wakes it).
type screen struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	more chan struct{}
	done chan struct{}
}

func readScreen(m io.Reader) *screen {
	s := &screen{more: make(chan struct{}, 1), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		b := make([]byte, 4096)
		for {
			n, err := m.Read(b)
			s.mu.Lock()
			s.buf.Write(b[:n])
			s.mu.Unlock()
			select {
			case s.more <- struct{}{}:
			default:
			}
			if err != nil {
				return // EIO once the child closed the terminal
			}
		}
	}()
	return s
}

func (s *screen) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.String()
}

// waitCount waits until sub appears n times.
func (s *screen) waitCount(t *testing.T, sub string, n int) {
	t.Helper()
	for strings.Count(s.String(), sub) < n {
		select {
		case <-s.more:
		case <-s.done:
			if strings.Count(s.String(), sub) < n {
				t.Fatalf("the terminal closed before %q appeared %d times:\n%s", sub, n, s.String())
			}
		}
	}
}

// TestApprovalOnTTYWithPipedStdin runs a child whose stdin is a pipe
// (full of "y" lines that must not answer anything) and whose controlling
// terminal is a pseudo-terminal: the approvals are asked and answered on
// the terminal, including a session grant that answers a repeat.
func TestApprovalOnTTYWithPipedStdin(t *testing.T) {
	master, slave := proctest.OpenPTY(t, 0)
	stdinR, stdinW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer stdinR.Close()
	if _, err := io.WriteString(stdinW, strings.Repeat("y\n", 8)); err != nil {
		t.Fatal(err)
	}
	stdinW.Close()
	var stdout bytes.Buffer
	cmd := exec.Command(os.Args[0], "-test.run=^TestTTYChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), ttyChildEnv+"=ask")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdinR, &stdout, &stdout
	cmd.ExtraFiles = []*os.File{slave} // fd 3 in the child
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 3}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	slave.Close() // the child holds the terminal now: EIO on the master once it exits
	scr := readScreen(master)

	scr.waitCount(t, "a = allow this exact command for the rest of the session", 1)
	if _, err := io.WriteString(master, "a\n"); err != nil {
		t.Fatal(err)
	}
	// The repeat is answered by the grant; the next prompt is the third
	// question.
	scr.waitCount(t, "Allow once?", 2)
	if !strings.Contains(scr.String(), "command: rm -rf build") {
		t.Fatalf("second prompt:\n%s", scr.String())
	}
	if _, err := io.WriteString(master, "n\n"); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("child: %v\n%s", err, stdout.String())
	}
	<-scr.done
	got := resultLines(stdout.String())
	want := []string{
		"git push origin main: allowed-once by user (terminal) grant=true",
		"git push origin main: allowed-once by user (session-grant) grant=false",
		"rm -rf build: rejected by user (terminal) grant=false",
		"stdin unread: 16 bytes",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("child results:\n%s\nwant:\n%s\nterminal:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"), scr.String())
	}
	if n := strings.Count(scr.String(), "Approval needed for bash"); n != 2 {
		t.Fatalf("%d prompts on the terminal, want 2:\n%s", n, scr.String())
	}
}

// TestNoTerminalDeniesWithAReason: in a new session without a
// controlling terminal (stdin a pipe), OpenTerminal fails with
// ErrNoTerminal, so no human is attached and an ask is denied saying that
// no one is available to answer.
func TestNoTerminalDeniesWithAReason(t *testing.T) {
	stdinR, stdinW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer stdinR.Close()
	_, _ = io.WriteString(stdinW, "y\n")
	stdinW.Close()
	var stdout bytes.Buffer
	cmd := exec.Command(os.Args[0], "-test.run=^TestTTYChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), ttyChildEnv+"=none")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdinR, &stdout, &stdout
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Run(); err != nil {
		t.Fatalf("child: %v\n%s", err, stdout.String())
	}
	want := []string{"no terminal: true", "ls: unavailable by policy (none): no one is available to answer"}
	if got := resultLines(stdout.String()); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("child results:\n%s\nwant:\n%s", stdout.String(), strings.Join(want, "\n"))
	}
}

// TestBackgroundJobDoesNotAsk: a process in its terminal's session but
// not in the foreground group (a job started with &) must not read the
// terminal (it would be stopped by SIGTTIN): OpenTerminal refuses, and
// the ask is denied as with no terminal at all.
func TestBackgroundJobDoesNotAsk(t *testing.T) {
	_, slave := proctest.OpenPTY(t, 0)
	var stdout bytes.Buffer
	cmd := exec.Command(os.Args[0], "-test.run=^TestTTYChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), ttyChildEnv+"=bg-parent")
	cmd.Stdout, cmd.Stderr = &stdout, &stdout
	cmd.ExtraFiles = []*os.File{slave}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 3}
	if err := cmd.Run(); err != nil {
		t.Fatalf("child: %v\n%s", err, stdout.String())
	}
	want := []string{"no terminal: true", "ls: unavailable by policy (none): no one is available to answer"}
	if got := resultLines(stdout.String()); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("child results:\n%s\nwant:\n%s", stdout.String(), strings.Join(want, "\n"))
	}
}

// resultLines picks the child's RESULT lines.
func resultLines(out string) []string {
	var got []string
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		if l, ok := strings.CutPrefix(sc.Text(), "RESULT "); ok {
			got = append(got, l)
		}
	}
	return got
}

// TestTTYChild is the child half of the tests above; it does nothing in
// a normal run.
func TestTTYChild(t *testing.T) {
	mode := os.Getenv(ttyChildEnv)
	if mode == "" {
		t.Skip("child half of the terminal tests")
	}
	if mode == "bg-parent" {
		// The session leader owning the terminal starts the real child
		// in a process group of its own: a background job.
		bg := exec.Command(os.Args[0], "-test.run=^TestTTYChild$", "-test.count=1")
		bg.Env = append(os.Environ(), ttyChildEnv+"=none")
		bg.Stdout, bg.Stderr = os.Stdout, os.Stderr
		bg.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := bg.Run(); err != nil {
			t.Fatal(err)
		}
		return
	}
	log, err := session.NewLog(session.Header{ID: "sess-tty", Cwd: "/work/proj"}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	var human Answerer
	term, closeTTY, err := OpenTerminal()
	switch {
	case mode == "none":
		fmt.Printf("RESULT no terminal: %v\n", errors.Is(err, ErrNoTerminal) && term == nil)
	case err != nil:
		t.Fatal(err)
	default:
		defer closeTTY()
		human = term
	}
	s := &Service{Log: log, State: fixedState(wsAsk), Human: human}
	ask := func(command string) {
		if _, err := s.Decide(context.Background(), bashReq("c-"+command, command, "a rule asks")); err != nil {
			t.Fatal(err)
		}
		d := decided(t, log)
		last := d[len(d)-1]
		line := fmt.Sprintf("%s: %s by %s (%s)", command, last.Outcome, last.By, last.Answerer)
		if mode == "none" {
			line += ": " + last.Reason
		} else {
			line += fmt.Sprintf(" grant=%v", last.Grant != nil)
		}
		fmt.Println("RESULT " + line)
	}
	if mode == "none" {
		ask("ls")
		return
	}
	ask("git push origin main")
	ask("git push origin main")
	ask("rm -rf build")
	// Nothing was read from the piped stdin.
	b, _ := io.ReadAll(os.Stdin)
	fmt.Printf("RESULT stdin unread: %d bytes\n", len(b))
}
