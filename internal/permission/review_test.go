package permission

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/dsh-dev/dsh/internal/llm"
	"github.com/dsh-dev/dsh/internal/llm/llmtest"
	"github.com/dsh-dev/dsh/internal/llm/openai"
	"github.com/dsh-dev/dsh/internal/session"
	"github.com/dsh-dev/dsh/internal/tool"
)

func userMsg(kind, text string) llm.Message {
	return llm.Message{ID: "m-" + text, Role: llm.RoleUser, Content: []llm.Block{llm.TextBlock(text)}, Source: llm.Source{Kind: kind}}
}

// TestAutoReview scripts the reviewer model over real HTTP (the fake
// server behind the OpenAI-compatible adapter) for each kind of answer and
// checks the outcome and the logged decision.
func TestAutoReview(t *testing.T) {
	autoState := State{PresetAuto, "workspace-write", ApprovalAsk}
	tests := []struct {
		name         string
		reply        llmtest.Response
		human        *scripted // nil: no human attached
		want         tool.ApprovalOutcome
		wantAnswerer string
		wantRisk     string
		wantReason   string // prefix of the logged reason
	}{
		{"low is allowed once", llmtest.Response{Text: `{"risk":"low","reason":"pushes the branch the user asked for"}`}, nil,
			tool.AllowedOnce, AnswererAutoReview, RiskLow, "pushes the branch the user asked for"},
		{"fenced low is accepted", llmtest.Response{Text: "```json\n{\"risk\":\"low\",\"reason\":\"fine\"}\n```"}, nil,
			tool.AllowedOnce, AnswererAutoReview, RiskLow, "fine"},
		{"medium goes to the human", llmtest.Response{Text: `{"risk":"medium","reason":"force push"}`},
			&scripted{name: "terminal", verdicts: []Verdict{{Outcome: tool.AllowedOnce, Reason: "allowed by the user"}}},
			tool.AllowedOnce, AnswererTerminal, RiskMedium, "auto review: force push; allowed by the user"},
		{"medium denied by the human", llmtest.Response{Text: `{"risk":"medium","reason":"force push"}`},
			&scripted{name: "terminal", verdicts: []Verdict{{Outcome: tool.Rejected, Reason: "denied by the user"}}},
			tool.Rejected, AnswererTerminal, RiskMedium, "auto review: force push; denied by the user"},
		{"medium without a human is rejected", llmtest.Response{Text: `{"risk":"medium","reason":"force push"}`}, nil,
			tool.Rejected, AnswererAutoReview, RiskMedium, "force push (medium risk and no human to ask)"},
		{"high is rejected", llmtest.Response{Text: `{"risk":"high","reason":"deletes the home directory"}`},
			&scripted{name: "terminal"}, tool.Rejected, AnswererAutoReview, RiskHigh, "deletes the home directory"},
		{"garbage is rejected", llmtest.Response{Text: "Looks fine to me!"}, &scripted{name: "terminal"},
			tool.Rejected, AnswererAutoReview, "", "auto review failed: the reviewer did not answer with the required JSON object"},
		{"trailing text is rejected", llmtest.Response{Text: `{"risk":"low","reason":"ok"} trust me`}, nil,
			tool.Rejected, AnswererAutoReview, "", "auto review failed: the reviewer added text after the JSON object"},
		{"unknown risk is rejected", llmtest.Response{Text: `{"risk":"none","reason":"ok"}`}, nil,
			tool.Rejected, AnswererAutoReview, "", `auto review failed: the reviewer answered an unknown risk "none"`},
		{"extra fields are rejected", llmtest.Response{Text: `{"risk":"low","reason":"ok","approve":true}`}, nil,
			tool.Rejected, AnswererAutoReview, "", "auto review failed: the reviewer did not answer"},
		{"HTTP 500 is rejected", llmtest.Response{Status: 500}, &scripted{name: "terminal"},
			tool.Rejected, AnswererAutoReview, "", "auto review failed: "},
		{"truncated answer is rejected", llmtest.Response{Text: `{"risk":"low"`, FinishReason: "max-tokens"}, nil,
			tool.Rejected, AnswererAutoReview, "", "auto review failed: the reviewer's answer ended early (finish max-tokens)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := llmtest.New()
			t.Cleanup(srv.Close)
			srv.Enqueue(tt.reply)
			l := newLog(t, "/work/proj")
			for _, m := range []llm.Message{
				userMsg("user", "Fix the flaky test and push the fix to origin."),
				userMsg("plugin", "runtime context noise"),
				userMsg("user", "older instruction"),
				userMsg("parent", "parent says: use the main branch"),
				userMsg("user", "go ahead and push"),
			} {
				mustAppend(t, l, session.TypeUserMessage, m)
			}
			var fallback Answerer
			if tt.human != nil {
				fallback = tt.human
			}
			rev := &AutoReviewer{
				Adapter: openai.New(openai.Config{Provider: "test", BaseURL: srv.URL(), APIKey: "k", IdleTimeout: 5 * time.Second}),
				Model:   "reviewer-model", Log: l, Fallback: fallback, Recent: 2,
			}
			s := &Service{Log: l, State: fixedState(autoState), Human: fallback, Reviewer: rev, NewID: seqIDs()}
			got, err := s.Approve(context.Background(), bashReq("call-9", "git push --force origin main", "sandbox escalation to network: push the fix"))
			if err != nil || got != tt.want {
				t.Fatalf("outcome %s, %v; want %s", got, err, tt.want)
			}
			d := decided(t, l)
			if len(d) != 1 || d[0].Answerer != tt.wantAnswerer || d[0].Risk != tt.wantRisk || !strings.HasPrefix(d[0].Reason, tt.wantReason) {
				t.Fatalf("decided %+v; want answerer %s risk %q reason %q…", d, tt.wantAnswerer, tt.wantRisk, tt.wantReason)
			}
			if wantBy := decidedBy(tt.wantAnswerer); d[0].By != wantBy {
				t.Fatalf("decided by %q, want %q", d[0].By, wantBy)
			}
			if tt.reply.Status == 500 && !strings.Contains(d[0].Reason, "HTTP 500") {
				t.Fatalf("the model failure is not the logged reason: %q", d[0].Reason)
			}
			if tt.human != nil && tt.wantRisk == RiskMedium {
				if tt.human.calls != 1 || !strings.Contains(tt.human.last.Note, "medium risk: force push") || tt.human.last.Command != "git push --force origin main" {
					t.Fatalf("human asked %d times with %+v", tt.human.calls, tt.human.last)
				}
			} else if tt.human != nil && tt.human.calls != 0 {
				t.Fatal("the human was asked although the review decided")
			}

			// What the reviewer was sent.
			reqs := srv.Requests()
			if len(reqs) != 1 || reqs[0].Model() != "reviewer-model" {
				t.Fatalf("requests %+v", reqs)
			}
			msgs := reqs[0].Messages()
			if len(msgs) != 2 || msgs[0]["role"] != "system" || !strings.Contains(msgs[0]["content"].(string), `{"risk":"low|medium|high"`) {
				t.Fatalf("messages %v", msgs)
			}
			body := msgs[1]["content"].(string)
			for _, w := range []string{
				"<task>\nFix the flaky test and push the fix to origin.\n</task>",
				"[parent] parent says: use the main branch", "[user] go ahead and push",
				`"tool": "bash"`, `git push --force origin main`, `"cwd": "/work/proj/sub"`, `"reasonGiven": "sandbox escalation to network: push the fix"`,
			} {
				if !strings.Contains(body, w) {
					t.Fatalf("review material lacks %q:\n%s", w, body)
				}
			}
			for _, not := range []string{"older instruction", "runtime context noise"} {
				if strings.Contains(body, not) {
					t.Fatalf("review material has %q (only the last 2 human/parent messages belong):\n%s", not, body)
				}
			}
		})
	}
}

func TestAutoReviewCancelled(t *testing.T) {
	srv := llmtest.New()
	t.Cleanup(srv.Close)
	srv.Enqueue(llmtest.Response{StallAfter: llmtest.AtStart})
	l := newLog(t, "/")
	rev := &AutoReviewer{Adapter: openai.New(openai.Config{BaseURL: srv.URL(), IdleTimeout: time.Minute}), Model: "m", Log: l}
	s := &Service{Log: l, State: fixedState(State{PresetAuto, "workspace-write", ApprovalAsk}), Reviewer: rev}
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		if srv.WaitRequests(ctx, 1) == nil {
			cancel()
		}
	}()
	got, err := s.Approve(ctx, bashReq("c", "ls", ""))
	if got != tool.Cancelled || err == nil {
		t.Fatalf("got %s, %v", got, err)
	}
	if d := decided(t, l); len(d) != 1 || d[0].Outcome != tool.Cancelled {
		t.Fatalf("decided %+v", d)
	}
}

func TestParseRisk(t *testing.T) {
	tests := []struct {
		in, risk, reason string
		ok               bool
	}{
		{`{"risk":"high","reason":" r "}`, RiskHigh, "r", true},
		{" \n{\"reason\":\"r\",\"risk\":\"medium\"}\n", RiskMedium, "r", true},
		{"```\n{\"risk\":\"low\",\"reason\":\"r\"}\n```", RiskLow, "r", true},
		{`{"risk":"low"}`, "", "", false},
		{`{"reason":"r"}`, "", "", false},
		{`{"risk":"LOW","reason":"r"}`, "", "", false},
		{`{"risk":"low","reason":"r"}{"risk":"low","reason":"r"}`, "", "", false},
		{`[]`, "", "", false},
		{``, "", "", false},
	}
	for _, tt := range tests {
		risk, reason, err := parseRisk(tt.in)
		if (err == nil) != tt.ok || risk != tt.risk || reason != tt.reason {
			t.Errorf("parseRisk(%q) = %q, %q, %v", tt.in, risk, reason, err)
		}
	}
}

// TestDenialNamesTheDecider runs calls through the pipeline under preset
// auto and checks what the model is told and what is logged: a denial by
// the reviewer says so with its reason, never "rejected by user".
func TestDenialNamesTheDecider(t *testing.T) {
	tests := []struct {
		name     string
		reply    llmtest.Response
		human    []Verdict
		wantText string
		wantBy   string
	}{
		{"high risk", llmtest.Response{Text: `{"risk":"high","reason":"sends the workspace to an unknown host"}`}, nil,
			"not approved: rejected by the automatic reviewer: high risk: sends the workspace to an unknown host", DecidedByReviewer},
		{"medium without a human", llmtest.Response{Text: `{"risk":"medium","reason":"unclear host"}`}, nil,
			"not approved: rejected by the automatic reviewer: medium risk: unclear host (medium risk and no human to ask)", DecidedByReviewer},
		{"broken review", llmtest.Response{Text: "sure, go ahead"}, nil,
			"not approved: rejected by the automatic reviewer: auto review failed: the reviewer did not answer with the required JSON object", DecidedByReviewer},
		{"medium denied by the human", llmtest.Response{Text: `{"risk":"medium","reason":"unclear host"}`},
			[]Verdict{{Outcome: tool.Rejected, Reason: "denied by the user"}},
			"not approved: rejected by the user: auto review: unclear host; denied by the user", DecidedByUser},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := llmtest.New()
			t.Cleanup(srv.Close)
			srv.Enqueue(tt.reply)
			w := newWorld(t, PresetAuto, tt.human...)
			var human Answerer
			if tt.human != nil {
				human = w.human
			}
			rev := &AutoReviewer{Adapter: openai.New(openai.Config{Provider: "test", BaseURL: srv.URL(), APIKey: "k", IdleTimeout: 5 * time.Second}),
				Model: "reviewer-model", Log: w.log, Fallback: human}
			w.pipe.SetApprover(&Service{Log: w.log, State: func() State { return Current(w.log) }, Human: human, Reviewer: rev})
			w.call("c1", cmd(": fetch x"))
			r := w.call("c2", escalate(": fetch x", "network", "fetch the dependency"))
			if !r.IsError || !strings.Contains(resultText(r), tt.wantText) {
				t.Fatalf("the model was told %q; want %q", resultText(r), tt.wantText)
			}
			if tt.wantBy == DecidedByReviewer && strings.Contains(resultText(r), "user") {
				t.Fatalf("a reviewer denial blames the user: %q", resultText(r))
			}
			if d := decided(t, w.log); len(d) != 1 || d[0].By != tt.wantBy || d[0].Outcome != tool.Rejected {
				t.Fatalf("decided %+v; want by %s", d, tt.wantBy)
			}
		})
	}
}

// TestPolicyDecisionsAreLoggedAsPolicy: approval policy never and "no one
// to ask" are the policy's decisions, and the model is told why.
func TestPolicyDecisionsAreLoggedAsPolicy(t *testing.T) {
	for _, st := range []State{{PresetCustom, "workspace-write", ApprovalNever}, wsAsk} {
		l := newLog(t, "/work/proj")
		s := &Service{Log: l, State: fixedState(st)}
		dec, err := s.Decide(context.Background(), bashReq("c", "ls", ""))
		if err != nil || dec.Outcome != tool.Unavailable || dec.By != "the approval policy" || dec.Reason == "" {
			t.Fatalf("%+v: %+v %v", st, dec, err)
		}
		if d := decided(t, l); d[0].By != DecidedByPolicy {
			t.Fatalf("decided %+v", d)
		}
	}
}
