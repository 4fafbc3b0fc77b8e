//go:build linux

package cli_test

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dsh-dev/dsh/internal/llm/llmtest"
	"github.com/dsh-dev/dsh/internal/proc/proctest"
)

// escapeCmd starts processes that try to outlive the call (setsid, nohup,
// a double fork), each a sleep whose argument is the marker.
func escapeCmd(marker string) string {
	return fmt.Sprintf(`setsid sleep %[1]s </dev/null >/dev/null 2>&1 &
nohup sleep %[1]s </dev/null >/dev/null 2>&1 &
( (sleep %[1]s </dev/null >/dev/null 2>&1 &) & )
until [ "$(pgrep -fx "sleep %[1]s" | wc -l)" -ge 3 ]; do :; done`, marker)
}

// requireNoMarked fails when a process whose command line holds marker
// is still running once each has been waited for through a pidfd.
func requireNoMarked(t *testing.T, marker string) {
	t.Helper()
	if left := proctest.Survivors(marker, 10*time.Second); len(left) > 0 {
		t.Fatalf("processes %v outlived dsh", left)
	}
}

// Through the real binary: a sandboxed command cannot read dsh's API key
// (base64-encoded, so redaction cannot help), and nothing a foreground
// call or a background job (ended by its timeout) starts survives.
func TestSandboxSecretAndLeftoversEndToEnd(t *testing.T) {
	needSandbox(t)
	e := newEnv(t)
	m := fmt.Sprintf("1000.%09d", rand.IntN(1e9))
	bg, _ := json.Marshal(map[string]any{"command": escapeCmd(m) + "\nexec sleep " + m, "description": "bg", "run_in_background": true, "timeout_ms": 1500})
	e.srv.Enqueue(
		llmtest.Response{ToolCalls: []llmtest.ToolCall{
			bashCall(`{ for p in /proc/[0-9]*; do tr '\0' '\n' < $p/environ; done; env; } 2>/dev/null | base64 -w0`),
			bashCall(escapeCmd(m) + "\necho ready"),
			{Name: "bash", Arguments: string(bg)},
		}},
		llmtest.Response{Text: "done"},
		// dsh run waits for the background job: its timeout ends it, and
		// its notice starts one more turn.
		llmtest.Response{Text: "done"},
	)
	stdout, stderr, code := e.dsh("", "run", "--json", "--approval", "never", "try")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	events, _ := parseJSONRun(t, stdout)
	res := results(t, events)
	if len(res) != 3 {
		t.Fatalf("%d results", len(res))
	}
	enc := strings.TrimSpace(strings.SplitN(text(res[0]), "\n", 2)[0])
	loot, err := base64.StdEncoding.DecodeString(enc)
	if err != nil || !strings.Contains(string(loot), "PATH=") {
		t.Fatalf("the attack did not run: %v %q", err, text(res[0]))
	}
	if strings.Contains(string(loot), "DEEPSEEK_API_KEY") || strings.Contains(string(loot), "test-key") {
		t.Fatalf("the API key leaked:\n%s", loot)
	}
	if !strings.Contains(text(res[1]), "ready") {
		t.Fatalf("escapes: %q", text(res[1]))
	}
	requireNoMarked(t, m)
}

// After kill -9 of dsh in the middle of a call, nothing the call started
// survives.
func TestSandboxLeftoversAfterKill9(t *testing.T) {
	needSandbox(t)
	e := newEnv(t)
	// The command reports readiness through a FIFO in the workspace (the
	// sandbox lets it write there).
	fifo := filepath.Join(e.cwd, "ready.fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(fifo, os.O_RDWR, 0) // never blocks, nor does the writer
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m := fmt.Sprintf("1000.%09d", rand.IntN(1e9))
	e.srv.Enqueue(
		llmtest.Response{ToolCalls: []llmtest.ToolCall{bashCall(escapeCmd(m) + "\necho ready > ready.fifo\nexec sleep " + m)}},
		llmtest.Response{Text: "done"},
	)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := e.cmd(ctx, "run", "--approval", "never", "try")
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(f).ReadString('\n')
	if err != nil || line != "ready\n" {
		t.Fatalf("readiness %q %v", line, err)
	}
	// The command runs on the session's sandbox server, whose command
	// line ends with dsh's pid.
	server := "dsh-sandbox-server\x00" + strconv.Itoa(c.Process.Pid)
	if len(proctest.Marked(server)) == 0 && os.Getenv("DSH_SANDBOX_SERVER") != "0" {
		t.Fatal("no sandbox server runs the command")
	}
	_ = c.Process.Kill()
	_ = c.Wait()
	requireNoMarked(t, m)
	requireNoMarked(t, server)
}
