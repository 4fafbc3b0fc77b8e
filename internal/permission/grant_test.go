package permission

import (
	"context"
	"strings"
	"testing"

	"github.com/dsh-dev/dsh/internal/session"
	"github.com/dsh-dev/dsh/internal/tool"
)

// TestSessionGrant: "allow this exact command for the rest of the session"
// is logged with the decision, answers later questions about the exact
// same command without asking, and nothing else.
func TestSessionGrant(t *testing.T) {
	const touch = "touch out.txt"
	w := newWorld(t, PresetReadOnly,
		Verdict{Outcome: tool.AllowedOnce, ForSession: true, Reason: "allowed by the user for the rest of the session"},
		Verdict{Outcome: tool.Rejected, Reason: "denied by the user"})

	w.call("c1", cmd(touch)) // refused by the sandbox
	if r := w.call("c2", escalate(touch, "workspace-write", "write the fix")); r.IsError {
		t.Fatalf("first escalation: %q", resultText(r))
	}
	d := decided(t, w.log)
	want := SessionGrant{ToolName: "bash", Command: touch, Cwd: w.dir, SandboxPermissions: "workspace-write"}
	if len(d) != 1 || d[0].Grant == nil || *d[0].Grant != want || d[0].By != DecidedByUser || d[0].Answerer != AnswererTerminal {
		t.Fatalf("decided %+v", d)
	}

	// The grant answers the approval; the sandbox still refuses the plain
	// run, and the escalation rules (a fresh denial first) still apply.
	if r := w.call("c3", cmd(touch)); !resultMeta(t, r).SandboxDenied {
		t.Fatalf("a plain run was widened: %q", resultText(r))
	}
	if r := w.call("c4", escalate(touch, "workspace-write", "again")); r.IsError {
		t.Fatalf("granted escalation: %q", resultText(r))
	}
	if w.human.calls != 1 {
		t.Fatalf("the human was asked %d times; the grant should have answered", w.human.calls)
	}
	d = decided(t, w.log)
	if g := d[1]; g.Outcome != tool.AllowedOnce || g.Answerer != AnswererSessionGrant || g.By != DecidedByUser ||
		g.Grant != nil || !strings.Contains(g.Reason, "approval "+d[0].ID) {
		t.Fatalf("granted decision %+v", g)
	}

	// A different escalation of the same command is asked again.
	w.call("c5", cmd(touch))
	r := w.call("c6", escalate(touch, "danger-full-access", "more"))
	if !r.IsError || w.human.calls != 2 || !strings.Contains(resultText(r), "not approved: rejected by the user") {
		t.Fatalf("wider escalation: calls %d %q", w.human.calls, resultText(r))
	}
	if n := len(SessionGrants(w.log)); n != 1 {
		t.Fatalf("%d grants", n)
	}

	// Resume: a new service over the reloaded events honours the grant.
	resumed, err := session.NewLog(w.log.Header(), w.log.Events(), nil)
	if err != nil {
		t.Fatal(err)
	}
	nobody := &scripted{name: AnswererTerminal}
	s := &Service{Log: resumed, State: func() State { return Current(resumed) }, Human: nobody}
	req := tool.ApprovalRequest{CallID: "c7", ToolName: "bash", Cwd: w.dir,
		Arguments: []byte(`{"command":"touch out.txt","sandbox_permissions":"workspace-write","justification":"x"}`)}
	if dec, err := s.Decide(context.Background(), req); err != nil || dec.Outcome != tool.AllowedOnce || nobody.calls != 0 {
		t.Fatalf("after resume: %+v %v (asked %d)", dec, err, nobody.calls)
	}
	// Not the same bytes: asked (and the scripted human has no answer
	// left, so it fails closed).
	nobody.err = context.DeadlineExceeded
	req.Arguments = []byte(`{"command":"touch out.txt ","sandbox_permissions":"workspace-write","justification":"x"}`)
	if dec, _ := s.Decide(context.Background(), req); dec.Outcome == tool.AllowedOnce || nobody.calls != 1 {
		t.Fatalf("a near-identical command was granted: %+v", dec)
	}
}

// TestSessionGrantOnlyFromTheUser: a grant asked for by the reviewer, for
// a non-bash call, or on a denial is not recorded, and a logged grant that
// did not come from the user is not honoured.
func TestSessionGrantOnlyFromTheUser(t *testing.T) {
	l := newLog(t, "/work/proj")
	reviewer := &scripted{name: AnswererAutoReview, verdicts: []Verdict{{Outcome: tool.AllowedOnce, ForSession: true}}}
	human := &scripted{name: AnswererTerminal, verdicts: []Verdict{
		{Outcome: tool.AllowedOnce, ForSession: true}, // write: not a command
		{Outcome: tool.Rejected, ForSession: true},
	}}
	auto := &Service{Log: l, State: fixedState(State{PresetAuto, "workspace-write", ApprovalAsk}), Human: human, Reviewer: reviewer}
	if _, err := auto.Decide(context.Background(), bashReq("c1", "make deploy", "")); err != nil {
		t.Fatal(err)
	}
	s := &Service{Log: l, State: fixedState(wsAsk), Human: human}
	if _, err := s.Decide(context.Background(), tool.ApprovalRequest{CallID: "c2", ToolName: "write", Arguments: []byte(`{"file_path":"x"}`)}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Decide(context.Background(), bashReq("c3", "make deploy", "")); err != nil {
		t.Fatal(err)
	}
	for _, d := range decided(t, l) {
		if d.Grant != nil {
			t.Fatalf("grant recorded: %+v", d)
		}
	}
	// A forged grant claiming the reviewer gave it.
	mustAppend(t, l, session.TypeApprovalDecided, ApprovalDecided{ID: "x", Outcome: tool.AllowedOnce, Answerer: AnswererAutoReview, By: DecidedByReviewer,
		Grant: &SessionGrant{ToolName: "bash", Command: "make deploy", Cwd: "/work/proj/sub"}})
	if g := SessionGrants(l); len(g) != 0 {
		t.Fatalf("grants %+v", g)
	}
}
