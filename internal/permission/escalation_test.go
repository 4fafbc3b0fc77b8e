package permission

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/dsh-dev/dsh/internal/llm"
	"github.com/dsh-dev/dsh/internal/sandbox"
	"github.com/dsh-dev/dsh/internal/session"
	"github.com/dsh-dev/dsh/internal/tool"
	"github.com/dsh-dev/dsh/internal/tools/bash"
)

// fakeBox is a sandbox backend for tests: in read-only it refuses
// commands starting with "touch" the way a read-only bind mount does;
// without network it refuses commands mentioning "fetch" the way a
// namespace without a network does; everything else runs as it is
// (": fetch …" is the no-op builtin, so no test touches the network). It
// records every policy it is asked to confine under.
type fakeBox struct {
	mu       sync.Mutex
	policies []sandbox.Policy
	backend  string
}

func (f *fakeBox) Confine(argv []string, p sandbox.Policy) (sandbox.Confined, error) {
	f.mu.Lock()
	f.policies = append(f.policies, p)
	backend := f.backend
	f.mu.Unlock()
	if backend == "" {
		backend = "fake"
	}
	cmd := argv[len(argv)-1]
	out := argv
	switch {
	case p.Mode == sandbox.ReadOnly && strings.HasPrefix(cmd, "touch"):
		out = []string{"sh", "-c", `echo "touch: cannot touch: Read-only file system" >&2; exit 1`}
	case !p.Network && strings.Contains(cmd, "fetch"):
		out = []string{"sh", "-c", `echo "curl: (6) Could not resolve host: example.com" >&2; exit 6`}
	}
	return sandbox.Confined{
		Argv: out, Backend: backend, Enforcement: sandbox.Partial, Gaps: []string{"network"},
		Denied: func(exit int, out []byte) bool {
			return exit != 0 && (strings.Contains(string(out), "Read-only file system") || strings.Contains(string(out), "Could not resolve host"))
		},
	}, nil
}

func (f *fakeBox) last() sandbox.Policy {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.policies[len(f.policies)-1]
}

func (f *fakeBox) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.policies)
}

// world is one session wired the way the composition root wires it: a
// real log and pipeline, the bash tool confined by a BashConfiner over a
// fake backend, the escalation middleware and the approval service.
type world struct {
	t     *testing.T
	dir   string
	log   *session.Log
	box   *fakeBox
	human *scripted
	pipe  *tool.Pipeline
	conf  *BashConfiner
}

func newWorld(t *testing.T, preset string, answers ...Verdict) *world {
	t.Helper()
	w := &world{t: t, dir: t.TempDir(), box: &fakeBox{}, human: &scripted{name: AnswererTerminal, verdicts: answers}}
	w.log = newLog(t, w.dir)
	if err := Select(w.log, preset, "user"); err != nil {
		t.Fatal(err)
	}
	grants := NewGrants()
	w.conf = &BashConfiner{Sandbox: w.box, Log: w.log, Grants: grants}
	reg := tool.NewRegistry()
	if err := reg.Register("", bash.New(bash.Options{Confine: w.conf.Confine})); err != nil {
		t.Fatal(err)
	}
	w.pipe = tool.NewPipeline(reg)
	w.pipe.UsePreExecute((&Escalation{Log: w.log, Grants: grants}).PreExecute)
	w.pipe.SetApprover(&Service{Log: w.log, State: func() State { return Current(w.log) }, Human: w.human})
	return w
}

// call runs one bash call the way the agent loop does: tool/call logged,
// the pipeline run, tool/result logged.
func (w *world) call(id string, args map[string]any) tool.Result {
	w.t.Helper()
	raw, _ := json.Marshal(args)
	if _, err := w.log.Append(session.TypeToolCall, session.ToolCall{CallID: id, Name: bash.Name, Arguments: string(raw)}); err != nil {
		w.t.Fatal(err)
	}
	r := w.pipe.Run(context.Background(), &tool.Call{ID: id, Name: bash.Name, RawArguments: string(raw), Cwd: w.dir, SessionID: w.log.ID()})
	tr := session.ToolResult{CallID: id, Name: bash.Name, Content: r.Content, IsError: r.IsError, Meta: r.Meta}
	if tr.Content == nil {
		tr.Content = []llm.Block{}
	}
	if r.Error != nil {
		tr.Error = &session.ToolError{Name: r.Error.Name, Code: r.Error.Code, Reason: r.Error.Reason}
	}
	if _, err := w.log.Append(session.TypeToolResult, tr, session.Surface()); err != nil {
		w.t.Fatal(err)
	}
	return r
}

func cmd(c string) map[string]any { return map[string]any{"command": c} }

func escalate(c, perm, why string) map[string]any {
	return map[string]any{"command": c, "sandbox_permissions": perm, "justification": why}
}

func resultText(r tool.Result) string {
	var b strings.Builder
	for _, bl := range r.Content {
		b.WriteString(bl.Text)
	}
	return b.String()
}

func resultMeta(t *testing.T, r tool.Result) (m struct {
	SandboxDenied bool   `json:"sandboxDenied"`
	SandboxMode   string `json:"sandboxMode"`
}) {
	t.Helper()
	if err := json.Unmarshal(r.Meta, &m); err != nil {
		t.Fatalf("meta %s: %v", r.Meta, err)
	}
	return m
}

func errCode(r tool.Result) string {
	if r.Error == nil {
		return ""
	}
	return r.Error.Code
}

func TestEscalationFlow(t *testing.T) {
	w := newWorld(t, PresetReadOnly, Verdict{Outcome: tool.AllowedOnce})
	const touch = "touch out.txt"

	// 1. The sandbox refuses the write: a normal result the model reads.
	r := w.call("c1", cmd(touch))
	if r.IsError || !strings.HasSuffix(resultText(r), "[sandbox: file access denied — the command tried to write outside the writable roots of read-only mode]") {
		t.Fatalf("denial result %q", resultText(r))
	}
	if m := resultMeta(t, r); !m.SandboxDenied || m.SandboxMode != "read-only" {
		t.Fatalf("meta %+v", m)
	}

	// 2. The identical command retried with an escalation is asked, and
	// once allowed it runs under the widened policy.
	r = w.call("c2", escalate(touch, "workspace-write", "the fix must be written to out.txt"))
	if r.IsError || resultText(r) != "(no output)\n\n[exit code: 0]" {
		t.Fatalf("escalated run: %q", resultText(r))
	}
	if _, err := os.Stat(filepath.Join(w.dir, "out.txt")); err != nil {
		t.Fatal("the escalated command did not write:", err)
	}
	if p := w.box.last(); p.Mode != sandbox.WorkspaceWrite || p.Workspace != w.dir || p.Network {
		t.Fatalf("the confiner saw %+v", p)
	}
	if m := resultMeta(t, r); m.SandboxDenied || m.SandboxMode != "workspace-write" {
		t.Fatalf("meta %+v", m)
	}
	if q := w.human.last; w.human.calls != 1 || q.CallID != "c2" || q.Command != touch ||
		q.Reason != "sandbox escalation to workspace-write: the fix must be written to out.txt" {
		t.Fatalf("human asked %d times: %+v", w.human.calls, q)
	}

	// 3. The grant was for that call only.
	r = w.call("c3", cmd(touch))
	if p := w.box.last(); p.Mode != sandbox.ReadOnly || !resultMeta(t, r).SandboxDenied {
		t.Fatalf("a later plain call ran under %+v: %q", p, resultText(r))
	}

	// 4. A second escalation of the same denial is refused without asking.
	w.call("c4", escalate(touch, "workspace-write", "again"))
	r = w.call("c5", escalate(touch, "danger-full-access", "please"))
	if errCode(r) != CodeEscalationRefused || !strings.Contains(resultText(r), "already escalated once (call c4)") {
		t.Fatalf("second escalation: %s %q", errCode(r), resultText(r))
	}
	if w.human.calls != 2 { // c2 and c4
		t.Fatalf("human asked %d times", w.human.calls)
	}

	// One sandbox/backend event for the whole session.
	n := 0
	for _, e := range w.log.Events() {
		if e.Type == session.TypeSandboxBackend {
			n++
			var b SandboxBackend
			if err := e.Decode(&b); err != nil || b.Backend != "fake" || b.Enforcement != sandbox.Partial || b.Gaps[0] != "network" {
				t.Fatalf("backend event %+v %v", b, err)
			}
		}
	}
	if n != 1 {
		t.Fatalf("%d sandbox/backend events", n)
	}
}

func TestEscalationRefusals(t *testing.T) {
	const touch = "touch out.txt"
	tests := []struct {
		name    string
		preset  string
		answers []Verdict
		before  []map[string]any // calls made first
		call    map[string]any
		want    string // ESCALATION_REFUSED message part; "" = asked
	}{
		{"no earlier run", PresetReadOnly, nil, nil, escalate(touch, "workspace-write", "w"),
			"no earlier run of this exact command in this session was refused by the sandbox"},
		{"a different command was denied", PresetReadOnly, nil, []map[string]any{cmd(touch)}, escalate("touch other.txt", "workspace-write", "w"),
			"no earlier run of this exact command"},
		{"last run not denied", PresetReadOnly, nil, []map[string]any{cmd("echo hi")}, escalate("echo hi", "workspace-write", "w"),
			"the last run of this exact command (call b0) was not refused by the sandbox"},
		{"a later successful run supersedes the denial", PresetReadOnly, []Verdict{{Outcome: tool.AllowedOnce}},
			[]map[string]any{cmd(": fetch x"), escalate(": fetch x", "network", "n"), cmd("echo unrelated")}, escalate(": fetch x", "network", "n"),
			"already escalated once (call b1)"},
		{"not strictly wider", PresetWorkspaceWrite, nil, []map[string]any{cmd(": fetch x")}, escalate(": fetch x", "workspace-write", "w"),
			"the session's sandbox mode is workspace-write, which already allows what workspace-write allows"},
		{"narrower", PresetWorkspaceWrite, nil, []map[string]any{cmd(": fetch x")}, escalate(": fetch x", "read-only", "w"),
			"sandbox_permissions must be"},
		{"nothing to escalate in full access", PresetFullAccess, nil, []map[string]any{cmd("true")}, escalate("true", "danger-full-access", "w"),
			"which already allows what danger-full-access allows"},
		{"network is on in full access", PresetFullAccess, nil, nil, escalate(": fetch x", "network", "w"), "network access is already on"},
		{"missing justification", PresetReadOnly, nil, []map[string]any{cmd(touch)}, map[string]any{"command": touch, "sandbox_permissions": "workspace-write"},
			"a justification is required"},
		{"a rejected escalation uses up the denial", PresetReadOnly, []Verdict{{Outcome: tool.Rejected}},
			[]map[string]any{cmd(touch), escalate(touch, "workspace-write", "w")}, escalate(touch, "workspace-write", "w"), "already escalated once (call b1)"},
		{"a refused attempt does not use up the denial", PresetWorkspaceWrite, []Verdict{{Outcome: tool.AllowedOnce}},
			[]map[string]any{cmd(": fetch x"), escalate(": fetch x", "workspace-write", "not wider")}, escalate(": fetch x", "network", "fetch"), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorld(t, tt.preset, tt.answers...)
			for i, args := range tt.before {
				w.call("b"+string(rune('0'+i)), args)
			}
			asks := w.human.calls
			r := w.call("x", tt.call)
			if tt.want == "" {
				if r.IsError || w.human.calls != asks+1 {
					t.Fatalf("not asked/run: %s %q", errCode(r), resultText(r))
				}
				return
			}
			if errCode(r) != CodeEscalationRefused || !strings.Contains(resultText(r), tt.want) || !strings.HasPrefix(resultText(r), "Error: sandbox escalation refused: ") {
				t.Fatalf("got %s %q\nwant %q", errCode(r), resultText(r), tt.want)
			}
			if w.human.calls != asks {
				t.Fatal("a refused escalation was put to the human")
			}
		})
	}
}

func TestEscalationNetworkAndFullAccess(t *testing.T) {
	w := newWorld(t, PresetWorkspaceWrite, Verdict{Outcome: tool.AllowedOnce}, Verdict{Outcome: tool.AllowedOnce})
	r := w.call("n1", cmd(": fetch https://example.com"))
	if !strings.HasSuffix(resultText(r), "[sandbox: network access denied — network access is off in workspace-write mode]") {
		t.Fatalf("network denial %q", resultText(r))
	}
	w.call("n2", escalate(": fetch https://example.com", "network", "download the release"))
	if p := w.box.last(); !p.Network || p.Mode != sandbox.WorkspaceWrite {
		t.Fatalf("network escalation confined under %+v", p)
	}

	// danger-full-access runs the command as it is: no backend involved.
	w.call("f1", cmd(": fetch all"))
	before := w.box.count()
	r = w.call("f2", escalate(": fetch all", "danger-full-access", "needs everything"))
	if w.box.count() != before || resultMeta(t, r).SandboxMode != "danger-full-access" {
		t.Fatalf("full access went through the backend (%d → %d) or meta %s", before, w.box.count(), r.Meta)
	}
}

func TestEscalationNeedsLoggedApproval(t *testing.T) {
	tests := []struct {
		name string
		wire func(t *testing.T, w *world)
		want string // the denial; "" = the call runs, under the session's policy
	}{
		{"approval policy never", func(t *testing.T, w *world) {
			mustAppend(t, w.log, session.TypeApprovalPolicy, ApprovalPolicy{Policy: ApprovalNever})
		}, "not approved: approval unavailable"},
		// A middleware that turns every ask into allow must not widen the
		// sandbox: the grant needs an approval on the log.
		{"ask turned into allow", func(t *testing.T, w *world) {
			reg := tool.NewRegistry()
			if err := reg.Register("", bash.New(bash.Options{Confine: w.conf.Confine})); err != nil {
				t.Fatal(err)
			}
			w.pipe = tool.NewPipeline(reg)
			w.pipe.UsePreExecute(func(ctx context.Context, c *tool.Call, next func(context.Context) tool.Decision) tool.Decision {
				if d := next(ctx); d.Kind != tool.Ask {
					return d
				}
				return tool.Decision{Kind: tool.Allow}
			})
			w.pipe.UsePreExecute((&Escalation{Log: w.log, Grants: w.conf.Grants}).PreExecute)
		}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorld(t, PresetReadOnly, Verdict{Outcome: tool.AllowedOnce})
			tt.wire(t, w)
			w.call("d1", cmd("touch f"))
			r := w.call("d2", escalate("touch f", "workspace-write", "w"))
			if tt.want != "" {
				if errCode(r) != tool.CodeDenied || !strings.Contains(resultText(r), tt.want) {
					t.Fatalf("got %s %q", errCode(r), resultText(r))
				}
				return
			}
			if p := w.box.last(); p.Mode != sandbox.ReadOnly || !resultMeta(t, r).SandboxDenied {
				t.Fatalf("an unapproved grant widened the policy to %+v", p)
			}
		})
	}
}
