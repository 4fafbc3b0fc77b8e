package bash

import (
	"context"
	"strings"
	"testing"

	"github.com/dsh-dev/dsh/internal/tool"
)

// The persistent shell keeps cd and variables between calls, reports
// exit codes like the one-shot shell, kills a command (and its shell) at
// the time limit with TOOL_TIMEOUT, and starts a fresh shell after that.
func TestPersistentShell(t *testing.T) {
	def, closer := NewPersistent(Options{})
	t.Cleanup(func() { _ = closer.Close() })
	reg := tool.NewRegistry()
	if err := reg.Register("", def); err != nil {
		t.Fatal(err)
	}
	h := &harness{p: tool.NewPipeline(reg), cwd: t.TempDir()}
	run := func(args map[string]any) (string, *tool.Error) {
		t.Helper()
		res := h.run(context.Background(), t, args)
		return text(res), res.Error
	}
	if out, _ := run(map[string]any{"command": "mkdir -p sub && cd sub && export GREETING=hello && pwd"}); !strings.HasSuffix(strings.Split(out, "\n")[0], "/sub") || !strings.HasSuffix(out, "[exit code: 0]") {
		t.Fatalf("first call: %q", out)
	}
	if out, _ := run(map[string]any{"command": "pwd; echo $GREETING"}); !strings.Contains(out, "/sub\nhello\n") {
		t.Fatalf("state did not carry over: %q", out)
	}
	if out, _ := run(map[string]any{"command": "echo oops >&2; false"}); !strings.Contains(out, "oops") || !strings.HasSuffix(out, "[exit code: 1]") {
		t.Fatalf("exit code: %q", out)
	}
	if out, _ := run(map[string]any{"command": "printf 'no newline'; (exit 7)"}); !strings.HasPrefix(out, "no newline\n") || !strings.HasSuffix(out, "[exit code: 7]") {
		t.Fatalf("output without newline: %q", out)
	}
	if out, _ := run(map[string]any{"command": "cat"}); !strings.HasSuffix(out, "[exit code: 0]") {
		t.Fatalf("a command reading stdin reads /dev/null: %q", out)
	}
	out, terr := run(map[string]any{"command": "echo started; sleep 1000", "timeout_ms": 300})
	if terr == nil || terr.Code != tool.CodeTimeout || !strings.Contains(out, "started") || !strings.Contains(out, "the shell was killed") {
		t.Fatalf("timeout: %q %v", out, terr)
	}
	if out, _ := run(map[string]any{"command": "echo ${GREETING:-reset}; pwd"}); !strings.Contains(out, "reset\n"+h.cwd+"\n") {
		t.Fatalf("after the timeout: %q", out)
	}
	if out, _ := run(map[string]any{"command": "exit 3"}); !strings.Contains(out, "the shell exited") || !strings.HasSuffix(out, "[exit code: 3]") {
		t.Fatalf("exit: %q", out)
	}
	if out, _ := run(map[string]any{"command": "echo 'quote'\"s\" $((1+1))"}); !strings.Contains(out, "quotes 2") {
		t.Fatalf("a new shell after exit: %q", out)
	}
}
