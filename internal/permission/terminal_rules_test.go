package permission

import (
	"encoding/json"
	"testing"
)

// Text typed into a terminal and the command a terminal starts are
// commands to the rules and to the approver, as bash's command is.
func TestTerminalCommandsAreCommands(t *testing.T) {
	r, err := NewRules([]Rule{
		{Tool: "terminal_send", CommandPrefix: "git push", Action: ActionDeny},
		{Tool: "terminal_send", CommandPrefix: "rm", Action: ActionAsk},
		{Tool: "terminal_open", CommandPrefix: "python", Action: ActionAsk},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		tool, args, want string
	}{
		{"terminal_send", `{"session_id":"term-1","text":"cd x && git push origin"}`, ActionDeny},
		{"terminal_send", `{"session_id":"term-1","text":"rm -rf build"}`, ActionAsk},
		{"terminal_send", `{"session_id":"term-1","text":"ls"}`, ""},
		{"terminal_open", `{"type":"python"}`, ActionAsk},
		{"terminal_open", `{"type":"shell"}`, ""},
		{"terminal_open", `{"type":"command","command":"python3 -m http.server"}`, ""},
		{"bash", `{"command":"git push"}`, ""},
	} {
		if got, _ := r.Evaluate(c.tool, json.RawMessage(c.args)); got != c.want {
			t.Errorf("%s %s: %q, want %q", c.tool, c.args, got, c.want)
		}
	}
	if cmd, cwd := commandOf("terminal_send", json.RawMessage(`{"session_id":"term-1","text":"make test"}`), "/w"); cmd != "make test" || cwd != "/w" {
		t.Errorf("terminal_send question: %q in %q", cmd, cwd)
	}
	if cmd, cwd := commandOf("terminal_open", json.RawMessage(`{"type":"command","command":"npm run dev","cwd":"web"}`), "/w"); cmd != "npm run dev" || cwd != "/w/web" {
		t.Errorf("terminal_open question: %q in %q", cmd, cwd)
	}
}
