package server

import "net/http"

// updateQueue is POST /api/sessions/{id}/queue/{messageId}: "steer" moves
// a message queued for the next turn into the running turn's next step
// (an idle session starts a turn with it), "remove" drops it.
func (s *Server) updateQueue(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Op string `json:"op"`
	}
	if err := decode(w, r, s.opts.MaxBody, &req); err != nil {
		writeError(w, err)
		return
	}
	if err := s.host.UpdateQueue(r.Context(), r.PathValue("id"), r.PathValue("messageId"), req.Op); err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"ok": true})
}
