package server

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/dsh-dev/dsh/internal/agent"
	"github.com/dsh-dev/dsh/internal/host"
	"github.com/dsh-dev/dsh/internal/llm"
	"github.com/dsh-dev/dsh/internal/session"
)

// maxEventsLimit bounds one page of /events.
const maxEventsLimit = host.MaxEventsLimit

// Listing page sizes of GET /api/sessions.
const (
	defaultListLimit = 200
	maxListLimit     = 1000
)

func (s *Server) listSessions(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	// Subagent children and forks are listed (marked "child") unless
	// children=0 asks for top-level sessions only.
	children := q.Get("children")
	f := host.ListFilter{Cwd: q.Get("cwd"), IncludeChildren: children != "0" && children != "false",
		Limit: defaultListLimit, Before: q.Get("before")}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxListLimit {
			writeError(w, newError(CodeInvalidArgument, fmt.Sprintf("limit must be between 1 and %d", maxListLimit)))
			return
		}
		f.Limit = n
	}
	var p host.Page
	var err error
	if wsID := q.Get("workspace"); wsID != "" {
		p, err = s.workspaceSessions(r.Context(), wsID, f)
	} else {
		p, err = s.host.ListPage(r.Context(), f)
	}
	if err != nil {
		writeError(w, err)
		return
	}
	if p.Sessions == nil {
		p.Sessions = []host.Info{}
	}
	writeJSON(w, http.StatusOK, listResponse{Sessions: p.Sessions, Next: p.Next})
}

// listResponse is the body of GET /api/sessions.
type listResponse struct {
	Sessions []host.Info `json:"sessions"`
	Next     string      `json:"next,omitempty"`
}

// Cursors of a workspace listing: the members come first, in the
// workspace's order (a page of them is looked up by id), then the
// directory's other top-level sessions, newest first, paged by the
// host's cursor.
const (
	wsMemberCursor = "m."
	wsTailCursor   = "t."
)

// workspaceSessions lists one page of workspace wsID: its members in the
// workspace's order (sessions registered there, whatever the spelling of
// their directory), then the other top-level sessions of its directory,
// newest first: a `dsh run` there is not registered, and must not be
// hidden.
func (s *Server) workspaceSessions(ctx context.Context, wsID string, f host.ListFilter) (host.Page, error) {
	ws, err := s.reg.Get(ctx, wsID)
	if err != nil {
		return host.Page{}, err
	}
	if f.Cwd != "" && f.Cwd != ws.Path {
		return host.Page{}, newError(CodeInvalidArgument, "cwd and workspace name different directories")
	}
	badCursor := newError(CodeInvalidArgument, fmt.Sprintf("before %q is not a cursor of this workspace listing", f.Before))
	var out host.Page
	tail, cursor := false, ""
	from := 0
	switch {
	case f.Before == "":
	case strings.HasPrefix(f.Before, wsMemberCursor):
		n, err := strconv.Atoi(strings.TrimPrefix(f.Before, wsMemberCursor))
		if err != nil || n < 0 || n > len(ws.SessionIDs) {
			return host.Page{}, badCursor
		}
		from = n
	case strings.HasPrefix(f.Before, wsTailCursor):
		tail, cursor = true, strings.TrimPrefix(f.Before, wsTailCursor)
	default:
		return host.Page{}, badCursor
	}
	member := make(map[string]bool, len(ws.SessionIDs))
	for _, id := range ws.SessionIDs {
		member[id] = true
	}
	if !tail {
		ids := ws.SessionIDs[from:min(len(ws.SessionIDs), from+f.Limit)]
		got, err := s.host.List(ctx, host.ListFilter{IDs: ids, IncludeChildren: true})
		if err != nil {
			return host.Page{}, err
		}
		byID := make(map[string]host.Info, len(got))
		for _, in := range got {
			byID[in.Header.ID] = in
		}
		for _, id := range ids {
			if in, ok := byID[id]; ok { // else gone since the registry was read
				out.Sessions = append(out.Sessions, in)
			}
		}
		if end := from + len(ids); end < len(ws.SessionIDs) {
			out.Next = wsMemberCursor + strconv.Itoa(end)
			return out, nil
		}
	}
	// The directory's other top-level sessions; members met there are
	// skipped, so a page may take more than one read to fill.
	for len(out.Sessions) < f.Limit {
		p, err := s.host.ListPage(ctx, host.ListFilter{Cwd: ws.Path, Limit: f.Limit - len(out.Sessions), Before: cursor})
		if err != nil {
			return host.Page{}, err
		}
		for _, in := range p.Sessions {
			if !member[in.Header.ID] {
				out.Sessions = append(out.Sessions, in)
			}
		}
		if cursor = p.Next; cursor == "" {
			return out, nil
		}
	}
	out.Next = wsTailCursor + cursor
	return out, nil
}

// createRequest is the body of POST /api/sessions.
type createRequest struct {
	Cwd         string `json:"cwd"`
	WorkspaceID string `json:"workspaceId"`
	Model       string `json:"model"`
	Effort      string `json:"effort"`
	Permission  string `json:"permission"`
	Approval    string `json:"approval"`
	AgentPreset string `json:"agentPreset"`
	Title       string `json:"title"`
	PlanMode    bool   `json:"planMode"`
}

func (s *Server) createSession(w http.ResponseWriter, r *http.Request) {
	var req createRequest
	if err := decode(w, r, s.opts.MaxBody, &req); err != nil {
		writeError(w, err)
		return
	}
	cwd := req.Cwd
	if req.WorkspaceID != "" {
		ws, err := s.reg.Get(r.Context(), req.WorkspaceID)
		if err != nil {
			writeError(w, err)
			return
		}
		if cwd != "" && cwd != ws.Path {
			writeError(w, newError(CodeInvalidArgument, "cwd and workspaceId name different directories"))
			return
		}
		cwd = ws.Path
	}
	if cwd == "" {
		writeError(w, newError(CodeInvalidArgument, "cwd or workspaceId is required"))
		return
	}
	info, err := s.host.Create(r.Context(), host.CreateRequest{
		Cwd: cwd, Model: req.Model, Effort: req.Effort, Permission: req.Permission,
		Approval: req.Approval, AgentPreset: req.AgentPreset, Title: req.Title, PlanMode: req.PlanMode,
	})
	if err != nil {
		writeError(w, err)
		return
	}
	// A session made in a registered directory joins its workspace.
	wsID := req.WorkspaceID
	if wsID == "" {
		ws, ok, err := s.reg.ByPath(r.Context(), info.Header.Cwd)
		if err != nil {
			writeError(w, err)
			return
		}
		if ok {
			wsID = ws.ID
		}
	}
	if wsID != "" {
		if err := s.reg.Attach(r.Context(), wsID, info.Header.ID); err != nil {
			writeError(w, err)
			return
		}
		s.host.Publish(host.FeedEvent{Type: host.FeedWorkspaceChanged, WorkspaceID: wsID})
	}
	writeJSON(w, http.StatusCreated, info)
}

// sessionView is GET /api/sessions/{id}: the info and the live jobs.
type sessionView struct {
	host.Info
	Jobs []host.JobInfo `json:"jobs"`
}

func (s *Server) getSession(w http.ResponseWriter, r *http.Request) {
	info, err := s.host.Get(r.Context(), r.PathValue("id"))
	if err != nil {
		writeError(w, err)
		return
	}
	jobs := s.host.Jobs(info.Header.ID)
	if jobs == nil {
		jobs = []host.JobInfo{}
	}
	writeJSON(w, http.StatusOK, sessionView{Info: info, Jobs: jobs})
}

func (s *Server) sessionEvents(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	after := int64(-1)
	if v := q.Get("after"); v != "" {
		n, err := parseSeq(v)
		if err != nil {
			writeError(w, err)
			return
		}
		after = n
	}
	limit := 1000
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxEventsLimit {
			writeError(w, newError(CodeInvalidArgument, fmt.Sprintf("limit must be between 1 and %d", maxEventsLimit)))
			return
		}
		limit = n
	}
	events, next, err := s.host.Events(r.Context(), r.PathValue("id"), after, limit)
	if err != nil {
		writeError(w, err)
		return
	}
	if events == nil {
		events = []session.Event{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"events": events, "next": next})
}

// messageRequest is the body of POST /api/sessions/{id}/messages.
type messageRequest struct {
	Text     string         `json:"text"`
	Images   []imageRequest `json:"images"`
	Delivery string         `json:"delivery"`
}

type imageRequest struct {
	MediaType string `json:"mediaType"`
	Data      string `json:"data"`
}

func (s *Server) sendMessage(w http.ResponseWriter, r *http.Request) {
	var req messageRequest
	if err := decode(w, r, s.opts.MaxBody, &req); err != nil {
		writeError(w, err)
		return
	}
	d := host.Delivery(req.Delivery)
	switch d {
	case "":
		d = "queue"
	case "queue", "steer":
	default:
		writeError(w, newError(CodeInvalidArgument, fmt.Sprintf("delivery must be \"queue\" or \"steer\", not %q", req.Delivery)))
		return
	}
	if strings.TrimSpace(req.Text) == "" && len(req.Images) == 0 {
		writeError(w, newError(CodeInvalidArgument, "a message needs text or an image"))
		return
	}
	msg := agent.NewUserMessage(req.Text)
	if req.Text == "" {
		msg.Content = nil
	}
	for i, im := range req.Images {
		if !strings.HasPrefix(im.MediaType, "image/") || im.Data == "" {
			writeError(w, newError(CodeInvalidArgument, fmt.Sprintf("images[%d] needs an image/* mediaType and base64 data", i)))
			return
		}
		msg.Content = append(msg.Content, llm.Block{Type: llm.BlockImage, MediaType: im.MediaType, Data: im.Data})
	}
	if err := s.host.Send(r.Context(), r.PathValue("id"), msg, d); err != nil {
		writeError(w, err)
		return
	}
	// The id names a queued message for POST …/queue/{messageId}.
	writeJSON(w, http.StatusAccepted, map[string]any{"accepted": true, "messageId": msg.ID})
}

func (s *Server) cancel(w http.ResponseWriter, r *http.Request) {
	var req struct {
		ClearQueue bool `json:"clearQueue"`
	}
	if err := decode(w, r, s.opts.MaxBody, &req); err != nil {
		writeError(w, err)
		return
	}
	if err := s.host.Cancel(r.Context(), r.PathValue("id"), req.ClearQueue); err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusAccepted, map[string]any{"accepted": true})
}

func (s *Server) answer(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Decision string `json:"decision"`
		Feedback string `json:"feedback"`
	}
	if err := decode(w, r, s.opts.MaxBody, &req); err != nil {
		writeError(w, err)
		return
	}
	if req.Decision != "allow-once" && req.Decision != "reject" {
		writeError(w, newError(CodeInvalidArgument, fmt.Sprintf("decision must be \"allow-once\" or \"reject\", not %q", req.Decision)))
		return
	}
	if err := s.host.Answer(r.Context(), r.PathValue("id"), r.PathValue("approvalId"), host.Answer{Decision: req.Decision, Feedback: req.Feedback}); err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"ok": true})
}

func (s *Server) tree(w http.ResponseWriter, r *http.Request) {
	rows, err := s.host.Tree(r.Context(), r.PathValue("id"))
	if err != nil {
		writeError(w, err)
		return
	}
	if rows == nil {
		writeJSON(w, http.StatusOK, map[string]any{"rows": []any{}})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"rows": rows})
}

func (s *Server) fork(w http.ResponseWriter, r *http.Request) {
	if err := decode(w, r, s.opts.MaxBody, &struct{}{}); err != nil {
		writeError(w, err)
		return
	}
	info, err := s.host.Fork(r.Context(), r.PathValue("id"))
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, info)
}

// exportWriter sends the headers on the first write, so an export that
// fails before writing anything can still answer with a JSON error.
type exportWriter struct {
	w       http.ResponseWriter
	started bool
}

func (e *exportWriter) Write(p []byte) (int, error) {
	if !e.started {
		e.started = true
		e.w.Header().Set("Content-Type", "application/x-ndjson")
		e.w.WriteHeader(http.StatusOK)
	}
	return e.w.Write(p)
}

func (s *Server) export(w http.ResponseWriter, r *http.Request) {
	info, err := s.host.Get(r.Context(), r.PathValue("id"))
	if err != nil {
		writeError(w, err)
		return
	}
	w.Header().Set("Content-Disposition", fmt.Sprintf("attachment; filename=%q", info.Header.ID+".jsonl"))
	ew := &exportWriter{w: w}
	if err := s.host.Export(r.Context(), info.Header.ID, ew); err != nil {
		if !ew.started {
			w.Header().Del("Content-Disposition")
			writeError(w, err)
		}
		// Started: the client sees a truncated body (no closing line).
		return
	}
	if !ew.started {
		_, _ = ew.Write(nil)
	}
}

func (s *Server) approvals(w http.ResponseWriter, r *http.Request) {
	list := s.host.Approvals("")
	if list == nil {
		list = []host.Approval{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"approvals": list})
}
