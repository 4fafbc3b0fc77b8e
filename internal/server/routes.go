package server

import (
	_ "embed"
	"net/http"
)

// routeTable is every API route. The OpenAPI test checks the embedded
// document against it both ways.
func (s *Server) routeTable() []Route {
	return []Route{
		{Method: "GET", Pattern: "/api/health", Public: true, handler: s.health},
		{Method: "GET", Pattern: "/api/openapi.json", handler: s.openAPI},
		{Method: "GET", Pattern: "/api/config", handler: s.config},
		{Method: "GET", Pattern: "/api/directories", handler: s.directories},

		{Method: "GET", Pattern: "/api/sessions", handler: s.listSessions},
		{Method: "GET", Pattern: "/api/sessions/search", handler: s.searchSessions},
		{Method: "POST", Pattern: "/api/sessions", handler: s.createSession},
		{Method: "GET", Pattern: "/api/sessions/{id}", handler: s.getSession},
		{Method: "GET", Pattern: "/api/sessions/{id}/events", handler: s.sessionEvents},
		{Method: "GET", Pattern: "/api/sessions/{id}/stream", handler: s.sessionStream},
		{Method: "POST", Pattern: "/api/sessions/{id}/messages", handler: s.sendMessage},
		{Method: "POST", Pattern: "/api/sessions/{id}/cancel", handler: s.cancel},
		{Method: "POST", Pattern: "/api/sessions/{id}/queue/{messageId}", handler: s.updateQueue},
		{Method: "POST", Pattern: "/api/sessions/{id}/approvals/{approvalId}", handler: s.answer},
		{Method: "GET", Pattern: "/api/sessions/{id}/tree", handler: s.tree},
		{Method: "POST", Pattern: "/api/sessions/{id}/fork", handler: s.fork},
		{Method: "GET", Pattern: "/api/sessions/{id}/export", handler: s.export},
		{Method: "GET", Pattern: "/api/sessions/{id}/goal", handler: s.getGoal},
		{Method: "POST", Pattern: "/api/sessions/{id}/goal", handler: s.setGoal},

		{Method: "GET", Pattern: "/api/sessions/{id}/questions", handler: s.sessionQuestions},
		{Method: "POST", Pattern: "/api/sessions/{id}/questions/{questionId}", handler: s.answerQuestion},
		{Method: "POST", Pattern: "/api/sessions/{id}/plan", handler: s.setPlanMode},

		{Method: "GET", Pattern: "/api/approvals", handler: s.approvals},
		{Method: "GET", Pattern: "/api/questions", handler: s.questions},
		{Method: "GET", Pattern: "/api/events", handler: s.feed},

		{Method: "GET", Pattern: "/api/workspaces", handler: s.listWorkspaces},
		{Method: "POST", Pattern: "/api/workspaces", handler: s.createWorkspace},
		{Method: "PATCH", Pattern: "/api/workspaces/{id}", handler: s.patchWorkspace},
		{Method: "DELETE", Pattern: "/api/workspaces/{id}", handler: s.deleteWorkspace},
		{Method: "PATCH", Pattern: "/api/workspaces/{id}/sessions/{sid}", handler: s.moveSession},
	}
}

func (s *Server) health(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"ok": true, "version": s.opts.Version})
}

//go:embed openapi.json
var openAPIDoc []byte

func (s *Server) openAPI(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-cache")
	_, _ = w.Write(openAPIDoc)
}
