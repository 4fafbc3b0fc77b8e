package acp

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/dsh-dev/dsh/internal/host"
)

// Plan and question option ids.
const (
	optionApprovePlan  = "approve-plan"
	optionKeepPlanning = "keep-planning"
	optionDecline      = "decline"
	optionChoicePrefix = "choice-"
)

// declined is the answer recorded for a question the user dismissed
// (a declined or cancelled form, the "let the agent decide" option): the
// model reads it as the user's words and decides itself.
const declined = "The user chose not to answer: decide yourself and say what you assumed."

// askQuestion puts one pending question of the host to the client, once
// the pump has written its call: a plan through session/request_permission
// (approve / keep planning); a form through elicitation/create when the
// client advertised form elicitation, else one session/request_permission
// per question with one option per choice.
func (s *server) askQuestion(q host.Question) {
	s.startAsking(q.ID, q.SessionID, func(ctx context.Context) {
		var (
			ans host.QuestionAnswer
			err error
		)
		switch {
		case q.Kind == host.QuestionKindPlan:
			ans, err = s.askPlan(ctx, q)
		case s.elicitForm():
			ans, err = s.elicit(ctx, q)
		default:
			ans, err = s.askChoices(ctx, q)
		}
		if ctx.Err() != nil {
			return // resolved without this client
		}
		if err != nil {
			fmt.Fprintf(s.o.Log, "dsh acp: question %s: %v; declining\n", q.ID, err)
			ans = declineAll(q)
		}
		err = s.h.AnswerQuestion(s.ctx, q.SessionID, q.ID, ans)
		if host.ErrorCode(err) == host.CodeQuestionInvalidAnswer {
			// A client that sent something else than the choices offered:
			// the question must not stay pending for a client that is done.
			fmt.Fprintf(s.o.Log, "dsh acp: question %s: %v; declining\n", q.ID, err)
			err = s.h.AnswerQuestion(s.ctx, q.SessionID, q.ID, declineAll(q))
		}
		if err != nil && host.ErrorCode(err) != host.CodeQuestionNotPending {
			fmt.Fprintf(s.o.Log, "dsh acp: answer question %s: %v\n", q.ID, err)
		}
	})
}

func (s *server) elicitForm() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.formElicitation
}

func declineAll(q host.Question) host.QuestionAnswer {
	if q.Kind == host.QuestionKindPlan {
		no := false
		return host.QuestionAnswer{Approve: &no}
	}
	a := host.QuestionAnswer{Answers: map[string][]string{}}
	for _, it := range q.Questions {
		a.Answers[it.ID] = []string{declined}
	}
	return a
}

type permissionOutcome struct {
	Outcome struct {
		Outcome  string `json:"outcome"`
		OptionID string `json:"optionId"`
	} `json:"outcome"`
}

// askPlan: approve or keep planning. ACP's permission answer carries no
// text, so keep planning comes without feedback.
func (s *server) askPlan(ctx context.Context, q host.Question) (host.QuestionAnswer, error) {
	title, _, _ := strings.Cut(strings.TrimSpace(strings.TrimLeft(q.Plan, "# ")), "\n")
	call := obj{"toolCallId": q.CallID, "title": "Plan: " + title, "kind": "switch_mode", "status": "pending",
		"content": []obj{{"type": "content", "content": obj{"type": "text", "text": q.Plan}}}}
	options := []obj{
		{"optionId": optionApprovePlan, "name": "Approve the plan and start", "kind": "allow_once"},
		{"optionId": optionKeepPlanning, "name": "Keep planning", "kind": "reject_once"},
	}
	var res permissionOutcome
	if err := s.conn.Call(ctx, "session/request_permission", obj{"sessionId": q.SessionID, "toolCall": call, "options": options}, &res); err != nil {
		return host.QuestionAnswer{}, err
	}
	approve := res.Outcome.Outcome == "selected" && res.Outcome.OptionID == optionApprovePlan
	return host.QuestionAnswer{Approve: &approve}, nil
}

// askChoices asks each question of a form as one permission request
// whose options are its choices (and "let the agent decide"). A
// permission answer names one option, so a multi-select question gets
// one choice this way; clients that support form elicitation get
// elicitation/create instead, with real multi-select.
func (s *server) askChoices(ctx context.Context, q host.Question) (host.QuestionAnswer, error) {
	ans := host.QuestionAnswer{Answers: map[string][]string{}}
	for _, it := range q.Questions {
		title := it.Question
		if it.Header != "" {
			title = it.Header + ": " + it.Question
		}
		var text strings.Builder
		text.WriteString(it.Question)
		for _, o := range it.Options {
			if o.Description != "" {
				fmt.Fprintf(&text, "\n- %s: %s", o.Label, o.Description)
			}
		}
		call := obj{"toolCallId": q.CallID, "title": title, "kind": "other", "status": "pending",
			"content": []obj{{"type": "content", "content": obj{"type": "text", "text": text.String()}}}}
		var options []obj
		for i, o := range it.Options {
			options = append(options, obj{"optionId": optionChoicePrefix + strconv.Itoa(i), "name": o.Label, "kind": "allow_once"})
		}
		options = append(options, obj{"optionId": optionDecline, "name": "Let the agent decide", "kind": "reject_once"})
		var res permissionOutcome
		if err := s.conn.Call(ctx, "session/request_permission", obj{"sessionId": q.SessionID, "toolCall": call, "options": options}, &res); err != nil {
			return host.QuestionAnswer{}, err
		}
		choice := declined
		if res.Outcome.Outcome == "selected" {
			if n, err := strconv.Atoi(strings.TrimPrefix(res.Outcome.OptionID, optionChoicePrefix)); err == nil &&
				strings.HasPrefix(res.Outcome.OptionID, optionChoicePrefix) && n >= 0 && n < len(it.Options) {
				choice = it.Options[n].Label
			}
		}
		ans.Answers[it.ID] = []string{choice}
	}
	return ans, nil
}

// elicit asks a whole form with elicitation/create (form mode): a
// single-choice question is a string property with one titled option
// per choice, a multi-select one an array property; every question is
// required. A declined or cancelled form answers every question with
// "decide yourself".
func (s *server) elicit(ctx context.Context, q host.Question) (host.QuestionAnswer, error) {
	props := obj{}
	var required []string
	for _, it := range q.Questions {
		var choices []obj
		for _, o := range it.Options {
			c := obj{"const": o.Label, "title": o.Label}
			if o.Description != "" {
				c["description"] = o.Description
			}
			choices = append(choices, c)
		}
		title := it.Header
		if title == "" {
			title = it.Question
		}
		if it.MultiSelect {
			props[it.ID] = obj{"type": "array", "title": title, "description": it.Question, "minItems": 1, "items": obj{"anyOf": choices}}
		} else {
			props[it.ID] = obj{"type": "string", "title": title, "description": it.Question, "oneOf": choices}
		}
		required = append(required, it.ID)
	}
	params := obj{"sessionId": q.SessionID, "toolCallId": q.CallID, "mode": "form",
		"message":         "The agent has a question for you.",
		"requestedSchema": obj{"type": "object", "properties": props, "required": required}}
	if len(q.Questions) > 1 {
		params["message"] = fmt.Sprintf("The agent has %d questions for you.", len(q.Questions))
	}
	var res struct {
		Action  string         `json:"action"`
		Content map[string]any `json:"content"`
	}
	if err := s.conn.Call(ctx, "elicitation/create", params, &res); err != nil {
		return host.QuestionAnswer{}, err
	}
	if res.Action != "accept" {
		return declineAll(q), nil
	}
	ans := host.QuestionAnswer{Answers: map[string][]string{}}
	for _, it := range q.Questions {
		switch v := res.Content[it.ID].(type) {
		case string:
			ans.Answers[it.ID] = []string{v}
		case []any:
			for _, x := range v {
				if s, ok := x.(string); ok {
					ans.Answers[it.ID] = append(ans.Answers[it.ID], s)
				}
			}
		}
		if len(ans.Answers[it.ID]) == 0 {
			ans.Answers[it.ID] = []string{declined}
		}
	}
	return ans, nil
}
