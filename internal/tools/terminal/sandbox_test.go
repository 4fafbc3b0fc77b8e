//go:build linux

package terminal

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dsh-dev/dsh/internal/sandbox"
	"github.com/dsh-dev/dsh/internal/tool"
	"github.com/dsh-dev/dsh/internal/tools/bash"
)

// A terminal is confined like a bash command under each real backend
// here: in workspace-write a write inside the workspace works, one
// outside fails, and a secret of dsh's environment is not in the
// terminal's. Job control still works inside (INT reaches the REPL).
func TestSandboxConfinesTerminal(t *testing.T) {
	const secret = "sk-terminal-test-0123456789"
	t.Setenv("DSH_TEST_API_KEY", secret)
	for _, b := range []sandbox.Backend{sandbox.NewBwrap(""), sandbox.NewLandlock("")} {
		t.Run(b.Name(), func(t *testing.T) {
			if err := b.Probe(); err != nil {
				t.Skipf("%s unavailable: %v", b.Name(), err)
			}
			var h *harness
			confine := func(c *tool.Call, argv []string) (bash.Confinement, error) {
				p := sandbox.Policy{Mode: sandbox.WorkspaceWrite, Workspace: h.cwd}
				cf, err := b.Confine(argv, p)
				return bash.Confinement{Confined: cf, Policy: p}, err
			}
			h = newHarness(t, Options{Confine: confine})
			_, meta := h.ok(OpenName, map[string]any{"type": "shell"})
			id := meta["terminalId"].(string)
			if meta["sandboxMode"] != string(sandbox.WorkspaceWrite) {
				t.Fatalf("open: %v", meta)
			}
			outside := filepath.Join("/usr", "dsh-terminal-escape-test")
			out, _ := h.ok(SendName, map[string]any{"session_id": id, "text": "touch inside && echo wrote; touch " + outside + "; echo rc=$?; echo key=${DSH_TEST_API_KEY:-unset}"})
			if !strings.Contains(out, "wrote") || strings.Contains(out, "rc=0") || !strings.Contains(out, "key=unset") || strings.Contains(out, secret) {
				t.Fatalf("in the sandbox: %q", out)
			}
			if _, err := os.Stat(filepath.Join(h.cwd, "inside")); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(outside); err == nil {
				os.Remove(outside)
				t.Fatal("the write outside the workspace went through")
			}
			// Python in the same sandbox, opened from the shell's REPL.
			_, meta = h.ok(OpenName, map[string]any{"type": "python"})
			pid := meta["terminalId"].(string)
			out, _ = h.ok(SendName, map[string]any{"session_id": pid, "text": "open('" + outside + "', 'w')"})
			if !strings.Contains(out, "Error") {
				t.Fatalf("python wrote outside: %q", out)
			}
			// The REPL is the terminal's foreground inside the sandbox:
			// INT reaches it through the namespaces.
			term, _ := h.mgr.Get(h.sid, pid)
			_, from, _ := term.Changed()
			h.ok(SendName, map[string]any{"session_id": pid, "text": "print('spin' + 'ning', flush=True); exec('while True: pass')", "wait_ms": 1})
			waitFor(t, term, from, "spinning\n")
			_, from, _ = term.Changed()
			if _, err := h.call(SignalName, map[string]any{"session_id": pid, "signal": "INT"}); err != nil {
				t.Fatal(err)
			}
			waitFor(t, term, from, "KeyboardInterrupt")
		})
	}
}

// In danger-full-access a terminal runs unconfined under the sandbox's
// lifetime-only supervisor, still with the PTY as its controlling
// terminal.
func TestSupervisedTerminal(t *testing.T) {
	sb := sandbox.New()
	confine := func(c *tool.Call, argv []string) (bash.Confinement, error) {
		return bash.Confinement{Confined: sb.Supervise(argv), Policy: sandbox.Policy{Mode: sandbox.DangerFullAccess}}, nil
	}
	h := newHarness(t, Options{Confine: confine})
	_, meta := h.ok(OpenName, map[string]any{"type": "python"})
	id := meta["terminalId"].(string)
	term, _ := h.mgr.Get(h.sid, id)
	_, from, _ := term.Changed()
	h.ok(SendName, map[string]any{"session_id": id, "text": "import time; print('sle' + 'eping', flush=True); time.sleep(1000)", "wait_ms": 1})
	waitFor(t, term, from, "sleeping\n")
	_, from, _ = term.Changed()
	if _, err := h.call(SignalName, map[string]any{"session_id": id, "signal": "INT"}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, term, from, "KeyboardInterrupt")
	// TERM goes to the foreground group through TIOCGPGRP: the REPL ends.
	if _, err := h.call(SignalName, map[string]any{"session_id": id, "signal": "TERM"}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), eventually)
	defer cancel()
	for {
		ch, _, running := term.Changed()
		if !running {
			break
		}
		select {
		case <-ch:
		case <-ctx.Done():
			t.Fatal("the REPL survived SIGTERM")
		}
	}
	if i := term.Info(); i.ExitCode == nil {
		t.Fatalf("no exit status: %+v", i)
	}
}
