package permission

import (
	"strings"
	"testing"

	"github.com/dsh-dev/dsh/internal/prompt"
	"github.com/dsh-dev/dsh/internal/sandbox"
	"github.com/dsh-dev/dsh/internal/session"
)

func newLog(t *testing.T, cwd string) *session.Log {
	t.Helper()
	l, err := session.NewLog(session.Header{ID: "sess-1", Cwd: cwd}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func mustAppend(t *testing.T, l *session.Log, typ string, data any) {
	t.Helper()
	if _, err := l.Append(typ, data); err != nil {
		t.Fatal(err)
	}
}

// types returns the event types of l from seq from on.
func types(l *session.Log, from int) []string {
	var out []string
	for _, e := range l.Events()[from:] {
		out = append(out, e.Type)
	}
	return out
}

func TestPresetTable(t *testing.T) {
	tests := []struct {
		knobs Knobs
		want  string
	}{
		{Knobs{sandbox.ReadOnly, ApprovalAsk}, PresetReadOnly},
		{Knobs{sandbox.WorkspaceWrite, ApprovalAsk}, PresetWorkspaceWrite}, // never auto: auto is an explicit choice
		{Knobs{sandbox.DangerFullAccess, ApprovalNever}, PresetFullAccess},
		{Knobs{sandbox.ReadOnly, ApprovalNever}, PresetCustom},
		{Knobs{sandbox.WorkspaceWrite, ApprovalNever}, PresetCustom},
		{Knobs{sandbox.DangerFullAccess, ApprovalAsk}, PresetCustom},
	}
	for _, tt := range tests {
		if got := PresetFor(tt.knobs); got != tt.want {
			t.Errorf("PresetFor(%v) = %s, want %s", tt.knobs, got, tt.want)
		}
	}
	lookups := []struct {
		name, want string
		ok         bool
		knobs      Knobs
	}{
		{"read-only", PresetReadOnly, true, Knobs{sandbox.ReadOnly, ApprovalAsk}},
		{"workspace-write", PresetWorkspaceWrite, true, Knobs{sandbox.WorkspaceWrite, ApprovalAsk}},
		{"auto", PresetAuto, true, Knobs{sandbox.WorkspaceWrite, ApprovalAsk}},
		{"full-access", PresetFullAccess, true, Knobs{sandbox.DangerFullAccess, ApprovalNever}},
		{"danger-full-access", PresetFullAccess, true, Knobs{sandbox.DangerFullAccess, ApprovalNever}},
		{"custom", "", false, Knobs{}},
		{"yolo", "", false, Knobs{}},
	}
	for _, tt := range lookups {
		p, ok := LookupPreset(tt.name)
		if ok != tt.ok || p.Name != tt.want || p.Knobs != tt.knobs {
			t.Errorf("LookupPreset(%s) = %+v, %v", tt.name, p, ok)
		}
	}
	if p, _ := LookupPreset(PresetAuto); !p.AutoReview {
		t.Error("auto must hand asks to the reviewer")
	}
}

func TestCurrent(t *testing.T) {
	type ev struct {
		typ  string
		data any
	}
	mode := func(m sandbox.Mode) ev { return ev{session.TypeSandboxMode, SandboxMode{Mode: m}} }
	policy := func(p string) ev { return ev{session.TypeApprovalPolicy, ApprovalPolicy{Policy: p}} }
	preset := func(p string) ev { return ev{session.TypePermissionPreset, PresetSelected{Preset: p}} }
	tests := []struct {
		name   string
		def    string
		events []ev
		want   State
	}{
		{"empty log, built-in default", "", nil, State{PresetWorkspaceWrite, sandbox.WorkspaceWrite, ApprovalAsk}},
		{"empty log, configured default", PresetReadOnly, nil, State{PresetReadOnly, sandbox.ReadOnly, ApprovalAsk}},
		{"configured default auto", PresetAuto, nil, State{PresetAuto, sandbox.WorkspaceWrite, ApprovalAsk}},
		{"configured default full access by its old key", "danger-full-access", nil, State{PresetFullAccess, sandbox.DangerFullAccess, ApprovalNever}},
		{"unknown default falls back", "bogus", nil, State{PresetWorkspaceWrite, sandbox.WorkspaceWrite, ApprovalAsk}},
		{"mode event only", "", []ev{mode(sandbox.ReadOnly)}, State{PresetReadOnly, sandbox.ReadOnly, ApprovalAsk}},
		{"last event wins", "", []ev{mode(sandbox.ReadOnly), mode(sandbox.DangerFullAccess), policy(ApprovalNever)},
			State{PresetFullAccess, sandbox.DangerFullAccess, ApprovalNever}},
		{"knobs matching nothing are custom", "", []ev{policy(ApprovalNever)}, State{PresetCustom, sandbox.WorkspaceWrite, ApprovalNever}},
		{"auto is kept while its knobs hold", "", []ev{preset(PresetAuto), mode(sandbox.WorkspaceWrite), policy(ApprovalAsk)},
			State{PresetAuto, sandbox.WorkspaceWrite, ApprovalAsk}},
		{"auto lost when a knob moves", "", []ev{preset(PresetAuto), mode(sandbox.ReadOnly)}, State{PresetReadOnly, sandbox.ReadOnly, ApprovalAsk}},
		{"preset overridden to custom", "", []ev{preset(PresetFullAccess), mode(sandbox.DangerFullAccess), policy(ApprovalNever), policy(ApprovalAsk)},
			State{PresetCustom, sandbox.DangerFullAccess, ApprovalAsk}},
		{"invalid knob events are skipped", "", []ev{mode(sandbox.ReadOnly), mode("nonsense"), policy("sometimes")},
			State{PresetReadOnly, sandbox.ReadOnly, ApprovalAsk}},
		{"default knobs with a default auto but workspace-write selected", PresetAuto, []ev{preset(PresetWorkspaceWrite)},
			State{PresetWorkspaceWrite, sandbox.WorkspaceWrite, ApprovalAsk}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := newLog(t, t.TempDir())
			for _, e := range tt.events {
				mustAppend(t, l, e.typ, e.data)
			}
			if got := (Defaults{Preset: tt.def}).Current(l); got != tt.want {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
		})
	}
	if got := Current(newLog(t, "/")); got.Preset != PresetWorkspaceWrite {
		t.Fatalf("package Current: %+v", got)
	}
}

func TestSelectLogsOnlyChanges(t *testing.T) {
	l := newLog(t, t.TempDir())
	steps := []struct {
		preset string
		want   []string
		state  State
	}{
		// A fresh log pins both knobs even though they equal the default.
		{PresetWorkspaceWrite, []string{session.TypePermissionPreset, session.TypeSandboxMode, session.TypeApprovalPolicy},
			State{PresetWorkspaceWrite, sandbox.WorkspaceWrite, ApprovalAsk}},
		{PresetAuto, []string{session.TypePermissionPreset}, State{PresetAuto, sandbox.WorkspaceWrite, ApprovalAsk}},
		{PresetReadOnly, []string{session.TypePermissionPreset, session.TypeSandboxMode}, State{PresetReadOnly, sandbox.ReadOnly, ApprovalAsk}},
		{PresetReadOnly, []string{session.TypePermissionPreset}, State{PresetReadOnly, sandbox.ReadOnly, ApprovalAsk}},
		{"danger-full-access", []string{session.TypePermissionPreset, session.TypeSandboxMode, session.TypeApprovalPolicy},
			State{PresetFullAccess, sandbox.DangerFullAccess, ApprovalNever}},
		{PresetWorkspaceWrite, []string{session.TypePermissionPreset, session.TypeSandboxMode, session.TypeApprovalPolicy},
			State{PresetWorkspaceWrite, sandbox.WorkspaceWrite, ApprovalAsk}},
	}
	for _, s := range steps {
		from := l.Len()
		if err := Select(l, s.preset, "user"); err != nil {
			t.Fatal(err)
		}
		if got := types(l, from); strings.Join(got, ",") != strings.Join(s.want, ",") {
			t.Fatalf("select %s logged %v, want %v", s.preset, got, s.want)
		}
		if got := Current(l); got != s.state {
			t.Fatalf("after %s: %+v, want %+v", s.preset, got, s.state)
		}
	}
	var p PresetSelected
	if err := l.Events()[l.Len()-3].Decode(&p); err != nil || p.Preset != PresetWorkspaceWrite || p.Source != "user" {
		t.Fatalf("preset event %+v %v", p, err)
	}
	// The canonical name is logged for an alias.
	for _, e := range l.Events() {
		if e.Type == session.TypePermissionPreset && strings.Contains(string(e.Data), "danger-full-access") {
			t.Fatalf("alias logged: %s", e.Data)
		}
	}
	for _, bad := range []string{"custom", "nope", ""} {
		from := l.Len()
		if err := Select(l, bad, "user"); err == nil || !strings.Contains(err.Error(), "read-only, workspace-write, auto, full-access") || l.Len() != from {
			t.Fatalf("Select(%q) = %v, logged %d events", bad, err, l.Len()-from)
		}
	}
}

func TestRuntimeSections(t *testing.T) {
	st := State{PresetWorkspaceWrite, sandbox.WorkspaceWrite, ApprovalAsk}
	human := true
	secs := RuntimeSections(RuntimeOptions{
		State: func() State { return st }, Workspace: "/work/proj", WritableRoots: []string{"/tmp/x"}, UnixSockets: []string{"/run/agent.sock"},
		Human: func() bool { return human }, Reviewer: true,
	})
	var r prompt.Runtime
	for _, s := range secs {
		r.Add(s)
	}
	render := func() map[string]string {
		_, named, ok := r.Snapshot()
		if !ok {
			t.Fatal("no snapshot")
		}
		out := map[string]string{}
		for _, n := range named {
			out[n.Name] = n.Text
		}
		return out
	}
	tests := []struct {
		name          string
		state         State
		human         bool
		sandboxWant   []string
		sandboxNot    []string
		approvalWant  []string
		approvalNotIn []string
	}{
		{"workspace-write with a human", st, true,
			[]string{"Sandbox mode: workspace-write", "only inside the workspace /work/proj and in /tmp/x", "Network access is off", "`danger-full-access`", "`network`", "justification", "File tools cannot escalate",
				"UNIX socket outside these directories and $TMPDIR", "except /run/agent.sock, which the profile allows"},
			[]string{"`workspace-write` (to write"},
			[]string{"Approval policy: ask", "shown to the user"}, nil},
		{"read-only without a human", State{PresetReadOnly, sandbox.ReadOnly, ApprovalAsk}, false,
			[]string{"Sandbox mode: read-only", "write nowhere", "Network access is off", "`workspace-write` (to write in the workspace)",
				"UNIX socket outside the workspace and $TMPDIR", "except /run/agent.sock"},
			[]string{"/work/proj"},
			[]string{"No one is available", "denied"}, []string{"shown to the user"}},
		{"full access", State{PresetFullAccess, sandbox.DangerFullAccess, ApprovalNever}, true,
			[]string{"Sandbox mode: danger-full-access", "Nothing is confined", "nothing to escalate"},
			[]string{"sandbox_permissions", "UNIX socket"},
			[]string{"Approval policy: never", "denied at once"}, []string{"shown to the user"}},
		{"auto with a human", State{PresetAuto, sandbox.WorkspaceWrite, ApprovalAsk}, true, nil, nil,
			[]string{"auto review", "low-risk calls are allowed once", "medium-risk calls are shown to the user"}, nil},
		{"auto headless", State{PresetAuto, sandbox.WorkspaceWrite, ApprovalAsk}, false, nil, nil,
			[]string{"auto review", "high- and medium-risk calls are refused"}, []string{"shown to the user"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st, human = tt.state, tt.human
			got := render()
			check := func(sec string, want, not []string) {
				for _, w := range want {
					if !strings.Contains(got[sec], w) {
						t.Errorf("%s lacks %q:\n%s", sec, w, got[sec])
					}
				}
				for _, n := range not {
					if strings.Contains(got[sec], n) {
						t.Errorf("%s has %q:\n%s", sec, n, got[sec])
					}
				}
			}
			check(SectionSandbox, tt.sandboxWant, tt.sandboxNot)
			check(SectionApproval, tt.approvalWant, tt.approvalNotIn)
		})
	}
}
