package bash

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/dsh-dev/dsh/internal/sandbox"
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

// The persistent shell runs in the sandbox like a one-shot command: a
// write outside the workspace fails with the denial marker, and the
// shell's state still carries over.
func TestPersistentShellRealSandbox(t *testing.T) {
	for _, b := range []sandbox.Backend{sandbox.NewBwrap(""), sandbox.NewLandlock("")} {
		t.Run(b.Name(), func(t *testing.T) {
			if err := b.Probe(); err != nil {
				t.Skipf("%s unavailable: %v", b.Name(), err)
			}
			var h *harness
			confine := func(c *tool.Call, argv []string) (Confinement, error) {
				p := sandbox.Policy{Mode: sandbox.WorkspaceWrite, Workspace: h.cwd}
				cf, err := b.Confine(argv, p)
				return Confinement{Confined: cf, Policy: p}, err
			}
			def, closer := NewPersistent(Options{Confine: confine})
			t.Cleanup(func() { _ = closer.Close() })
			reg := tool.NewRegistry()
			if err := reg.Register("", def); err != nil {
				t.Fatal(err)
			}
			h = &harness{p: tool.NewPipeline(reg), cwd: t.TempDir()}
			res := h.run(context.Background(), t, map[string]any{"command": "X=kept; touch inside && echo wrote"})
			if out := text(res); !strings.Contains(out, "wrote") || metaOf(t, res).SandboxMode != string(sandbox.WorkspaceWrite) {
				t.Fatalf("inside: %q", out)
			}
			res = h.run(context.Background(), t, map[string]any{"command": "echo $X; touch /usr/dsh-persistent-escape"})
			if out := text(res); !strings.Contains(out, "kept\n") || !strings.Contains(out, "[sandbox: file access denied") || !metaOf(t, res).SandboxDenied {
				t.Fatalf("outside: %q", out)
			}
			if _, err := os.Stat("/usr/dsh-persistent-escape"); err == nil {
				os.Remove("/usr/dsh-persistent-escape")
				t.Fatal("the write outside the workspace went through")
			}
		})
	}
}
