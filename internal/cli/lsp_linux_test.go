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

	"github.com/dsh-dev/dsh/internal/llm/llmtest"
	"github.com/dsh-dev/dsh/internal/lsp/lsptest"
	"github.com/dsh-dev/dsh/internal/proc/proctest"
	"github.com/dsh-dev/dsh/internal/session"
)

// goplsProfile configures gopls for .go files with a -logfile argument
// that marks its process (found in /proc by that marker afterwards).
func goplsProfile(t *testing.T, e *env) (marker string) {
	lsptest.Gopls(t)
	marker = filepath.Join(t.TempDir(), fmt.Sprintf("gopls-%d.log", time.Now().UnixNano()))
	writeFile(t, filepath.Join(e.home, "config.yaml"), `
profile:
  - id: tool.lsp
    module: tool/lsp
    config:
      start_timeout: 5m
      request_timeout: 5m
      servers:
        .go: {command: [gopls, serve, -logfile, `+marker+`], root_markers: [go.mod]}
`, 0o600)
	return marker
}

func lspCall(op, path string, line, char int) llmtest.ToolCall {
	b, _ := json.Marshal(map[string]any{"operation": op, "file_path": path, "line": line, "character": char})
	return llmtest.ToolCall{Name: "lsp", Arguments: string(b)}
}

// TestLSPToolThroughTheModel: the scripted model calls lsp in dsh run; the
// results are logged with their codes, and gopls is gone once dsh exits.
func TestLSPToolThroughTheModel(t *testing.T) {
	e := newEnv(t)
	marker := goplsProfile(t, e)
	lsptest.WriteModule(t, e.cwd)
	writeFile(t, filepath.Join(e.cwd, "notes.py"), "print('hi')\n", 0o644)
	l, c := lsptest.At(t, lsptest.MainSrc, "Total", 0)
	e.srv.Enqueue(
		llmtest.Response{ToolCalls: []llmtest.ToolCall{
			lspCall("goToDefinition", "cmd/app/main.go", l, c),
			lspCall("hover", "notes.py", 1, 1),
			lspCall("hover", "cmd/app/main.go", 99, 1),
		}},
		llmtest.Response{Text: "Total is declared in shape/shape.go."},
	)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	cmd := e.cmd(ctx, "run", "--json", "where is Total declared?")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("dsh run: %v\n%s", err, errb.String())
	}
	events, res := parseJSONRun(t, out.String())
	if res.Status != "completed" {
		t.Fatalf("result %+v", res)
	}
	var results []session.ToolResult
	for _, ev := range events {
		if ev.Type == session.TypeToolResult {
			var r session.ToolResult
			_ = ev.Decode(&r)
			results = append(results, r)
		}
	}
	if len(results) != 3 {
		t.Fatalf("%d tool results", len(results))
	}
	want := fmt.Sprintf("1 definition of the symbol at cmd/app/main.go:%d:%d:\nshape/shape.go:14:16: /* 𝔘é */ func Total(xs ...Shape) float64 {", l, c)
	if r := results[0]; r.IsError || len(r.Content) != 1 || r.Content[0].Text != want {
		t.Fatalf("definition result = %+v\nwant %q", r, want)
	}
	for i, code := range []string{"LSP_UNAVAILABLE", "LSP_INVALID_POSITION"} {
		r := results[i+1]
		if !r.IsError || r.Error == nil || r.Error.Code != code {
			t.Fatalf("result %d = %+v, want %s", i+1, r, code)
		}
	}
	if !strings.Contains(results[1].Content[0].Text, "no language server is configured for files with extension .py") {
		t.Fatalf("unavailable text = %q", results[1].Content[0].Text)
	}
	// The session ended with dsh run: its server with it.
	if left := proctest.Survivors(marker, time.Minute); len(left) > 0 {
		t.Fatalf("gopls still runs after dsh exited: %v", left)
	}
}

// TestLSPServerGoneAfterKill9: dsh killed with SIGKILL while its session's
// gopls runs leaves no gopls behind (the process kit's guardian).
func TestLSPServerGoneAfterKill9(t *testing.T) {
	e := newEnv(t)
	marker := goplsProfile(t, e)
	lsptest.WriteModule(t, e.cwd)
	fifo, lines := proctest.Fifo(t)
	l, c := lsptest.At(t, lsptest.ShapeSrc, "Total", 0)
	e.srv.Enqueue(
		llmtest.Response{ToolCalls: []llmtest.ToolCall{lspCall("hover", "shape/shape.go", l, c)}},
		llmtest.Response{ToolCalls: []llmtest.ToolCall{bashCall("echo up > " + fifo + "; sleep 600")}},
	)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	cmd := e.cmd(ctx, "run", "--json", "hover Total then wait")
	// dsh writes while the test reads: the buffers are locked.
	var out, errb lockedBuffer
	cmd.Stdout = &out
	cmd.Stderr = &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case <-lines:
	case err := <-exited:
		t.Fatalf("dsh exited before the second step: %v\n%s", err, out.String())
	case <-ctx.Done():
		t.Fatal("the second step never started")
	}
	if !strings.Contains(out.String(), "func Total(xs ...Shape) float64") {
		t.Fatalf("the hover result was not streamed before the kill:\n%s", out.String())
	}
	if len(proctest.Marked(marker)) == 0 {
		logb, _ := os.ReadFile(marker)
		t.Fatalf("no gopls process runs while the session is open\n%s\n%s", logb, errb.String())
	}
	if err := syscall.Kill(cmd.Process.Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-exited
	if left := proctest.Survivors(marker, time.Minute); len(left) > 0 {
		t.Fatalf("gopls outlived dsh's kill -9: %v", left)
	}
}

// TestDoctorLanguageServers: doctor lists the configured servers; one
// whose command is missing is broken (exit 1).
func TestDoctorLanguageServers(t *testing.T) {
	e := newEnv(t)
	writeFile(t, filepath.Join(e.home, "config.yaml"), `
profile:
  - id: tool.lsp
    module: tool/lsp
    config:
      servers:
        .go: {command: [sh, -c, "exit 0"]}
        .py: {command: [dsh-no-such-language-server, --stdio]}
`, 0o600)
	out, stderr, code := e.dsh("", "doctor")
	if code != 1 || !regexpMatch(`lsp \.go\s+ok\s+sh -c exit 0 \(/`, out) ||
		!regexpMatch(`lsp \.py\s+error\s+dsh-no-such-language-server --stdio: .*not found`, out) || !strings.Contains(stderr, "lsp .py") {
		t.Fatalf("exit %d:\n%s\n%s", code, out, stderr)
	}
	writeFile(t, filepath.Join(e.home, "config.yaml"), "profile:\n  - {id: tool.lsp, module: tool/lsp, disabled: true}\n", 0o600)
	out, _, _ = e.dsh("", "doctor")
	if !regexpMatch(`lsp\s+missing\s+no language server configured`, out) {
		t.Fatalf("doctor without the row:\n%s", out)
	}
}

// TestLSPRowValidation: a bad server table stops the profile from
// loading, naming the row and the key.
func TestLSPRowValidation(t *testing.T) {
	e := newEnv(t)
	writeFile(t, filepath.Join(e.home, "config.yaml"), "profile:\n  - id: tool.lsp\n    module: tool/lsp\n    config:\n      servers:\n        py: {command: [x]}\n", 0o600)
	_, stderr, code := e.dsh("", "config", "dump")
	if code != 2 || !strings.Contains(stderr, `profile row "tool.lsp"`) || !strings.Contains(stderr, `server key "py" is not a file extension`) {
		t.Fatalf("exit %d: %s", code, stderr)
	}
}

// lockedBuffer is a bytes.Buffer a child process's output copier writes
// while the test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
