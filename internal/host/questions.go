package host

import (
	"context"
	"fmt"
	"os"
	"slices"

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
	h.Publish(FeedEvent{Type: FeedQuestion, SessionID: a.id, Question: &q})
	if e != nil {
		h.statusChanged(e)
	}
	var (
		ans    question.Answer
		err    error
		status = QuestionAnswered
	)
	select {
	case ans = <-p.answer:
	case <-ctx.Done():
		h.mu.Lock()
		delete(h.questions, p.ID)
		h.mu.Unlock()
		err, status = context.Cause(ctx), QuestionCancelled
	}
	h.Publish(FeedEvent{Type: FeedQuestionResolved, SessionID: a.id, ID: p.ID, Status: Status(status)})
	if e != nil {
		h.statusChanged(e)
	}
	return ans, err
}

// Questions returns the pending questions of session sessionID ("" for
// every session's), oldest first.
func (h *Host) Questions(sessionID string) []Question {
	h.mu.Lock()
	var out []Question
	for _, p := range h.questions {
		if sessionID == "" || p.SessionID == sessionID {
			out = append(out, p.Question)
		}
	}
	h.mu.Unlock()
	slices.SortFunc(out, func(a, b Question) int {
		if a.AskedAt != b.AskedAt {
			return int(a.AskedAt - b.AskedAt)
		}
		return compareStrings(a.ID, b.ID)
	})
	return out
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
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return ErrHostClosed
	}
	p := h.questions[questionID]
	if p != nil && p.SessionID == full {
		norm, err := p.req.Check(a)
		if err != nil {
			h.mu.Unlock()
			return &Error{Code: CodeQuestionInvalidAnswer, Message: err.Error(), Err: err}
		}
		delete(h.questions, questionID)
		p.answer <- norm
		h.mu.Unlock()
		return nil
	}
	h.mu.Unlock()
	asked, err := h.wasQuestioned(ctx, full, questionID)
	if err != nil {
		return err
	}
	if asked {
		return errorf(CodeQuestionNotPending, "question %s of session %s is not pending: it was already answered or cancelled", questionID, full)
	}
	return errorf(CodeQuestionNotFound, "session %s has no question %s", full, questionID)
}

// wasQuestioned reports whether session id logged question questionID.
func (h *Host) wasQuestioned(ctx context.Context, id, questionID string) (bool, error) {
	var events []session.Event
	if e, _ := h.lookup(id); e != nil {
		events = e.sess.Log.EventsView()
	} else {
		var err error
		if events, err = h.app.Store.ReadFrom(ctx, id, 0); err != nil {
			return false, classify(err)
		}
	}
	for _, ev := range events {
		if ev.Type != session.TypeQuestionAsk {
			continue
		}
		var p question.Asked
		if ev.Decode(&p) == nil && p.QuestionID == questionID {
			return true, nil
		}
	}
	return false, nil
}

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
