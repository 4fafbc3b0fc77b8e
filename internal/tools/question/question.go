// Package question holds the tools that need a person: ask_user_question
// (questions with options, answered through whichever surface is
// attached) and plan mode with exit_plan_mode (the plan put to the person
// for approval). The tools log question/ask and question/answer and block
// on an [Asker], the seam a surface implements: the session host's queue
// (dsh serve, the TUI, ACP), dsh run's terminal, or none at all, in which
// case a call fails at once with QUESTION_UNAVAILABLE instead of hanging.
package question

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Tool error codes.
const (
	// CodeUnavailable: nobody can answer (a headless run, a schedule).
	CodeUnavailable = "QUESTION_UNAVAILABLE"
	// CodePlanModeActive: a writing tool was called in plan mode.
	CodePlanModeActive = "PLAN_MODE_ACTIVE"
	// CodePlanModeInactive: exit_plan_mode was called outside plan mode.
	CodePlanModeInactive = "PLAN_MODE_INACTIVE"
)

// Answer-checking error codes (what a surface gets back for a bad answer).
const (
	CodeInvalidAnswer = "QUESTION_INVALID_ANSWER"
)

// Question kinds.
const (
	KindQuestion = "question"
	KindPlan     = "plan"
)

// Answer statuses logged in question/answer.
const (
	StatusAnswered    = "answered"
	StatusCancelled   = "cancelled"
	StatusUnavailable = "unavailable"
)

// Limits on one call: a longer form is a mistake, and a person answers
// each entry.
const (
	MaxQuestions = 8
	MaxOptions   = 16
	// maxText bounds a question, header, label or description.
	maxText = 2000
	// MaxFreeText bounds a typed answer.
	MaxFreeText = 8000
)

// Option is one choice of a question.
type Option struct {
	Label       string `json:"label"`
	Description string `json:"description,omitempty"`
}

// Item is one question of an ask_user_question call.
type Item struct {
	ID          string   `json:"id"`
	Question    string   `json:"question"`
	Header      string   `json:"header,omitempty"`
	Options     []Option `json:"options"`
	MultiSelect bool     `json:"multiSelect,omitempty"`
}

// Request is what is put to the person: the questions of one
// ask_user_question call (kind "question") or a plan (kind "plan").
type Request struct {
	// ID is the question id logged in question/ask and question/answer.
	ID     string
	CallID string
	Kind   string
	Items  []Item
	// Plan is the markdown plan of kind "plan".
	Plan string
}

// Answer is the person's answer.
type Answer struct {
	// Answers (kind "question"): per item id, the chosen labels, or a
	// single entry of free text.
	Answers map[string][]string `json:"answers,omitempty"`
	// Approve (kind "plan"): true approves the plan, false keeps planning.
	Approve *bool `json:"approve,omitempty"`
	// Feedback (kind "plan"): what to change when planning goes on, or a
	// comment with an approval.
	Feedback string `json:"feedback,omitempty"`
}

// Asker puts a request to a person and waits for the answer. It must
// honour ctx (the turn was cancelled); an error wrapping ErrUnavailable
// means nobody can answer.
type Asker interface {
	Ask(ctx context.Context, r Request) (Answer, error)
}

// ErrUnavailable is what an Asker returns when nobody can answer.
var ErrUnavailable = errors.New("nobody is available to answer questions")

// AnswerError is a bad answer (an unknown item, a label that is not an
// option of a single-choice question answered with several…).
type AnswerError struct {
	Message string
}

func (e *AnswerError) Error() string { return e.Message }

// Code is the stable machine code of a bad answer.
func (e *AnswerError) Code() string { return CodeInvalidAnswer }

func badAnswer(format string, args ...any) error {
	return &AnswerError{Message: fmt.Sprintf(format, args...)}
}

// Check validates a against r and returns it normalised (entries
// trimmed, a typed answer that matches a label taken as that label).
// Every item must be answered: with labels of its options (exactly one
// unless it is multi-select) or with one entry of free text.
func (r Request) Check(a Answer) (Answer, error) {
	switch r.Kind {
	case KindPlan:
		if a.Approve == nil {
			return Answer{}, badAnswer("a plan is answered with approve true (approve) or false (keep planning)")
		}
		if len(a.Answers) > 0 {
			return Answer{}, badAnswer("a plan is answered with approve and feedback, not answers")
		}
		fb := strings.TrimSpace(a.Feedback)
		if len(fb) > MaxFreeText {
			return Answer{}, badAnswer("feedback is %d bytes; at most %d", len(fb), MaxFreeText)
		}
		return Answer{Approve: a.Approve, Feedback: fb}, nil
	case KindQuestion:
	default:
		return Answer{}, badAnswer("unknown question kind %q", r.Kind)
	}
	if a.Approve != nil || a.Feedback != "" {
		return Answer{}, badAnswer("questions are answered with answers, not approve or feedback")
	}
	out := map[string][]string{}
	for id := range a.Answers {
		if !slices.ContainsFunc(r.Items, func(it Item) bool { return it.ID == id }) {
			return Answer{}, badAnswer("there is no question %q", id)
		}
	}
	for _, it := range r.Items {
		got, ok := a.Answers[it.ID]
		if !ok || len(got) == 0 {
			return Answer{}, badAnswer("question %q has no answer", it.ID)
		}
		norm, err := it.check(got)
		if err != nil {
			return Answer{}, err
		}
		out[it.ID] = norm
	}
	return Answer{Answers: out}, nil
}

// check normalises the answer entries of one item.
func (it Item) check(got []string) ([]string, error) {
	var labels []string
	free := ""
	for _, g := range got {
		g = strings.TrimSpace(g)
		if g == "" {
			return nil, badAnswer("question %q: an answer entry is empty", it.ID)
		}
		if l, ok := it.label(g); ok {
			if slices.Contains(labels, l) {
				return nil, badAnswer("question %q: %q is chosen twice", it.ID, l)
			}
			labels = append(labels, l)
			continue
		}
		if free != "" {
			return nil, badAnswer("question %q: only one entry may be free text", it.ID)
		}
		if len(g) > MaxFreeText {
			return nil, badAnswer("question %q: the typed answer is %d bytes; at most %d", it.ID, len(g), MaxFreeText)
		}
		free = g
	}
	switch {
	case free != "" && len(labels) > 0:
		return nil, badAnswer("question %q: answer with option labels or with one free-text entry, not both", it.ID)
	case free != "":
		return []string{free}, nil
	case len(labels) > 1 && !it.MultiSelect:
		return nil, badAnswer("question %q takes one choice, got %d", it.ID, len(labels))
	}
	return labels, nil
}

// label returns the option label s names (exactly, else ignoring case).
func (it Item) label(s string) (string, bool) {
	for _, o := range it.Options {
		if o.Label == s {
			return o.Label, true
		}
	}
	for _, o := range it.Options {
		if strings.EqualFold(o.Label, s) {
			return o.Label, true
		}
	}
	return "", false
}

// IsOption reports whether s is one of the item's labels.
func (it Item) IsOption(s string) bool {
	_, ok := it.label(s)
	return ok
}
