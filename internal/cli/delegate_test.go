package cli_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dsh-dev/dsh/internal/llm/llmtest"
)

// codexEnv is an env whose profile points the codex row at the fake
// app-server with script.
func codexEnv(t *testing.T, script string) *env {
	e := newEnv(t)
	scriptFile := filepath.Join(t.TempDir(), "script.json")
	writeFile(t, scriptFile, script, 0o600)
	writeFile(t, filepath.Join(e.home, "config.yaml"), fmt.Sprintf(`
profile:
  - id: codex
    module: codex
    config:
      command: [%q]
      env:
        DSH_FAKECODEX_SCRIPT: %q
        CODEX_HOME: %q
`, fakeCodexBin, scriptFile, filepath.Join(t.TempDir(), "codex-home")), 0o600)
	return e
}

type delegateLine struct {
	Type       string
	ID         string
	Line       string
	Checkpoint *struct {
		Name string
		Data map[string]any
	}
	Receipt *struct {
		Status, Category, Text, ThreadID, ThreadMode string
		Usage                                        struct{ Completeness string }
		Cleanup                                      struct{ Confirmed bool }
		Process                                      struct {
			Pgid int
			Exit *struct{ Code int }
		}
	}
	Start map[string]any
}

func parseDelegate(t *testing.T, out string) []delegateLine {
	t.Helper()
	var lines []delegateLine
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		var d delegateLine
		if err := json.Unmarshal([]byte(l), &d); err != nil {
			t.Fatalf("non-JSON line %q: %v", l, err)
		}
		lines = append(lines, d)
	}
	return lines
}

func TestDelegateCodexJSONReceiptAndRecover(t *testing.T) {
	e := codexEnv(t, `{"turns":[{"items":[{"type":"commandExecution","command":"go test ./...","output":"ok\n","exitCode":0}],"answer":"all green"}]}`)
	out, stderr, code := e.dsh("", "delegate", "codex", "--json", "--thread-mode", "persistent", "--description", "ci check", "run the tests")
	if code != 0 {
		t.Fatalf("exit %d\nstdout %s\nstderr %s", code, out, stderr)
	}
	lines := parseDelegate(t, out)
	var kinds []string
	for _, l := range lines {
		k := l.Type
		if l.Checkpoint != nil {
			k += ":" + l.Checkpoint.Name
		}
		kinds = append(kinds, k)
	}
	want := "start,checkpoint:spawned,checkpoint:initialized,checkpoint:thread,checkpoint:turn-started,progress,checkpoint:turn-completed,receipt"
	if strings.Join(kinds, ",") != want {
		t.Fatalf("lines %v\nwant %s", kinds, want)
	}
	rc := lines[len(lines)-1].Receipt
	if rc.Status != "completed" || rc.Text != "all green" || rc.ThreadMode != "persistent" || rc.ThreadID == "" ||
		!rc.Cleanup.Confirmed || rc.Process.Exit == nil || rc.Usage.Completeness != "complete" {
		t.Fatalf("receipt %+v", *rc)
	}
	id := lines[0].ID
	dir := filepath.Join(e.home, "delegations", id)
	for name, mode := range map[string]os.FileMode{"": 0o700, "journal.jsonl": 0o600, "receipt.json": 0o600} {
		st, err := os.Stat(filepath.Join(dir, name))
		if err != nil || st.Mode().Perm() != mode {
			t.Fatalf("%s: %v mode %v, want %v", filepath.Join(dir, name), err, st.Mode().Perm(), mode)
		}
	}
	rec, _, code := e.dsh("", "delegate", "recover", "--json", id)
	var r struct {
		State   string
		Receipt struct{ Status, Text string }
	}
	if err := json.Unmarshal([]byte(rec), &r); err != nil || code != 0 || r.State != "finished" || r.Receipt.Text != "all green" {
		t.Fatalf("recover exit %d: %s", code, rec)
	}
	// A unique prefix of the id is enough.
	if out, stderr, code := e.dsh("", "delegate", "recover", "--json", id[:len(id)-3]); code != 0 || !strings.Contains(out, `"finished"`) {
		t.Fatalf("recover by prefix: exit %d: %s %s", code, out, stderr)
	}
	// Plain mode prints the answer and the thread marker.
	out, _, code = e.dsh("", "delegate", "codex", "--thread-id", rc.ThreadID, "go on")
	if code != 0 || !strings.HasPrefix(out, "all green\n[codex thread "+rc.ThreadID+" · persistent") {
		t.Fatalf("exit %d stdout %q", code, out)
	}
}

func TestDelegateCodexRefusesBadRequests(t *testing.T) {
	e := codexEnv(t, `{}`)
	_, stderr, code := e.dsh("", "delegate", "codex", "--json", "--image", "/nonexistent.png", "look")
	if code != 2 {
		t.Fatalf("exit %d, stderr %s", code, stderr)
	}
	_, stderr, code = e.dsh("", "delegate", "codex", "--thread-mode", "session", "x")
	if code != 2 || !strings.Contains(stderr, "needs a dsh session") {
		t.Fatalf("exit %d, stderr %s", code, stderr)
	}
}

func TestDelegateRecoverAfterCallerDied(t *testing.T) {
	e := codexEnv(t, `{"turns":[{"wait_for_interrupt":true}]}`)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	c := e.cmd(ctx, "delegate", "codex", "--json", "wait forever")
	stdout, err := c.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	var id string
	pgid := 0
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		var l delegateLine
		if json.Unmarshal(sc.Bytes(), &l) != nil {
			continue
		}
		id = l.ID
		if l.Checkpoint != nil && l.Checkpoint.Name == "spawned" {
			pgid = int(l.Checkpoint.Data["pgid"].(float64))
		}
		if l.Checkpoint != nil && l.Checkpoint.Name == "turn-started" {
			break
		}
	}
	if id == "" || pgid == 0 {
		t.Fatalf("no turn-started checkpoint (id %q pgid %d)", id, pgid)
	}
	// The caller dies without a chance to write its receipt.
	_ = c.Process.Signal(syscall.SIGKILL)
	_ = c.Wait()
	// The guardian ends the app-server's group once the caller is gone.
	deadline := time.Now().Add(20 * time.Second)
	for groupAlive(pgid) {
		if time.Now().After(deadline) {
			t.Fatalf("process group %d outlived its caller", pgid)
		}
		time.Sleep(20 * time.Millisecond)
	}
	out, _, code := e.dsh("", "delegate", "recover", "--json", id)
	var r struct {
		State          string
		CallerAlive    bool
		GroupAlive     bool
		LastCheckpoint struct{ Name string }
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil || code != 1 {
		t.Fatalf("exit %d: %s", code, out)
	}
	if r.State != "abandoned" || r.CallerAlive || r.GroupAlive || r.LastCheckpoint.Name != "turn-started" {
		t.Fatalf("recovery %+v", r)
	}
}

// groupAlive reports whether a non-zombie process is in group pgid.
func groupAlive(pgid int) bool {
	ents, _ := os.ReadDir("/proc")
	for _, en := range ents {
		if _, err := strconv.Atoi(en.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", en.Name(), "stat"))
		if err != nil {
			continue
		}
		s := string(b)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(f) > 3 && f[0] != "Z" && f[3] == strconv.Itoa(pgid) {
			return true
		}
	}
	return false
}

func TestDoctorReportsCodex(t *testing.T) {
	e := codexEnv(t, `{}`)
	out, _, code := e.dsh("", "doctor")
	if code != 0 || !strings.Contains(out, "subagent_codex and dsh delegate codex ("+fakeCodexBin+")") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
}

func TestDelegateSIGTERMWritesAnAbortedReceipt(t *testing.T) {
	e := codexEnv(t, `{"turns":[{"wait_for_interrupt":true}]}`)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	c := e.cmd(ctx, "delegate", "codex", "--json", "wait forever")
	stdout, err := c.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(stdout)
	var last delegateLine
	for sc.Scan() {
		if json.Unmarshal(sc.Bytes(), &last) != nil {
			continue
		}
		if last.Checkpoint != nil && last.Checkpoint.Name == "turn-started" {
			_ = c.Process.Signal(syscall.SIGTERM)
		}
	}
	err = c.Wait()
	if c.ProcessState.ExitCode() != 130 || last.Receipt == nil || last.Receipt.Status != "aborted" || last.Receipt.Category != "cancelled" || !last.Receipt.Cleanup.Confirmed {
		t.Fatalf("exit %v, last line %+v", err, last)
	}
	out, _, _ := e.dsh("", "delegate", "recover", "--json", last.ID)
	if !strings.Contains(out, `"state": "finished"`) || !strings.Contains(out, `"status": "aborted"`) {
		t.Fatalf("recover: %s", out)
	}
}

func TestDoctorReportsACPAgents(t *testing.T) {
	e := newEnv(t)
	writeFile(t, filepath.Join(e.home, "config.yaml"), fmt.Sprintf(`
profile:
  - id: acp.fake
    module: acp-agent
    config: {name: fake, command: [%q]}
  - id: acp.gone
    module: acp-agent
    config: {name: gone, command: [no-such-agent-binary]}
`, fakeACPBin), 0o600)
	// A configured agent that cannot start is broken: doctor says so and
	// exits 1.
	out, stderr, code := e.dsh("", "doctor")
	if code != 1 || !strings.Contains(out, "ACP subagent ("+fakeACPBin+")") || !regexpMatch(`acp:gone\s+error\s+ACP subagent: no-such-agent-binary not found`, out) || !strings.Contains(stderr, "broken: acp:gone") {
		t.Fatalf("exit %d:\n%s\n%s", code, out, stderr)
	}
}

func regexpMatch(pattern, s string) bool { return regexp.MustCompile(pattern).MatchString(s) }

func TestRunDelegatesToCodex(t *testing.T) {
	e := codexEnv(t, `{"turns":[{"answer":"codex says done"}]}`)
	e.srv.Enqueue(
		llmtest.Response{ToolCalls: []llmtest.ToolCall{toolCall("subagent_codex", map[string]any{"description": "probe", "prompt": "do the thing", "thread_mode": "persistent"})}},
		llmtest.Response{Text: "relayed"},
	)
	out, stderr, code := e.dsh("", "run", "delegate it")
	if code != 0 || !strings.Contains(out, "relayed") {
		t.Fatalf("exit %d\nstdout %s\nstderr %s", code, out, stderr)
	}
	reqs := e.srv.Requests()
	if len(reqs) != 2 || !strings.Contains(string(reqs[1].Body), "codex says done") || !strings.Contains(string(reqs[1].Body), "pass it as thread_id to continue") {
		t.Fatalf("second request lacks the delegation's answer: %s", reqs[len(reqs)-1].Body)
	}
}
