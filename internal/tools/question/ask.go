package question

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/dsh-dev/dsh/internal/session"
	"github.com/dsh-dev/dsh/internal/tool"
)

// AskName is the model-facing name of the question tool.
const AskName = "ask_user_question"

//go:embed ask_user_question.md
var askDescription string

// Asked is the payload of question/ask.
type Asked struct {
	QuestionID string `json:"questionId"`
	CallID     string `json:"callId"`
	Kind       string `json:"kind"`
	Questions  []Item `json:"questions,omitempty"`
	Plan       string `json:"plan,omitempty"`
}

// Answered is the payload of question/answer.
type Answered struct {
	QuestionID string              `json:"questionId"`
	Status     string              `json:"status"`
	Answers    map[string][]string `json:"answers,omitempty"`
	Approved   *bool               `json:"approved,omitempty"`
	Feedback   string              `json:"feedback,omitempty"`
}

// Options configures the tools of this package.
type Options struct {
	// Asker puts questions to a person; nil means nobody can answer, so
	// every call fails at once with QUESTION_UNAVAILABLE (the tool stays
	// in the schema either way, so the tool list does not depend on who
	// is attached).
	Asker Asker
	// NewID mints question ids; nil uses random UUIDs.
	NewID func() string
}

func (o Options) newID() string {
	if o.NewID != nil {
		return o.NewID()
	}
	return uuid.NewString()
}

// NewAsk returns the ask_user_question tool. Calls are never
// concurrency-safe: a person answers one form at a time.
func NewAsk(o Options) tool.Definition {
	return tool.Definition{
		Name:        AskName,
		Description: strings.TrimSpace(askDescription),
		Parameters:  askParameters,
		// A person may take a long time; the turn's cancel ends the wait.
		Timeout: 24 * time.Hour,
		Execute: func(ctx context.Context, c *tool.Call) (tool.Result, error) {
			items, err := ParseAskArgs(c.Arguments)
			if err != nil {
				return tool.Result{}, err
			}
			ans, err := put(ctx, o, c, Request{CallID: c.ID, Kind: KindQuestion, Items: items})
			if err != nil {
				return tool.Result{}, err
			}
			meta, _ := json.Marshal(map[string]any{"answers": ans.Answers})
			return tool.Result{Content: tool.Text(renderAnswers(items, ans)).Content, Meta: meta}, nil
		},
	}
}

var askParameters = json.RawMessage(`{"type":"object","properties":{"questions":{"type":"array","minItems":1,"maxItems":8,` +
	`"description":"The questions, answered together in one form.","items":{"type":"object","properties":{` +
	`"id":{"type":"string","minLength":1,"description":"Unique id of the question; the answer is reported under it."},` +
	`"question":{"type":"string","minLength":1,"description":"The complete question."},` +
	`"header":{"type":"string","description":"A very short label for the question (a few words)."},` +
	`"options":{"type":"array","minItems":1,"maxItems":16,"items":{"type":"object","properties":{` +
	`"label":{"type":"string","minLength":1,"description":"The choice, as the user sees and picks it."},` +
	`"description":{"type":"string","description":"What the choice means or implies."}},` +
	`"required":["label"],"additionalProperties":false}},` +
	`"multi_select":{"type":"boolean","description":"Let the user pick several options."}},` +
	`"required":["id","question","options"],"additionalProperties":false}}},` +
	`"required":["questions"],"additionalProperties":false}`)

func invalid(format string, v ...any) error {
	return tool.Errorf(tool.CodeInvalidArgs, "invalid arguments for ask_user_question: "+format, v...)
}

// ParseAskArgs validates ask_user_question's arguments: ids unique and
// non-empty, questions and option labels non-empty, labels unique within
// a question, at least one option, bounded counts and lengths.
func ParseAskArgs(raw json.RawMessage) ([]Item, error) {
	var args struct {
		Questions []struct {
			ID          string   `json:"id"`
			Question    string   `json:"question"`
			Header      string   `json:"header"`
			Options     []Option `json:"options"`
			MultiSelect bool     `json:"multi_select"`
		} `json:"questions"`
	}
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&args); err != nil {
		return nil, invalid("%v", plainJSONError(err))
	}
	if len(args.Questions) == 0 {
		return nil, invalid("questions is required and must not be empty")
	}
	if len(args.Questions) > MaxQuestions {
		return nil, invalid("%d questions; at most %d are allowed in one call", len(args.Questions), MaxQuestions)
	}
	seen := map[string]bool{}
	items := make([]Item, 0, len(args.Questions))
	for i, q := range args.Questions {
		it := Item{ID: strings.TrimSpace(q.ID), Question: strings.TrimSpace(q.Question), Header: strings.TrimSpace(q.Header), MultiSelect: q.MultiSelect}
		switch {
		case it.ID == "":
			return nil, invalid("questions[%d].id is required and must not be empty", i)
		case seen[it.ID]:
			return nil, invalid("questions[%d].id %q is used twice; ids must be unique", i, it.ID)
		case it.Question == "":
			return nil, invalid("questions[%d].question is required and must not be empty", i)
		case len(q.Options) == 0:
			return nil, invalid("questions[%d].options must list at least one option", i)
		case len(q.Options) > MaxOptions:
			return nil, invalid("questions[%d] has %d options; at most %d are allowed", i, len(q.Options), MaxOptions)
		case len(it.Question) > maxText || len(it.Header) > maxText || len(it.ID) > 200:
			return nil, invalid("questions[%d] is too long (id ≤ 200, question and header ≤ %d bytes)", i, maxText)
		}
		seen[it.ID] = true
		labels := map[string]bool{}
		for j, o := range q.Options {
			o.Label, o.Description = strings.TrimSpace(o.Label), strings.TrimSpace(o.Description)
			switch {
			case o.Label == "":
				return nil, invalid("questions[%d].options[%d].label is required and must not be empty", i, j)
			case labels[strings.ToLower(o.Label)]:
				return nil, invalid("questions[%d].options[%d].label %q is used twice in that question", i, j, o.Label)
			case len(o.Label) > maxText || len(o.Description) > maxText:
				return nil, invalid("questions[%d].options[%d] is too long (at most %d bytes each)", i, j, maxText)
			}
			labels[strings.ToLower(o.Label)] = true
			it.Options = append(it.Options, o)
		}
		items = append(items, it)
	}
	return items, nil
}

// plainJSONError words a decoding error without Go type names.
func plainJSONError(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		if te.Field != "" {
			return fmt.Sprintf("%s must be a %s", te.Field, jsonKind(te.Type.Kind().String()))
		}
		return "arguments must be a JSON object"
	}
	s := err.Error()
	if rest, ok := strings.CutPrefix(s, "json: unknown field "); ok {
		return "unknown field " + rest
	}
	return "arguments must be a JSON object: " + s
}

func jsonKind(k string) string {
	switch k {
	case "slice":
		return "array"
	case "struct", "map":
		return "object"
	case "bool":
		return "boolean"
	}
	return k
}

// put logs question/ask, waits for the asker and logs question/answer.
// A cancelled wait is logged cancelled; nobody to ask is logged
// unavailable and fails with QUESTION_UNAVAILABLE at once.
func put(ctx context.Context, o Options, c *tool.Call, r Request) (Answer, error) {
	if c.Emit == nil {
		return Answer{}, tool.Errorf(tool.CodeFailed, "%s is unavailable here: the call has no session log", c.Name)
	}
	r.ID = o.newID()
	if err := c.Emit(session.TypeQuestionAsk, Asked{QuestionID: r.ID, CallID: r.CallID, Kind: r.Kind, Questions: r.Items, Plan: r.Plan}); err != nil {
		return Answer{}, tool.Errorf(tool.CodeFailed, "could not record the question: %v", err)
	}
	if o.Asker == nil {
		return Answer{}, unavailable(c, r, ErrUnavailable)
	}
	a, err := o.Asker.Ask(ctx, r)
	if err == nil {
		a, err = r.Check(a)
	}
	switch {
	case ctx.Err() != nil:
		_ = c.Emit(session.TypeQuestionAnswer, Answered{QuestionID: r.ID, Status: StatusCancelled})
		return Answer{}, context.Cause(ctx)
	case errors.Is(err, ErrUnavailable):
		return Answer{}, unavailable(c, r, err)
	case err != nil:
		// A surface that cannot deliver an answer (input closed) is as
		// good as nobody: the model is told, and nothing hangs.
		return Answer{}, unavailable(c, r, err)
	}
	if err := c.Emit(session.TypeQuestionAnswer, Answered{QuestionID: r.ID, Status: StatusAnswered, Answers: a.Answers, Approved: a.Approve, Feedback: a.Feedback}); err != nil {
		return Answer{}, tool.Errorf(tool.CodeFailed, "could not record the answer: %v", err)
	}
	return a, nil
}

func unavailable(c *tool.Call, r Request, err error) error {
	_ = c.Emit(session.TypeQuestionAnswer, Answered{QuestionID: r.ID, Status: StatusUnavailable})
	what := "questions"
	if r.Kind == KindPlan {
		what = "the plan"
	}
	msg := "nobody is available to answer " + what + " in this session (it runs without a person attached)"
	if !errors.Is(err, ErrUnavailable) {
		msg = fmt.Sprintf("%s could not be put to the user: %v", what, err)
	}
	e := tool.Errorf(CodeUnavailable, "%s. Decide yourself, state the assumption you made, and go on.", msg)
	e.Name = "QuestionError"
	return e
}

// renderAnswers is what the model reads.
func renderAnswers(items []Item, a Answer) string {
	var b strings.Builder
	b.WriteString("The user answered:")
	for _, it := range items {
		got := a.Answers[it.ID]
		fmt.Fprintf(&b, "\n- %s (%s): ", it.ID, it.Question)
		if len(got) == 1 && !it.IsOption(got[0]) {
			fmt.Fprintf(&b, "in their own words: %q", got[0])
			continue
		}
		for i, g := range got {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(g)
		}
	}
	return b.String()
}
