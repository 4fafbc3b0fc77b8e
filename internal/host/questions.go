package host

import (
	"context"
	"fmt"
	"os"

	"github.com/dsh-dev/dsh/internal/session"
	"github.com/dsh-dev/dsh/internal/tools/question"
)

// Question is a pending question of a live session: an
// ask_user_question call (kind "question") or an exit_plan_mode call
// (kind "plan") waiting for a person. ID is the questionId of the
// session's question/ask and question/answer events.
type Question struct {
	ID        string         `json:"id"`
	SessionID string         `json:"sessionId"`
	CallID    string         `json:"callId"`
	Kind      string         `json:"kind"`
	Questions []QuestionItem `json:"questions,omitempty"`
	// Plan is the markdown plan of kind "plan".
	Plan    string `json:"plan,omitempty"`
	AskedAt int64  `json:"askedAt"`
}

// QuestionItem is one question of a form.
type QuestionItem = question.Item

// QuestionOption is one choice of a question.
type QuestionOption = question.Option

// QuestionAnswer answers a pending question: Answers for kind
// "question" (per item id, the chosen labels or one free-text entry),
// Approve (and Feedback) for kind "plan".
type QuestionAnswer = question.Answer

// Question kinds and resolution statuses.
const (
	QuestionKindQuestion = question.KindQuestion
	QuestionKindPlan     = question.KindPlan

	QuestionAnswered  = question.StatusAnswered
	QuestionCancelled = question.StatusCancelled
)

// pendingQuestion is a question waiting in the host's queue.
type pendingQuestion struct {
	Question
	req    question.Request
	answer chan question.Answer // buffered 1; the first answer is sent once
}

// Ask implements question.Asker for a session the host opened without a
// Config.Asker: the question waits in the host's queue, where any client
// (the web UI, the TUI, an ACP client) can answer it, until it is
// answered or the call's context ends (the turn was cancelled, the
// session disposed), which resolves it cancelled.
func (a *answerer) Ask(ctx context.Context, r question.Request) (question.Answer, error) {
	h := a.h
	p := &pendingQuestion{req: r, answer: make(chan question.Answer, 1), Question: Question{
		ID: r.ID, SessionID: a.id, CallID: r.CallID, Kind: r.Kind, Questions: r.Items, Plan: r.Plan, AskedAt: unixMilli(),
	}}
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return question.Answer{}, question.ErrUnavailable
	}
	h.questions[p.ID] = p
	e := h.live[a.id]
	h.mu.Unlock()
	q := p.Question
	h.announce(e, FeedEvent{Type: FeedQuestion, SessionID: a.id, Question: &q})
	ans, err := awaitAnswer(ctx, h, h.questions, p.ID, p.answer)
	status := QuestionAnswered
	if err != nil {
		status = QuestionCancelled
	}
	h.announce(e, FeedEvent{Type: FeedQuestionResolved, SessionID: a.id, ID: p.ID, Status: Status(status)})
	return ans, err
}

// Questions returns the pending questions of session sessionID ("" for
// every session's), oldest first.
func (h *Host) Questions(sessionID string) []Question {
	return listPending(h, h.questions, sessionID, func(p *pendingQuestion) (Question, pendingKey) {
		return p.Question, pendingKey{p.SessionID, p.AskedAt, p.ID}
	})
}

// AnswerQuestion answers pending question questionID of session
// sessionID. The first answer wins: a later one, or one for a question
// that was cancelled, gets QUESTION_NOT_PENDING; an id the session never
// asked gets QUESTION_NOT_FOUND; an answer that does not fit the
// question (an unknown item id, several choices for a single-choice
// question, a plan answer without approve…) gets QUESTION_INVALID_ANSWER
// and leaves the question pending.
func (h *Host) AnswerQuestion(ctx context.Context, sessionID, questionID string, a QuestionAnswer) error {
	full, err := h.resolve(ctx, sessionID)
	if err != nil {
		return err
	}
	return answerPending(ctx, h, h.questions, questionKind, full, questionID,
		func(p *pendingQuestion) string { return p.SessionID },
		func(p *pendingQuestion) error {
			norm, err := p.req.Check(a)
			if err != nil {
				return &Error{Code: CodeQuestionInvalidAnswer, Message: err.Error(), Err: err}
			}
			p.answer <- norm
			return nil
		},
		func(ev session.Event) bool {
			var p question.Asked
			return ev.Decode(&p) == nil && p.QuestionID == questionID
		})
}

// questionKind names the question queue in answerPending's errors.
var questionKind = askKind{noun: "question", notPending: CodeQuestionNotPending, notFound: CodeQuestionNotFound, eventType: session.TypeQuestionAsk}

// SetPlanMode turns plan mode of session id on or off (source "user"). A
// stored session is resumed on demand. The change is logged (plan/mode)
// now when no turn runs, else at the running turn's next step boundary;
// the model learns it from the next runtime-context snapshot.
func (h *Host) SetPlanMode(ctx context.Context, id string, active bool) error {
	full, err := h.resolve(ctx, id)
	if err != nil {
		return err
	}
	e, done, err := h.deliverTo(ctx, full)
	if err != nil {
		return err
	}
	defer done()
	if err := e.sess.SetPlanMode(active, question.SourceUser); err != nil {
		return classify(err)
	}
	return classify(e.sess.Log.Flush(ctx))
}

// settlePlanMode logs a plan-mode change that waited for a step boundary
// the run never reached (the run ended first).
func (e *entry) settlePlanMode() {
	if err := e.sess.SettlePlanMode(); err != nil {
		fmt.Fprintf(os.Stderr, "dsh: session %s: plan mode: %v\n", e.id, err)
	}
}

// planModeOf folds plan mode from stored events (a session not live).
func planModeOf(events []session.Event) bool {
	for i := len(events) - 1; i >= 0; i-- {
		if events[i].Type != session.TypePlanMode {
			continue
		}
		var p question.PlanMode
		if events[i].Decode(&p) == nil {
			return p.Active
		}
	}
	return false
}
