package prompt

import (
	"errors"
	"strings"
	"testing"

	"github.com/dsh-dev/dsh/internal/llm"
	"github.com/dsh-dev/dsh/internal/session"
)

func TestRender(t *testing.T) {
	a := NewAssembler()
	for _, s := range []Section{
		{Name: "identity", Order: -100, Text: "You are dsh."},
		{Name: "persona", Order: 0, Text: "Model {{model}} in {{ cwd }}."},
		{Name: "tool:bash", Order: 100, Text: "Check {{exit}} markers.", Literal: true},
		{Name: "persona", Scope: "reviewer", Order: 0, Text: "You review code in {{cwd}}."},
		{Name: "minimal", Scope: "minimal", Order: 5, Text: "Only this.", Complete: true},
	} {
		if err := a.Add(s); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.Add(Section{Name: "identity", Text: "dup"}); err == nil {
		t.Error("duplicate section accepted")
	}
	vars := map[string]string{"model": "m", "cwd": "/w"}
	for _, tc := range []struct{ scope, want string }{
		{"", "You are dsh.\n\nModel m in /w.\n\nCheck {{exit}} markers."},
		{"reviewer", "You are dsh.\n\nYou review code in /w.\n\nCheck {{exit}} markers."},
		{"minimal", "Only this."},
	} {
		got, err := a.Render(tc.scope, vars)
		if err != nil || got != tc.want {
			t.Errorf("Render(%q) = %q, %v\nwant %q", tc.scope, got, err, tc.want)
		}
	}
	_, err := a.Render("", map[string]string{"model": "m"})
	var uv *UnknownVariableError
	if !errors.As(err, &uv) || uv.Name != "cwd" || !strings.Contains(err.Error(), "persona") {
		t.Errorf("missing variable error = %v", err)
	}
}

func TestRuntimeSnapshotOnlyWhenChanged(t *testing.T) {
	log, _ := session.NewLog(session.Header{ID: "s"}, nil, nil)
	mode := "workspace-write"
	var r Runtime
	r.Add(RuntimeSection{Name: "sandbox:policy", Order: 1, Render: func() string { return "Sandbox: " + mode }})
	r.Add(RuntimeSection{Name: "empty", Order: 0, Render: func() string { return "" }})
	n := 0
	id := func() string { n++; return "id" }
	msg, ok := r.Message(log, id)
	if !ok || !strings.HasPrefix(msg.Text(), runtimeHeading) || len(msg.Source.Sections) != 1 || msg.Source.Sections[0].Name != "sandbox:policy" {
		t.Fatalf("first snapshot = %+v %v", msg, ok)
	}
	if _, err := log.Append(session.TypeUserMessage, msg, session.Surface()); err != nil {
		t.Fatal(err)
	}
	if _, ok := r.Message(log, id); ok {
		t.Error("unchanged snapshot entered again")
	}
	mode = "read-only"
	msg2, ok := r.Message(log, id)
	if !ok || !strings.Contains(msg2.Text(), "read-only") {
		t.Fatalf("changed snapshot = %+v %v", msg2, ok)
	}
	// A snapshot shadowed by compaction must be entered again.
	if _, err := log.Append(session.TypeUserMessage, llm.Message{ID: "sum", Role: llm.RoleUser, Content: []llm.Block{llm.TextBlock("summary")}, Source: llm.Source{Kind: "plugin", Plugin: "compaction"}}, func(e *session.Event) {
		e.SurfaceOp = &session.SurfaceOp{Replace: true, Start: 0, End: 0}
	}); err != nil {
		t.Fatal(err)
	}
	mode = "workspace-write"
	if _, ok := r.Message(log, id); !ok {
		t.Error("snapshot not re-entered after compaction shadowed it")
	}
	var empty Runtime
	if _, ok := empty.Message(log, id); ok {
		t.Error("empty runtime produced a snapshot")
	}
}
