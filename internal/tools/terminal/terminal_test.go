package terminal

import (
	"context"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/dsh-dev/dsh/internal/jobs"
	"github.com/dsh-dev/dsh/internal/terminal"
	"github.com/dsh-dev/dsh/internal/tool"
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

// Reads page through the output by absolute offsets, also after the
// scrollback wrapped: the dropped bytes are reported and the offsets
// stay those of the whole output.
func TestReadPagingAfterWrap(t *testing.T) {
	h := newHarness(t, Options{})
	h.mgr = terminal.New(terminal.Options{Scrollback: 4096})
	for _, d := range New(Options{Manager: h.mgr, Jobs: h.jobs, Wait: eventually, Quiet: eventually}) {
		h.tools[d.Name] = d
	}
	t.Cleanup(h.mgr.Shutdown)
	_, meta := h.ok(OpenName, map[string]any{"type": "command", "command": `for i in $(seq 1 1000); do printf 'line %04d\n' $i; done; echo END; exec cat`, "wait_ms": 1})
	id := meta["terminalId"].(string)
	term, err := h.mgr.Get(h.sid, id)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, term, -100, "END")
	// 1000 lines of 10 bytes (+CR) = 11000 bytes, more than the ring.
	out, meta := h.ok(ReadName, map[string]any{"session_id": id, "offset": 0, "count": 110})
	if meta["dropped"].(float64) <= 0 || meta["offset"].(float64) != meta["dropped"].(float64) || !strings.Contains(out, "scrolled out") {
		t.Fatalf("read from 0 after the wrap: %v\n%s", meta, out)
	}
	start := int64(meta["next"].(float64))
	out2, meta2 := h.ok(ReadName, map[string]any{"session_id": id, "count": 110})
	if int64(meta2["offset"].(float64)) != start || meta2["dropped"].(float64) != 0 {
		t.Fatalf("the next page does not continue at %d: %v", start, meta2)
	}
	// Two consecutive pages of 110 bytes are 20 whole lines when the
	// first starts on a line boundary; check continuity by line numbers.
	lines := strings.Fields(strings.ReplaceAll(firstBody(out)+firstBody(out2), "line", ""))
	if len(lines) < 10 {
		t.Fatalf("pages: %q %q", out, out2)
	}
	// The last 30 bytes counted back from the end.
	out, _ = h.ok(ReadName, map[string]any{"session_id": id, "offset": -30})
	if !strings.Contains(out, "line 1000\nEND") {
		t.Fatalf("tail read: %q", out)
	}
}

// firstBody is a read result without its status lines.
func firstBody(s string) string {
	var keep []string
	for _, l := range strings.Split(s, "\n") {
		if strings.HasPrefix(l, "[") || l == "" {
			continue
		}
		keep = append(keep, l)
	}
	return strings.Join(keep, "\n")
}

// INT interrupts a running loop in the REPL and leaves the REPL alive.
func TestSignalInterruptsLoop(t *testing.T) {
	h := newHarness(t, Options{Wait: 1}) // sends return at once
	_, meta := h.ok(OpenName, map[string]any{"type": "python"})
	id := meta["terminalId"].(string)
	term, _ := h.mgr.Get(h.sid, id)
	_, from, _ := term.Changed()
	h.ok(SendName, map[string]any{"session_id": id, "text": "print('loop' + 'ing', flush=True); exec('while True: pass')"})
	// The marker is not in the echo of the text: the loop runs.
	waitFor(t, term, from, "looping\n")
	_, from, _ = term.Changed()
	if _, err := h.call(SignalName, map[string]any{"session_id": id, "signal": "INT"}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, term, from, "KeyboardInterrupt")
	out, _ := h.ok(SendName, map[string]any{"session_id": id, "text": "print('alive')", "wait_ms": 60000})
	if !strings.Contains(out, "alive") {
		t.Fatalf("after the interrupt: %q", out)
	}
	if _, err := h.call(SignalName, map[string]any{"session_id": id, "signal": "STOPALL"}); code(err) != tool.CodeInvalidArgs {
		t.Fatalf("an unknown signal: %v", err)
	}
}

// Close ends the process (and the group), and the id is gone.
func TestCloseKillsProcess(t *testing.T) {
	h := newHarness(t, Options{})
	_, meta := h.ok(OpenName, map[string]any{"type": "shell"})
	id := meta["terminalId"].(string)
	out, _ := h.ok(SendName, map[string]any{"session_id": id, "text": "sleep 1000 & echo bg=$!"})
	pid := 0
	for _, f := range strings.Fields(out) {
		if v, ok := strings.CutPrefix(f, "bg="); ok {
			pid, _ = strconv.Atoi(v)
		}
	}
	if pid == 0 {
		t.Fatalf("no pid in %q", out)
	}
	shell := int(meta["pid"].(float64))
	h.ok(CloseName, map[string]any{"session_id": id})
	for _, p := range []int{shell} {
		if alive(p) {
			t.Fatalf("pid %d survived close", p)
		}
	}
	if _, err := h.call(SendName, map[string]any{"session_id": id, "text": "echo"}); code(err) != terminal.CodeNotFound {
		t.Fatalf("send after close: %v", err)
	}
}

// alive reports whether pid is a live (not zombie) process.
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i > 0 && i+2 < len(s) && s[i+2] != 'Z'
}

// The errors: another session's terminal is not found, the limit, an
// exited terminal refuses input, bad arguments.
func TestErrors(t *testing.T) {
	h := newHarness(t, Options{})
	h.mgr = terminal.New(terminal.Options{MaxPerOwner: 1})
	for _, d := range New(Options{Manager: h.mgr, Jobs: h.jobs, Wait: eventually, Quiet: eventually}) {
		h.tools[d.Name] = d
	}
	t.Cleanup(h.mgr.Shutdown)
	_, meta := h.ok(OpenName, map[string]any{"type": "command", "command": "echo done; exit 3"})
	id := meta["terminalId"].(string)
	if meta["state"] != string(settledExited) {
		t.Fatalf("open of a command that exits: %v", meta)
	}
	if _, err := h.call(SendName, map[string]any{"session_id": id, "text": "x"}); code(err) != terminal.CodeClosed {
		t.Fatalf("send to an exited terminal: %v", err)
	}
	out, _ := h.ok(ReadName, map[string]any{"session_id": id, "offset": 0})
	if !strings.Contains(out, "done") || !strings.Contains(out, "exited with status 3") {
		t.Fatalf("read of an exited terminal: %s", out)
	}
	_, meta = h.ok(OpenName, map[string]any{"type": "command", "command": "exec cat", "wait_ms": 1})
	if _, err := h.call(OpenName, map[string]any{"type": "shell"}); code(err) != terminal.CodeLimit {
		t.Fatalf("over the limit: %v", err)
	}
	other := h.sid
	h.sid = "session-2"
	if _, err := h.call(ReadName, map[string]any{"session_id": meta["terminalId"]}); code(err) != terminal.CodeNotFound {
		t.Fatalf("another session's terminal: %v", err)
	}
	h.sid = other
	for _, c := range []struct {
		tool string
		args map[string]any
	}{
		{OpenName, map[string]any{"type": "fish"}},
		{OpenName, map[string]any{"type": "command"}},
		{OpenName, map[string]any{"type": "python", "command": "x"}},
		{OpenName, map[string]any{"type": "command", "command": "echo " + strings.Repeat("x", 200<<10)}},
		{OpenName, map[string]any{"type": "shell", "cwd": "/nonexistent/dir"}},
		{SendName, map[string]any{"session_id": id}},
		{SendName, map[string]any{"session_id": "", "text": "x"}},
		{ReadName, map[string]any{"session_id": id, "count": 0}},
		{ReadName, map[string]any{"session_id": id, "offset": "x"}},
	} {
		if _, err := h.call(c.tool, c.args); code(err) != tool.CodeInvalidArgs {
			t.Errorf("%s %v: %v", c.tool, c.args, err)
		}
	}
}

// A background send is a job: its output is the terminal's until the
// prompt returns, and job_kill interrupts it.
func TestBackgroundSendIsJob(t *testing.T) {
	h := newHarness(t, Options{})
	_, meta := h.ok(OpenName, map[string]any{"type": "shell"})
	id := meta["terminalId"].(string)
	_, meta = h.ok(SendName, map[string]any{"session_id": id, "text": "for i in 1 2 3; do echo tick $i; done", "run_in_background": true})
	jobID := meta["jobId"].(string)
	ctx, cancel := context.WithTimeout(context.Background(), eventually)
	defer cancel()
	j, err := h.jobs.Wait(ctx, jobID)
	if err != nil || j.Status != jobs.Completed || j.Kind != JobKind || j.Owner != h.sid {
		t.Fatalf("job %+v: %v", j, err)
	}
	out, _, _, _ := h.jobs.Output(jobID, 0)
	if !strings.Contains(string(out), "tick 1\ntick 2\ntick 3\n$ ") {
		t.Fatalf("job output %q", out)
	}
	_, meta = h.ok(SendName, map[string]any{"session_id": id, "text": `sh -c 'echo st""art; exec sleep 1000'`, "run_in_background": true})
	jobID = meta["jobId"].(string)
	// The child prints once bash gave it the terminal (the foreground).
	echo := `sh -c 'echo st""art; exec sleep 1000'` + "\n"
	if _, err := h.jobs.WaitOutput(ctx, jobID, int64(len(echo+"start\n")-1)); err != nil {
		t.Fatal(err)
	}
	term, _ := h.mgr.Get(h.sid, id)
	_, from, _ := term.Changed()
	j, err = h.jobs.Kill(ctx, jobID)
	if err != nil || j.Status != jobs.Killed {
		t.Fatalf("kill: %+v %v", j, err)
	}
	// The shell's prompt after the interrupt: input typed before it would
	// be typeahead, echoed before that prompt.
	waitFor(t, term, from, "$ ")
	out2, _ := h.ok(SendName, map[string]any{"session_id": id, "text": "echo after=$((40+2))"})
	if !strings.Contains(out2, "after=42") {
		t.Fatalf("the shell did not survive the interrupt: %q", out2)
	}
}

// The node and shell types keep state across sends too.
func TestNodeAndShellTypes(t *testing.T) {
	h := newHarness(t, Options{})
	if _, err := exec.LookPath("node"); err == nil {
		_, meta := h.ok(OpenName, map[string]any{"type": "node"})
		id := meta["terminalId"].(string)
		h.ok(SendName, map[string]any{"session_id": id, "text": "let n = 20"})
		if out, _ := h.ok(SendName, map[string]any{"session_id": id, "text": "n + 22"}); !strings.Contains(out, "42") {
			t.Fatalf("node: %q", out)
		}
	}
	_, meta := h.ok(OpenName, map[string]any{"type": "shell", "cwd": "."})
	id := meta["terminalId"].(string)
	h.ok(SendName, map[string]any{"session_id": id, "text": "mkdir -p d && cd d && V=7"})
	if out, _ := h.ok(SendName, map[string]any{"session_id": id, "text": `echo "$V in ${PWD##*/}"`}); !strings.Contains(out, "7 in d\n") {
		t.Fatalf("shell: %q", out)
	}
}

// TestAtPromptReadsOnlyItsSpan: whether the output ends at the prompt
// is decided on the span asked about, never on output past it, so that
// a background job that passed on the output up to an offset ends only
// on a prompt it passed on (its output held only the echo of its input
// when the prompt came between its read and its check).
func TestAtPromptReadsOnlyItsSpan(t *testing.T) {
	mgr := terminal.New(terminal.Options{})
	t.Cleanup(mgr.Shutdown)
	term, err := mgr.Open(context.Background(), terminal.Spec{
		Owner: "s", Type: "shell", Argv: []string{"sh", "-c", `printf 'input\nout\n$ '; exec sleep 1000`},
		Dir: t.TempDir(), Env: os.Environ(), Prompt: regexp.MustCompile(`\$ $`),
	})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, term, 0, "$ ")
	total := term.Read(0, 0).Total
	if !atPrompt(term, 0, total, 1) {
		t.Fatalf("no prompt at the end of %q", term.Read(0, 0).Data)
	}
	if atPrompt(term, 0, total-2, 1) {
		t.Fatal("a prompt past the span ended the check")
	}
	if atPrompt(term, 0, total, 3) {
		t.Fatal("the prompt counted before the lines the input typed")
	}
}
