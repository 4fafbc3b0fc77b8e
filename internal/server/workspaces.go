package server

import (
	"errors"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/dsh-dev/dsh/internal/host"
	"github.com/dsh-dev/dsh/internal/workspace"
)

func (s *Server) listWorkspaces(w http.ResponseWriter, r *http.Request) {
	list, err := s.reg.List(r.Context())
	if err != nil {
		writeError(w, err)
		return
	}
	if list == nil {
		list = []workspace.Workspace{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"workspaces": list})
}

func (s *Server) createWorkspace(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Path  string `json:"path"`
		Title string `json:"title"`
	}
	if err := decode(w, r, s.opts.MaxBody, &req); err != nil {
		writeError(w, err)
		return
	}
	ws, created, err := s.reg.Create(r.Context(), req.Path, req.Title)
	if err != nil {
		writeError(w, err)
		return
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
		s.host.Publish(host.FeedEvent{Type: host.FeedWorkspaceChanged, WorkspaceID: ws.ID})
	}
	writeJSON(w, status, ws)
}

func (s *Server) patchWorkspace(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Title  *string `json:"title"`
		Before *string `json:"before"`
	}
	if err := decode(w, r, s.opts.MaxBody, &req); err != nil {
		writeError(w, err)
		return
	}
	id := r.PathValue("id")
	if req.Title != nil {
		if _, err := s.reg.Rename(r.Context(), id, *req.Title); err != nil {
			writeError(w, err)
			return
		}
		s.host.Publish(host.FeedEvent{Type: host.FeedWorkspaceChanged, WorkspaceID: id})
	}
	if req.Before != nil {
		if err := s.reg.MoveBefore(r.Context(), id, *req.Before); err != nil {
			writeError(w, err)
			return
		}
		s.host.Publish(host.FeedEvent{Type: host.FeedWorkspaceOrder, WorkspaceID: id})
	}
	ws, err := s.reg.Get(r.Context(), id)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, ws)
}

func (s *Server) deleteWorkspace(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if err := s.reg.Delete(r.Context(), id); err != nil {
		writeError(w, err)
		return
	}
	s.host.Publish(host.FeedEvent{Type: host.FeedWorkspaceRemoved, WorkspaceID: id})
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) moveSession(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Before *string `json:"before"`
	}
	if err := decode(w, r, s.opts.MaxBody, &req); err != nil {
		writeError(w, err)
		return
	}
	if req.Before == nil {
		writeError(w, newError(CodeInvalidArgument, `"before" is required ("" moves the session to the end)`))
		return
	}
	id := r.PathValue("id")
	if err := s.reg.MoveSessionBefore(r.Context(), id, r.PathValue("sid"), *req.Before); err != nil {
		writeError(w, err)
		return
	}
	s.host.Publish(host.FeedEvent{Type: host.FeedWorkspaceChanged, WorkspaceID: id})
	ws, err := s.reg.Get(r.Context(), id)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, ws)
}

// dirEntry is one subdirectory in /api/directories.
type dirEntry struct {
	Name   string `json:"name"`
	Path   string `json:"path"`
	Hidden bool   `json:"hidden"`
}

// directories lists the subdirectories of one directory for the UI's
// picker (one level; symbolic links to directories count as directories).
func (s *Server) directories(w http.ResponseWriter, r *http.Request) {
	home := s.opts.Home
	if home == "" {
		home, _ = os.UserHomeDir()
	}
	p := r.URL.Query().Get("path")
	if p == "" {
		p = home
	}
	if !filepath.IsAbs(p) {
		writeError(w, newError(CodeInvalidArgument, "path must be absolute: "+p))
		return
	}
	p = filepath.Clean(p)
	fi, err := os.Stat(p)
	if err != nil {
		writeError(w, dirError(p, err))
		return
	}
	if !fi.IsDir() {
		writeError(w, newError(CodeNotADirectory, p+" is not a directory"))
		return
	}
	des, err := os.ReadDir(p)
	if err != nil {
		writeError(w, dirError(p, err))
		return
	}
	entries := []dirEntry{}
	for _, de := range des {
		full := filepath.Join(p, de.Name())
		isDir := de.IsDir()
		if de.Type()&fs.ModeSymlink != 0 {
			if ti, err := os.Stat(full); err == nil && ti.IsDir() {
				isDir = true
			}
		}
		if isDir {
			entries = append(entries, dirEntry{Name: de.Name(), Path: full, Hidden: strings.HasPrefix(de.Name(), ".")})
		}
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].Name < entries[j].Name })
	writeJSON(w, http.StatusOK, map[string]any{"path": p, "parent": filepath.Dir(p), "home": home, "entries": entries})
}

func dirError(p string, err error) error {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return newError(CodeDirNotFound, "no directory "+p)
	case errors.Is(err, fs.ErrPermission):
		return newError(CodePermissionDenied, "cannot read "+p)
	}
	return err
}
