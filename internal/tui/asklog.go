package tui

import (
	"strings"

	"github.com/dsh-dev/dsh/internal/session"
)

// The log events of questions and plan mode (docs/api.md: question/ask,
// question/answer, plan/mode), decoded by their JSON names so the UI
// reads what any build logged.
const (
	typeQuestionAsk    = "question/ask"
	typeQuestionAnswer = "question/answer"
	typePlanMode       = "plan/mode"
)

// The two tools that wait for a person.
const (
	toolAskUser  = "ask_user_question"
	toolExitPlan = "exit_plan_mode"
)

// questionAsked is a question/ask payload.
type questionAsked struct {
	QuestionID string `json:"questionId"`
	CallID     string `json:"callId"`
	Kind       string `json:"kind"`
	Questions  []struct {
		ID       string `json:"id"`
		Question string `json:"question"`
		Header   string `json:"header"`
		Options  []struct {
			Label string `json:"label"`
		} `json:"options"`
		MultiSelect bool `json:"multiSelect"`
	} `json:"questions"`
	Plan string `json:"plan"`
}

// questionAnswered is a question/answer payload.
type questionAnswered struct {
	QuestionID string              `json:"questionId"`
	Status     string              `json:"status"`
	Answers    map[string][]string `json:"answers"`
	Approved   *bool               `json:"approved"`
	Feedback   string              `json:"feedback"`
}

// planModeChanged is a plan/mode payload.
type planModeChanged struct {
	Active bool   `json:"active"`
	Source string `json:"source"`
}

// applyAsk folds the question and plan events: what was asked is kept
// until its answer, which prints both; a plan/mode change sets the
// status line's PLAN and prints a notice.
func (s *state) applyAsk(e session.Event) []block {
	switch e.Type {
	case typeQuestionAsk:
		var p questionAsked
		if e.Decode(&p) == nil && p.QuestionID != "" {
			s.questions[p.QuestionID] = p
			if p.CallID != "" {
				s.askCalls[p.CallID] = true
			}
		}
	case typeQuestionAnswer:
		var p questionAnswered
		if e.Decode(&p) != nil {
			return nil
		}
		q, ok := s.questions[p.QuestionID]
		delete(s.questions, p.QuestionID)
		if !ok {
			return nil
		}
		return []block{{kind: bAnswer, asked: &q, answered: &p}}
	case typePlanMode:
		var p planModeChanged
		if e.Decode(&p) != nil {
			return nil
		}
		was := s.planMode
		s.planMode = p.Active
		if was == p.Active && s.planKnown {
			return nil
		}
		s.planKnown = true
		switch {
		case p.Active:
			return []block{{kind: bPlanMode, ok: true, text: "plan mode on: the agent plans and asks before it writes (/plan leaves)"}}
		case p.Source == "plan-approved":
			return []block{{kind: bPlanMode, text: "plan approved: plan mode off"}}
		default:
			return []block{{kind: bPlanMode, text: "plan mode off"}}
		}
	}
	return nil
}

// answerBlock draws an answered question or plan for the scrollback: what
// was asked and what the person chose.
func (t theme) answerBlock(b block, width int) string {
	q, a := b.asked, b.answered
	var lines []string
	if q.Kind == "plan" {
		verdict := t.warn.Render("↺ kept planning")
		switch {
		case a.Status != "answered":
			verdict = t.bad.Render("✗ plan " + a.Status)
		case a.Approved != nil && *a.Approved:
			verdict = t.ok.Render("✓ plan approved")
		}
		lines = append(lines, cut(t.accent.Render("◇ ")+t.bold.Render("Plan")+" "+verdict, width))
		if p := strings.TrimSpace(q.Plan); p != "" {
			lines = append(lines, indent(t.markdown(p, width-4), width+100, "  │ ", "  │ "))
		}
		if a.Feedback != "" {
			lines = append(lines, indent(a.Feedback, width, t.dim.Render("  ⎿ feedback: "), "              "))
		}
		return strings.Join(lines, "\n")
	}
	for _, it := range q.Questions {
		title := it.Question
		if it.Header != "" {
			title = t.bold.Render(it.Header) + t.dim.Render(" · ") + title
		}
		lines = append(lines, indent(title, width, t.accent.Render("? "), "  "))
		var got string
		switch {
		case a.Status == "answered":
			got = strings.Join(a.Answers[it.ID], ", ")
			if got == "" {
				got = "(no answer)"
			}
			got = t.ok.Render(got)
		default:
			got = t.bad.Render(a.Status)
		}
		lines = append(lines, indent(got, width, "  ⎿ ", "    "))
	}
	if len(lines) == 0 {
		lines = append(lines, t.dim.Render("? question "+a.Status))
	}
	return strings.Join(lines, "\n")
}
