//go:build linux

package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/dsh-dev/dsh/internal/llm/llmtest"
	"github.com/dsh-dev/dsh/internal/permission"
	"github.com/dsh-dev/dsh/internal/session"
)

// TestApprovalOnTerminalWithPipedPrompt runs `… | dsh run --json -` the
// way a person does in a terminal: the prompt comes through a pipe,
// stderr and the controlling terminal are a pseudo-terminal. A rule asks
// about the model's command; the question appears on the terminal, "a"
// answers it and grants the exact command for the session, so the
// model's identical second call runs without a second question.
func TestApprovalOnTerminalWithPipedPrompt(t *testing.T) {
	needSandbox(t)
	e := newEnv(t)
	writeFile(t, filepath.Join(e.home, "config.yaml"), `
profile:
  - {id: codex, module: codex, disabled: true}
  - {id: claude-code, module: claude-code, disabled: true}
  - id: permissions
    module: permissions
    config:
      rules:
        - {tool: bash, command_prefix: "echo", action: ask}
`, 0o600)
	const command = "echo granted >> out.txt"
	e.srv.Enqueue(
		llmtest.Response{ToolCalls: []llmtest.ToolCall{bashCall(command)}},
		llmtest.Response{ToolCalls: []llmtest.ToolCall{bashCall(command)}},
		llmtest.Response{Text: "done"},
	)

	master, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals here: %v", err)
	}
	defer master.Close()
	if err := unix.IoctlSetPointerInt(int(master.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(int(master.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	slave, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	c := e.cmd(ctx, "run", "--json", "-")
	// "y" lines in the piped prompt must not answer anything.
	c.Stdin = strings.NewReader("append to out.txt\ny\ny\n")
	var stdout bytes.Buffer
	c.Stdout, c.Stderr = &stdout, slave
	c.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 2}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	slave.Close()

	// Read the terminal; each read wakes the waiter (no sleeping).
	var mu sync.Mutex
	var screen bytes.Buffer
	more := make(chan struct{}, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		b := make([]byte, 4096)
		for {
			n, err := master.Read(b)
			mu.Lock()
			screen.Write(b[:n])
			mu.Unlock()
			select {
			case more <- struct{}{}:
			default:
			}
			if err != nil {
				return
			}
		}
	}()
	shown := func() string { mu.Lock(); defer mu.Unlock(); return screen.String() }
	for !strings.Contains(shown(), "Allow once?") {
		select {
		case <-more:
		case <-done:
			t.Fatalf("dsh left the terminal without asking:\n%s\nstdout:\n%s", shown(), stdout.String())
		}
	}
	if _, err := master.WriteString("a\n"); err != nil {
		t.Fatal(err)
	}
	if err := c.Wait(); err != nil {
		t.Fatalf("dsh: %v\nterminal:\n%s", err, shown())
	}
	<-done
	if got, _ := os.ReadFile(filepath.Join(e.cwd, "out.txt")); string(got) != "granted\ngranted\n" {
		t.Fatalf("out.txt %q; terminal:\n%s", got, shown())
	}
	if n := strings.Count(shown(), "Approval needed for bash"); n != 1 || !strings.Contains(shown(), "command: "+command) {
		t.Fatalf("%d questions on the terminal:\n%s", n, shown())
	}
	events, _ := parseJSONRun(t, stdout.String())
	var decided []permission.ApprovalDecided
	for _, ev := range events {
		if ev.Type == session.TypeApprovalDecided {
			var d permission.ApprovalDecided
			if err := json.Unmarshal(ev.Data, &d); err != nil {
				t.Fatal(err)
			}
			decided = append(decided, d)
		}
	}
	if len(decided) != 2 || decided[0].Answerer != permission.AnswererTerminal || decided[0].By != "user" || decided[0].Grant == nil ||
		decided[1].Answerer != permission.AnswererSessionGrant || decided[1].By != "user" {
		t.Fatalf("decisions %+v", decided)
	}
}
