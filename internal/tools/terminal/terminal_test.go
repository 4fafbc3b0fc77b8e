package terminal

import (
	"strings"
	"testing"
)

// A python3 REPL keeps its state across sends: a variable defined in one
// send is read back in another, and each send returns once the prompt is
// back.
func TestPythonREPLAcrossSends(t *testing.T) {
	h := newHarness(t, Options{})
	out, meta := h.ok(OpenName, map[string]any{"type": "python", "name": "py"})
	id, _ := meta["terminalId"].(string)
	if id == "" || meta["state"] != string(settledPrompt) || !strings.Contains(out, ">>> ") {
		t.Fatalf("open: %v\n%s", meta, out)
	}
	out, meta = h.ok(SendName, map[string]any{"session_id": id, "text": "x = 6 * 7"})
	if meta["state"] != string(settledPrompt) {
		t.Fatalf("send did not settle on the prompt: %v\n%s", meta, out)
	}
	out, _ = h.ok(SendName, map[string]any{"session_id": id, "text": "print(x + 1)"})
	if !strings.Contains(out, "\n43\n") {
		t.Fatalf("x was not kept: %q", out)
	}
	out, _ = h.ok(SendName, map[string]any{"session_id": id, "text": "for i in range(2):\n    print('row', i)\n"})
	if !strings.Contains(out, "row 0\nrow 1") {
		t.Fatalf("a block: %q", out)
	}
	out, _ = h.ok(ListName, map[string]any{})
	if !strings.Contains(out, id+` "py" (python) running`) {
		t.Fatalf("list: %s", out)
	}
}
