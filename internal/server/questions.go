package server

import (
	"net/http"

	"github.com/dsh-dev/dsh/internal/host"
)

// questions is GET /api/questions: every pending question, oldest first.
func (s *Server) questions(w http.ResponseWriter, r *http.Request) {
	writeQuestions(w, s.host.Questions(""))
}

// sessionQuestions is GET /api/sessions/{id}/questions.
func (s *Server) sessionQuestions(w http.ResponseWriter, r *http.Request) {
	info, err := s.host.Get(r.Context(), r.PathValue("id"))
	if err != nil {
		writeError(w, err)
		return
	}
	writeQuestions(w, s.host.Questions(info.Header.ID))
}

func writeQuestions(w http.ResponseWriter, list []host.Question) {
	if list == nil {
		list = []host.Question{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"questions": list})
}

// answerQuestion is POST /api/sessions/{id}/questions/{questionId}: the
// body is a host.QuestionAnswer; 204 once the answer is delivered.
func (s *Server) answerQuestion(w http.ResponseWriter, r *http.Request) {
	var a host.QuestionAnswer
	if !hasBody(r) {
		writeError(w, newError(CodeInvalidJSON, "request body is empty"))
		return
	}
	if err := decode(w, r, s.opts.MaxBody, &a); err != nil {
		writeError(w, err)
		return
	}
	if err := s.host.AnswerQuestion(r.Context(), r.PathValue("id"), r.PathValue("questionId"), a); err != nil {
		writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// setPlanMode is POST /api/sessions/{id}/plan with {"active": bool}.
func (s *Server) setPlanMode(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Active *bool `json:"active"`
	}
	if err := decode(w, r, s.opts.MaxBody, &req); err != nil {
		writeError(w, err)
		return
	}
	if req.Active == nil {
		writeError(w, newError(CodeInvalidArgument, `the body must be {"active": true} or {"active": false}`))
		return
	}
	if err := s.host.SetPlanMode(r.Context(), r.PathValue("id"), *req.Active); err != nil {
		writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
