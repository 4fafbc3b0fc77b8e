package llmtest_test

// Integration tests that drive the real Codex CLI (peers.Packages["codex"])
// against the fake server's Responses API. They skip when the binary is not
// installed (see package peers: $DSH_PEERS_DIR, then $PATH).

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/dsh-dev/dsh/internal/jsonrpc"
	"github.com/dsh-dev/dsh/internal/llm/llmtest"
	"github.com/dsh-dev/dsh/internal/peers"
)

// codexDeadline bounds one whole real-Codex test; a healthy run takes well
// under a second per turn.
const codexDeadline = 60 * time.Second

// codexSetup finds codex, writes a private CODEX_HOME for srv and returns
// the binary, a scrubbed environment (HOME and CODEX_HOME in temporary
// directories, so the real ~/.codex is never touched) and a work
// directory.
func codexSetup(t *testing.T, srv *llmtest.Server, model string) (bin string, env []string, work string) {
	t.Helper()
	bin, err := peers.Find("codex")
	if err != nil {
		t.Skip(err.Error())
	}
	home := t.TempDir()
	codexHome := filepath.Join(home, ".codex")
	if err := llmtest.WriteCodexConfig(codexHome, srv.URL(), model); err != nil {
		t.Fatal(err)
	}
	env = []string{
		"PATH=" + os.Getenv("PATH"), // the npm bin is a node script
		"HOME=" + home,
		"CODEX_HOME=" + codexHome,
		llmtest.CodexKeyEnv + "=" + llmtest.CodexKey,
	}
	return bin, env, t.TempDir()
}

// codexCommand prepares bin in its own process group, killed whole when
// ctx ends and again at cleanup: the npm bin is a node wrapper around the
// native binary, and killing only the wrapper would leave that running.
func codexCommand(ctx context.Context, t *testing.T, bin string, env []string, dir string, args ...string) (*exec.Cmd, *bytes.Buffer) {
	t.Helper()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env, cmd.Dir = env, dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	t.Cleanup(func() {
		if cmd.Process != nil {
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		}
	})
	return cmd, &stderr
}

// shellTool picks the shell tool Codex offers (exec_command in 0.171;
// older and newer versions have used shell_command and shell) and the
// arguments that run command with it.
func shellTool(r llmtest.Request, command string) llmtest.ToolCall {
	names := r.ToolNames()
	for _, name := range []string{"exec_command", "shell_command"} {
		if slices.Contains(names, name) {
			key := "cmd"
			if name == "shell_command" {
				key = "command"
			}
			args, _ := json.Marshal(map[string]string{key: command})
			return llmtest.ToolCall{Name: name, Arguments: string(args)}
		}
	}
	args, _ := json.Marshal(map[string][]string{"command": {"bash", "-lc", command}})
	return llmtest.ToolCall{Name: "shell", Arguments: string(args)}
}

// TestCodexExecReal runs `codex exec` for one turn with a shell tool call
// and checks the scripted answer, the command's output and the requests.
func TestCodexExecReal(t *testing.T) {
	srv := llmtest.New()
	defer srv.Close()
	bin, env, work := codexSetup(t, srv, "fake-model")
	const answer = "the scripted answer is 42"
	srv.SetFallback(func(r llmtest.Request) llmtest.Response {
		if r.ToolResultCount() == 0 {
			return llmtest.Response{Reasoning: "run it", Text: "Running the command.", Phase: "commentary",
				ToolCalls: []llmtest.ToolCall{withID(shellTool(r, "echo hello-from-fake"), "call_sh")},
				Usage:     &llmtest.Usage{Input: 100, Output: 10}}
		}
		return llmtest.Response{Text: answer, Phase: "final_answer",
			Usage: &llmtest.Usage{Input: 20, CacheRead: 100, Output: 7, Reasoning: 2}}
	})

	ctx, cancel := context.WithTimeout(context.Background(), codexDeadline)
	defer cancel()
	// danger-full-access: Codex's sandbox helper cannot be set up under a
	// temporary CODEX_HOME, and the command is a harmless echo.
	cmd, stderr := codexCommand(ctx, t, bin, env, work, "exec", "--skip-git-repo-check", "--json",
		"-C", work, "-s", "danger-full-access", "-c", `model_reasoning_effort="high"`, "say the magic word")
	start := time.Now()
	out, err := cmd.Output()
	t.Logf("codex exec took %v", time.Since(start))
	if err != nil {
		t.Fatalf("codex exec: %v\nstdout:\n%s\nstderr:\n%s", err, out, stderr)
	}

	var (
		messages []string
		command  string
		usage    map[string]any
	)
	for line := range strings.Lines(string(out)) {
		var ev struct {
			Type string `json:"type"`
			Item struct {
				Type   string `json:"type"`
				Text   string `json:"text"`
				Output string `json:"aggregated_output"`
			} `json:"item"`
			Usage map[string]any `json:"usage"`
		}
		if json.Unmarshal([]byte(line), &ev) != nil {
			continue
		}
		switch {
		case ev.Type == "item.completed" && ev.Item.Type == "agent_message":
			messages = append(messages, ev.Item.Text)
		case ev.Type == "item.completed" && ev.Item.Type == "command_execution":
			command = ev.Item.Output
		case ev.Type == "turn.completed":
			usage = ev.Usage
		}
	}
	if len(messages) == 0 || messages[len(messages)-1] != answer || !slices.Contains(messages, "Running the command.") {
		t.Fatalf("agent messages %q\nstdout:\n%s", messages, out)
	}
	if !strings.Contains(command, "hello-from-fake") {
		t.Fatalf("command output %q\nstdout:\n%s", command, out)
	}
	// Codex sums the turn's requests: input includes the cached part.
	if usage["input_tokens"] != 220.0 || usage["cached_input_tokens"] != 100.0 || usage["output_tokens"] != 17.0 {
		t.Errorf("turn usage %v", usage)
	}

	reqs := srv.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests", len(reqs))
	}
	first, second := reqs[0], reqs[1]
	for _, r := range reqs {
		if r.Method != "POST" || r.Path != "/v1/responses" || r.Format != llmtest.FormatResponses || !r.Stream ||
			r.Model() != "fake-model" || r.Header.Get("Authorization") != "Bearer "+llmtest.CodexKey {
			t.Fatalf("request %s %s format=%s stream=%t model=%q auth=%q", r.Method, r.Path, r.Format, r.Stream, r.Model(), r.Header.Get("Authorization"))
		}
	}
	if !slices.Contains(first.InputTexts("user"), "say the magic word") || first.ReasoningEffort() != "high" ||
		!slices.Contains(first.ToolNames(), shellTool(first, "").Name) {
		t.Fatalf("first request: user texts %q effort %q tools %v", first.InputTexts("user"), first.ReasoningEffort(), first.ToolNames())
	}
	var output string
	for _, it := range second.Input() {
		if it["type"] == "function_call_output" && it["call_id"] == "call_sh" {
			output, _ = it["output"].(string)
		}
	}
	if second.ToolResultCount() != 1 || !strings.Contains(output, "hello-from-fake") {
		t.Fatalf("second request: %d tool results, output %q", second.ToolResultCount(), output)
	}
}

func withID(c llmtest.ToolCall, id string) llmtest.ToolCall {
	c.ID = id
	return c
}

// appServer is a JSON-RPC client of `codex app-server` for the test.
type appServer struct {
	conn  *jsonrpc.Conn
	mu    sync.Mutex
	items []map[string]any // item/completed items, in order
	turns chan map[string]any
}

func (a *appServer) onNotification(method string, params json.RawMessage) {
	var p map[string]any
	if json.Unmarshal(params, &p) != nil {
		return
	}
	switch method {
	case "item/completed":
		if it, ok := p["item"].(map[string]any); ok {
			a.mu.Lock()
			a.items = append(a.items, it)
			a.mu.Unlock()
		}
	case "turn/completed":
		select {
		case a.turns <- p:
		default: // never blocks the reader; the test runs one turn at a time
		}
	}
}

// turn starts a turn and waits for its turn/completed; it returns the
// completed turn and the agentMessage items it produced.
func (a *appServer) turn(ctx context.Context, t *testing.T, params map[string]any) (map[string]any, []map[string]any) {
	t.Helper()
	a.mu.Lock()
	from := len(a.items)
	a.mu.Unlock()
	var started struct {
		Turn struct {
			ID string `json:"id"`
		} `json:"turn"`
	}
	if err := a.conn.Call(ctx, "turn/start", params, &started); err != nil {
		t.Fatalf("turn/start: %v", err)
	}
	for {
		select {
		case p := <-a.turns:
			turn, _ := p["turn"].(map[string]any)
			if turn["id"] != started.Turn.ID {
				continue
			}
			var msgs []map[string]any
			a.mu.Lock()
			for _, it := range a.items[from:] {
				if it["type"] == "agentMessage" {
					msgs = append(msgs, it)
				}
			}
			a.mu.Unlock()
			return turn, msgs
		case <-ctx.Done():
			t.Fatalf("waiting for turn/completed: %v", ctx.Err())
		}
	}
}

// TestCodexAppServerReal drives `codex app-server` over JSON-RPC
// (initialize, initialized, thread/start, turn/start): a turn with an
// image, an output schema and a reasoning effort, then a turn whose model
// request fails with a scripted HTTP 500.
func TestCodexAppServerReal(t *testing.T) {
	srv := llmtest.New()
	defer srv.Close()
	bin, env, work := codexSetup(t, srv, "gpt-5.5")
	png := filepath.Join(work, "px.png")
	if err := os.WriteFile(png, onePixelPNG, 0o600); err != nil {
		t.Fatal(err)
	}
	const answer = `{"answer":"hi"}`
	srv.Enqueue(
		llmtest.Response{Text: answer, Phase: "final_answer", Usage: &llmtest.Usage{Input: 90, Output: 5}},
		llmtest.Response{Status: 500},
	)

	ctx, cancel := context.WithTimeout(context.Background(), codexDeadline)
	defer cancel()
	cmd, stderr := codexCommand(ctx, t, bin, env, work, "app-server")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	a := &appServer{turns: make(chan map[string]any, 8)}
	a.conn = jsonrpc.NewConn(stdout, stdin, jsonrpc.Options{
		Dialect:        jsonrpc.Codex,
		OnNotification: a.onNotification,
		// approval_policy "never" asks nothing; decline anything anyway.
		OnRequest: func(context.Context, string, json.RawMessage) (any, *jsonrpc.Error) {
			return map[string]string{"decision": "decline"}, nil
		},
	})
	defer a.conn.Close()

	var init struct {
		CodexHome string `json:"codexHome"`
	}
	err = a.conn.Call(ctx, "initialize", map[string]any{
		"clientInfo":   map[string]string{"name": "dsh_llmtest", "version": "0.0.1"},
		"capabilities": map[string]any{"optOutNotificationMethods": []string{"item/agentMessage/delta"}},
	}, &init)
	if err != nil {
		t.Fatalf("initialize: %v\nstderr:\n%s", err, stderr)
	}
	if want := envValue(env, "CODEX_HOME"); init.CodexHome != want {
		t.Errorf("codexHome %q, want %q", init.CodexHome, want)
	}
	if err := a.conn.Notify("initialized", nil); err != nil {
		t.Fatal(err)
	}
	var thread struct {
		Thread struct {
			ID string `json:"id"`
		} `json:"thread"`
		ModelProvider string `json:"modelProvider"`
	}
	err = a.conn.Call(ctx, "thread/start", map[string]any{
		"cwd": work, "approvalPolicy": "never", "sandbox": "workspace-write", "ephemeral": true,
	}, &thread)
	if err != nil || thread.Thread.ID == "" || thread.ModelProvider != llmtest.CodexProvider {
		t.Fatalf("thread/start: %+v, %v", thread, err)
	}

	schema := map[string]any{"type": "object", "properties": map[string]any{"answer": map[string]any{"type": "string"}},
		"required": []string{"answer"}, "additionalProperties": false}
	turn, msgs := a.turn(ctx, t, map[string]any{
		"threadId": thread.Thread.ID,
		"input": []any{
			map[string]any{"type": "text", "text": "describe the image", "text_elements": []any{}},
			map[string]any{"type": "localImage", "path": png},
		},
		"effort":       "low",
		"outputSchema": schema,
	})
	if turn["status"] != "completed" || len(msgs) != 1 || msgs[0]["text"] != answer || msgs[0]["phase"] != "final_answer" {
		t.Fatalf("turn %v, messages %v", turn, msgs)
	}

	r := srv.Requests()[0]
	if r.Path != "/v1/responses" || !r.Stream || r.Model() != "gpt-5.5" || r.ReasoningEffort() != "low" ||
		r.Header.Get("Originator") != "dsh_llmtest" {
		t.Fatalf("request %s stream=%t model=%q effort=%q originator=%q", r.Path, r.Stream, r.Model(), r.ReasoningEffort(), r.Header.Get("Originator"))
	}
	tf := r.TextFormat()
	got, _ := json.Marshal(tf["schema"])
	want, _ := json.Marshal(schema)
	if tf["type"] != "json_schema" || tf["strict"] != true || tf["name"] != "codex_output_schema" || string(got) != string(want) {
		t.Fatalf("text.format %v", tf)
	}
	if !slices.Contains(r.InputTexts("user"), "describe the image") || !hasImage(r) {
		t.Fatalf("user input %v", r.Input())
	}
	if !slices.Contains(r.ToolNames(), "apply_patch") {
		t.Errorf("a known model slug should get apply_patch; tools %v", r.ToolNames())
	}

	// The second turn's request fails: no retries are configured, so the
	// turn fails at once with Codex's classification of the status.
	turn, _ = a.turn(ctx, t, map[string]any{
		"threadId": thread.Thread.ID,
		"input":    []any{map[string]any{"type": "text", "text": "again", "text_elements": []any{}}},
	})
	turnErr, _ := turn["error"].(map[string]any)
	if turn["status"] != "failed" || turnErr["codexErrorInfo"] != "internalServerError" {
		t.Fatalf("failed turn %v", turn)
	}
	if n := srv.RequestCount(); n != 2 {
		t.Fatalf("%d requests, want 2 (no retry)", n)
	}
	// The history carries the first answer.
	if texts := srv.Requests()[1].InputTexts("assistant"); !slices.Contains(texts, answer) {
		t.Errorf("second request's assistant texts %q", texts)
	}

	// Closing stdin shuts the server down cleanly.
	_ = stdin.Close()
	select {
	case <-a.conn.Done():
	case <-ctx.Done():
		t.Fatalf("app-server did not exit: %v", ctx.Err())
	}
	if err := cmd.Wait(); err != nil && !errors.Is(err, exec.ErrWaitDelay) {
		t.Errorf("app-server exit: %v\nstderr:\n%s", err, tailLines(stderr.String(), 20))
	}
	t.Logf("codex app-server session took %v", time.Since(start))
}

func hasImage(r llmtest.Request) bool {
	for _, it := range r.Input() {
		if it["role"] != "user" {
			continue
		}
		parts, _ := it["content"].([]any)
		for _, p := range parts {
			m, _ := p.(map[string]any)
			if url, _ := m["image_url"].(string); m["type"] == "input_image" && strings.HasPrefix(url, "data:image/png;base64,") {
				return true
			}
		}
	}
	return false
}

func tailLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

func envValue(env []string, name string) string {
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, name+"="); ok {
			return v
		}
	}
	return ""
}

// onePixelPNG is a valid 1x1 RGBA PNG.
var onePixelPNG = []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00\x1f\x15\xc4\x89" +
	"\x00\x00\x00\rIDATx\x9cc\xf8\xcf\xc0\xf0\x1f\x00\x05\x00\x01\xff\x89\x99=\x1d\x00\x00\x00\x00IEND\xaeB`\x82")
