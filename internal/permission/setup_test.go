package permission

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/dsh-dev/dsh/internal/prompt"
	"github.com/dsh-dev/dsh/internal/sandbox"
	"github.com/dsh-dev/dsh/internal/tool"
	"github.com/dsh-dev/dsh/internal/tools/bash"
)

func TestNewAndInstall(t *testing.T) {
	if _, err := New(Config{Log: newLog(t, "/"), Rules: []Rule{{Tool: "bash", Action: "perhaps"}}}); err == nil {
		t.Fatal("invalid rules accepted")
	}
	dir := t.TempDir()
	l := newLog(t, dir)
	human := &scripted{name: AnswererTerminal, verdicts: []Verdict{{Outcome: tool.AllowedOnce}}}
	deny := func(p sandbox.Policy, path string) error {
		if !strings.HasPrefix(path, p.Workspace+"/") {
			return errors.New("sandbox: file access denied: outside")
		}
		return nil
	}
	s, err := New(Config{
		Log: l, Sandbox: &fakeBox{}, CheckWrite: deny, Human: human,
		Rules:    []Rule{{Tool: "bash", CommandPrefix: "git push", Action: ActionDeny, Reason: "no pushing"}, {Tool: "bash", CommandPrefix: "make", Action: ActionAsk}},
		Reviewer: &AutoReviewer{Model: "m"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if rev := s.Approvals.Reviewer.(*AutoReviewer); rev.Log != l || rev.Fallback != human {
		t.Fatalf("reviewer not completed: %+v", rev)
	}

	reg := tool.NewRegistry()
	ran := 0
	for _, def := range []tool.Definition{
		bash.New(bash.Options{Confine: s.Confiner.Confine}),
		{Name: "write", Parameters: json.RawMessage(`{"type":"object"}`),
			Execute: func(context.Context, *tool.Call) (tool.Result, error) { ran++; return tool.Text("ok"), nil }},
	} {
		if err := reg.Register("", def); err != nil {
			t.Fatal(err)
		}
	}
	p := tool.NewPipeline(reg)
	var rt prompt.Runtime
	s.Install(p, &rt)

	_, secs, _ := rt.Snapshot()
	if len(secs) != 2 || secs[0].Name != SectionSandbox || !strings.Contains(secs[0].Text, "workspace "+dir) || !strings.Contains(secs[1].Text, "shown to the user") {
		t.Fatalf("runtime sections %+v", secs)
	}
	run := func(name, args string) tool.Result {
		return p.Run(context.Background(), &tool.Call{ID: "c-" + name, Name: name, RawArguments: args, Cwd: dir})
	}
	if r := run("bash", `{"command":"git push"}`); r.Error == nil || r.Error.Code != CodePermissionDenied {
		t.Fatalf("rule not installed: %+v", r)
	}
	if r := run("bash", `{"command":"make -v >/dev/null; echo built"}`); r.IsError || human.calls != 1 || human.last.Reason != "bash commands starting with `make` need approval by a permission rule" {
		t.Fatalf("ask rule: %+v, human %d %+v", r, human.calls, human.last)
	}
	if r := run("write", `{"file_path":"/etc/x","content":""}`); !r.IsError || ran != 0 || !strings.Contains(r.Content[0].Text, "[sandbox: file access denied") {
		t.Fatalf("fence not installed: %+v", r)
	}
	if r := run("write", `{"file_path":"ok.txt","content":""}`); r.IsError || ran != 1 {
		t.Fatalf("fence refused the workspace: %+v", r)
	}
	if r := run("bash", `{"command":"touch x","sandbox_permissions":"danger-full-access","justification":"j"}`); r.Error == nil || r.Error.Code != CodeEscalationRefused {
		t.Fatalf("escalation check not installed: %+v", r)
	}
}
