package server

import (
	"net/http"

	"github.com/dsh-dev/dsh/internal/permission"
)

// efforts are the reasoning efforts a session may ask for.
var efforts = []string{"off", "low", "high", "max"}

// config is GET /api/config: what the UI's selectors offer.
func (s *Server) config(w http.ResponseWriter, r *http.Request) {
	models := []string{}
	presets := []string{}
	defaultModel := ""
	a := s.opts.App
	if a == nil && s.host != nil {
		a = s.host.App()
	}
	if a != nil {
		for _, p := range a.Catalog.Providers() {
			for _, m := range p.Models {
				models = append(models, p.ID+"/"+m.ID)
			}
		}
		defaultModel = a.DefaultModel()
		presets = a.PresetNames()
	}
	var perms []string
	for _, p := range permission.Presets() {
		perms = append(perms, p.Name)
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"models": models, "defaultModel": defaultModel, "efforts": efforts,
		"permissions": perms, "presets": presets,
	})
}
