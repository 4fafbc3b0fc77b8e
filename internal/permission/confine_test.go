package permission

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/dsh-dev/dsh/internal/sandbox"
	"github.com/dsh-dev/dsh/internal/session"
	"github.com/dsh-dev/dsh/internal/tool"
)

func TestBashConfinerPolicy(t *testing.T) {
	tests := []struct {
		preset    string
		workspace string
		want      sandbox.Policy
	}{
		{PresetReadOnly, "", sandbox.Policy{Mode: sandbox.ReadOnly, Workspace: "/cwd"}},
		{PresetWorkspaceWrite, "", sandbox.Policy{Mode: sandbox.WorkspaceWrite, Workspace: "/cwd", WritableRoots: []string{"/extra"}}},
		{PresetAuto, "/root-of-work", sandbox.Policy{Mode: sandbox.WorkspaceWrite, Workspace: "/root-of-work", WritableRoots: []string{"/extra"}}},
		{PresetFullAccess, "", sandbox.Policy{Mode: sandbox.DangerFullAccess, Workspace: "/cwd", Network: true}},
	}
	for _, tt := range tests {
		t.Run(tt.preset, func(t *testing.T) {
			l := newLog(t, "/cwd")
			if err := Select(l, tt.preset, "test"); err != nil {
				t.Fatal(err)
			}
			b := &BashConfiner{Log: l, Workspace: tt.workspace, WritableRoots: []string{"/extra"}, UnixSockets: []string{"/run/agent.sock"}}
			got := b.Policy(&tool.Call{Cwd: "/cwd"})
			if got.Mode != tt.want.Mode || got.Workspace != tt.want.Workspace || got.Network != tt.want.Network || !slices.Equal(got.WritableRoots, tt.want.WritableRoots) ||
				!slices.Equal(got.UnixSockets, []string{"/run/agent.sock"}) {
				t.Fatalf("policy %+v, want %+v", got, tt.want)
			}
		})
	}
	// With no event at all the deployment default decides.
	b := &BashConfiner{Log: newLog(t, "/cwd"), Defaults: Defaults{Preset: PresetReadOnly}}
	if got := b.Policy(&tool.Call{Cwd: "/cwd"}); got.Mode != sandbox.ReadOnly {
		t.Fatalf("default policy %+v", got)
	}
}

// errBox fails like a machine without a usable backend.
type errBox struct{ err error }

func (e errBox) Confine([]string, sandbox.Policy) (sandbox.Confined, error) {
	return sandbox.Confined{}, e.err
}

func TestBashConfinerNeverRunsUnconfined(t *testing.T) {
	unavailable := fmt.Errorf("probe: %w", sandbox.ErrUnavailable)
	tests := []struct {
		name  string
		box   Confiner
		check func(error) bool
	}{
		{"backend error is returned unchanged", errBox{unavailable}, func(err error) bool { return err == unavailable }},
		{"no backend configured", nil, func(err error) bool {
			var te *tool.Error
			return errors.As(err, &te) && te.Code == sandbox.CodeUnavailable
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := newLog(t, "/cwd")
			b := &BashConfiner{Sandbox: tt.box, Log: l}
			_, err := b.Confine(&tool.Call{ID: "c", Cwd: "/cwd"}, []string{"bash", "-c", "true"})
			if err == nil || !tt.check(err) {
				t.Fatalf("err %v", err)
			}
			if l.Len() != 0 {
				t.Fatal("logged a backend that confined nothing")
			}
		})
	}
	// danger-full-access needs no backend at all.
	l := newLog(t, "/cwd")
	if err := Select(l, PresetFullAccess, "test"); err != nil {
		t.Fatal(err)
	}
	c, err := (&BashConfiner{Sandbox: errBox{unavailable}, Log: l}).Confine(&tool.Call{ID: "c", Cwd: "/cwd"}, []string{"bash", "-c", "true"})
	if err != nil || c.Enforcement != sandbox.None || !slices.Equal(c.Argv, []string{"bash", "-c", "true"}) || c.Policy.Mode != sandbox.DangerFullAccess {
		t.Fatalf("full access: %+v, %v", c, err)
	}
}

// supervisingBox is a Confiner that can also supervise unconfined
// commands.
type supervisingBox struct{ errBox }

func (supervisingBox) Supervise(argv []string) sandbox.Confined {
	c := sandbox.Unconfined(append([]string{"supervisor", "--"}, argv...))
	return c
}

// danger-full-access goes through the sandbox's supervisor when it has
// one, and never through Confine.
func TestBashConfinerSupervisesFullAccess(t *testing.T) {
	l := newLog(t, "/cwd")
	if err := Select(l, PresetFullAccess, "test"); err != nil {
		t.Fatal(err)
	}
	box := supervisingBox{errBox{errors.New("Confine must not be called")}}
	c, err := (&BashConfiner{Sandbox: box, Log: l}).Confine(&tool.Call{ID: "c", Cwd: "/cwd"}, []string{"bash", "-c", "true"})
	if err != nil || c.Enforcement != sandbox.None || !slices.Equal(c.Argv, []string{"supervisor", "--", "bash", "-c", "true"}) {
		t.Fatalf("full access: %+v, %v", c, err)
	}
}

func TestBashConfinerLogsBackendChanges(t *testing.T) {
	l := newLog(t, "/cwd")
	box := &fakeBox{}
	b := &BashConfiner{Sandbox: box, Log: l}
	run := func() {
		t.Helper()
		if _, err := b.Confine(&tool.Call{ID: "c", Cwd: "/cwd"}, []string{"bash", "-c", "true"}); err != nil {
			t.Fatal(err)
		}
	}
	run()
	run()
	box.backend = "fake-2"
	run()
	run()
	var got []string
	for _, e := range l.Events() {
		var p SandboxBackend
		if e.Type == session.TypeSandboxBackend && e.Decode(&p) == nil {
			got = append(got, p.Backend)
		}
	}
	if !slices.Equal(got, []string{"fake", "fake-2"}) {
		t.Fatalf("backend events %v", got)
	}
	// A resumed session reads the last logged backend instead of logging
	// it again.
	resumed, err := session.NewLog(l.Header(), l.Events(), nil)
	if err != nil {
		t.Fatal(err)
	}
	b2 := &BashConfiner{Sandbox: box, Log: resumed}
	if _, err := b2.Confine(&tool.Call{ID: "c", Cwd: "/cwd"}, []string{"bash", "-c", "true"}); err != nil || resumed.Len() != l.Len() {
		t.Fatalf("resume logged again (%d → %d): %v", l.Len(), resumed.Len(), err)
	}
}

func TestWriteFence(t *testing.T) {
	home, err := os.UserHomeDir()
	if err != nil {
		t.Skip("no home directory")
	}
	// The fake checker allows writes below the workspace only, refuses
	// everything in read-only, and records what it checked.
	var checked []string
	check := func(p sandbox.Policy, path string) error {
		checked = append(checked, path)
		if p.Mode == sandbox.ReadOnly || !strings.HasPrefix(path, p.Workspace+string(filepath.Separator)) {
			return &testDenied{path: path, mode: p.Mode}
		}
		return nil
	}
	mode := sandbox.WorkspaceWrite
	guard := WriteFence(check, func(c *tool.Call) sandbox.Policy { return sandbox.Policy{Mode: mode, Workspace: "/w"} })
	tests := []struct {
		name  string
		mode  sandbox.Mode
		tool  string
		args  string
		path  string // the path checked; "" = not checked
		denie bool
	}{
		{"write inside", sandbox.WorkspaceWrite, "write", `{"file_path":"src/a.go","content":""}`, "/w/src/a.go", false},
		{"write outside", sandbox.WorkspaceWrite, "write", `{"file_path":"/etc/passwd","content":""}`, "/etc/passwd", true},
		{"edit escaping with ..", sandbox.WorkspaceWrite, "edit", `{"file_path":"../x","old_string":"a","new_string":"b"}`, "/x", true},
		{"home path", sandbox.WorkspaceWrite, "write", `{"file_path":"~/.bashrc","content":""}`, filepath.Join(home, ".bashrc"), true},
		{"str_replace create outside", sandbox.WorkspaceWrite, "str_replace_based_edit_tool", `{"command":"create","path":"/etc/x","file_text":"x"}`, "/etc/x", true},
		{"str_replace view is a read", sandbox.WorkspaceWrite, "str_replace_based_edit_tool", `{"command":"view","path":"/etc/passwd"}`, "", false},
		{"read is not fenced", sandbox.WorkspaceWrite, "read", `{"file_path":"/etc/passwd"}`, "", false},
		{"read-only refuses the workspace too", sandbox.ReadOnly, "write", `{"file_path":"a.txt","content":""}`, "/w/a.txt", true},
		{"full access checks nothing", sandbox.DangerFullAccess, "write", `{"file_path":"/etc/passwd","content":""}`, "", false},
		{"missing path is left to the tool", sandbox.WorkspaceWrite, "write", `{"content":""}`, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checked, mode = nil, tt.mode
			reason := guard(&tool.Call{Name: tt.tool, Arguments: json.RawMessage(tt.args), Cwd: "/w"})
			if (tt.path == "") != (len(checked) == 0) || (tt.path != "" && checked[0] != tt.path) {
				t.Fatalf("checked %v, want %q", checked, tt.path)
			}
			if (reason != "") != tt.denie {
				t.Fatalf("reason %q", reason)
			}
			if tt.denie && (!strings.HasPrefix(reason, "[sandbox: file access denied — writing "+tt.path+" is not allowed in "+string(tt.mode)+" mode") ||
				!strings.Contains(reason, "make it with a bash command")) {
				t.Fatalf("reason %q", reason)
			}
		})
	}

	// Through a real pipeline the guard stops the tool.
	reg := tool.NewRegistry()
	ran := false
	if err := reg.Register("", tool.Definition{Name: "write", Parameters: json.RawMessage(`{"type":"object"}`),
		Execute: func(context.Context, *tool.Call) (tool.Result, error) { ran = true; return tool.Text("ok"), nil }}); err != nil {
		t.Fatal(err)
	}
	p := tool.NewPipeline(reg)
	mode = sandbox.WorkspaceWrite
	p.UseGuard(guard)
	r := p.Run(context.Background(), &tool.Call{ID: "w1", Name: "write", RawArguments: `{"file_path":"/etc/hosts","content":"x"}`, Cwd: "/w"})
	if ran || !r.IsError || r.Error.Code != tool.CodeDenied || !strings.Contains(r.Content[0].Text, "[sandbox: file access denied — writing /etc/hosts") {
		t.Fatalf("result %+v", r)
	}
}

// testDenied mimics sandbox.DeniedError's message.
type testDenied struct {
	path string
	mode sandbox.Mode
}

func (e *testDenied) Error() string {
	return fmt.Sprintf("sandbox: file access denied: %s (%s: outside the workspace)", e.path, e.mode)
}

// Config.Protected (the scripts trusted hooks run) reaches every call's
// policy, asked afresh each time, so the sandbox and the write fence keep
// them read-only, including a file trusted mid-session.
func TestProtectedReachesPolicy(t *testing.T) {
	l := newLog(t, "/cwd")
	if err := Select(l, PresetWorkspaceWrite, "test"); err != nil {
		t.Fatal(err)
	}
	protected := []string{"/cwd/.dsh/check.sh"}
	s, err := New(Config{Log: l, Workspace: "/cwd", Protected: func() []string { return protected }})
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Confiner.Policy(&tool.Call{Cwd: "/cwd"}).Protected; !slices.Equal(got, protected) {
		t.Fatalf("protected %q, want %q", got, protected)
	}
	protected = []string{"/cwd/.dsh/check.sh", "/cwd/scripts/lint.sh"}
	if got := s.Confiner.Policy(&tool.Call{Cwd: "/cwd"}).Protected; !slices.Equal(got, protected) {
		t.Fatalf("protected %q after a new trust, want %q", got, protected)
	}
	if got := (&BashConfiner{Log: l}).Policy(&tool.Call{Cwd: "/cwd"}).Protected; got != nil {
		t.Fatalf("no Protected configured gave %q", got)
	}
}
