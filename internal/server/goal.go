package server

import (
	"net/http"

	"github.com/dsh-dev/dsh/internal/host"
)

// getGoal answers the session's goal state ({"goal":null,"armed":false}
// when it has none).
func (s *Server) getGoal(w http.ResponseWriter, r *http.Request) {
	st, err := s.host.Goal(r.Context(), r.PathValue("id"))
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, st)
}

// setGoal carries out a person's goal command: create (and arm) a goal,
// pause, resume (re-arms the goal of a resumed or forked session),
// complete or clear it. A create or resume starts the next round at once
// when the session is idle.
func (s *Server) setGoal(w http.ResponseWriter, r *http.Request) {
	var req host.GoalRequest
	if err := decode(w, r, s.opts.MaxBody, &req); err != nil {
		writeError(w, err)
		return
	}
	if req.Action == "" {
		req.Action = host.GoalCreate
	}
	st, err := s.host.SetGoal(r.Context(), r.PathValue("id"), req)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, st)
}
