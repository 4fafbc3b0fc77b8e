package acp

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"time"

	"github.com/dsh-dev/dsh/internal/host"
	"github.com/dsh-dev/dsh/internal/jsonrpc"
	"github.com/dsh-dev/dsh/internal/mcp"
	"github.com/dsh-dev/dsh/internal/permission"
)

// listPage is how many sessions one session/list answer holds.
const listPage = 50

type newParams struct {
	Cwd                   string            `json:"cwd"`
	MCPServers            []json.RawMessage `json:"mcpServers"`
	AdditionalDirectories []string          `json:"additionalDirectories"`
}

// checkCwd enforces ACP's absolute cwd.
func checkCwd(cwd string) *jsonrpc.Error {
	if cwd == "" || !filepath.IsAbs(cwd) {
		return invalidParams("cwd %q: an absolute path is required", cwd)
	}
	return nil
}

// noteIgnored logs what a session request named that dsh does not use.
func (s *server) noteIgnored(method string, dirs []string) {
	if len(dirs) > 0 {
		fmt.Fprintf(s.o.Log, "dsh acp: %s: additionalDirectories ignored (dsh sessions have one working directory)\n", method)
	}
}

func (s *server) newSession(ctx context.Context, params json.RawMessage) (any, *jsonrpc.Error) {
	var p newParams
	if err := decode(params, &p); err != nil {
		return nil, err
	}
	if err := checkCwd(p.Cwd); err != nil {
		return nil, err
	}
	s.noteIgnored("session/new", p.AdditionalDirectories)
	servers, rerr := mcpConfigs(p.MCPServers)
	if rerr != nil {
		return nil, rerr
	}
	info, err := s.h.Create(ctx, host.CreateRequest{
		Cwd: p.Cwd, Model: s.o.Model, Permission: s.o.Permission, AgentPreset: s.o.AgentPreset, MCPServers: servers,
	})
	if err != nil {
		return nil, hostError(err)
	}
	ss, rerr := s.attach(ctx, info, false, servers)
	if rerr != nil {
		return nil, rerr
	}
	return obj{"sessionId": info.Header.ID, "modes": s.modes(ss), "configOptions": s.configOptions(ss)}, nil
}

type loadParams struct {
	SessionID             string            `json:"sessionId"`
	Cwd                   string            `json:"cwd"`
	MCPServers            []json.RawMessage `json:"mcpServers"`
	AdditionalDirectories []string          `json:"additionalDirectories"`
}

// loadSession is session/load (replay) and session/resume (no replay).
func (s *server) loadSession(ctx context.Context, params json.RawMessage, replay bool) (any, *jsonrpc.Error) {
	var p loadParams
	if err := decode(params, &p); err != nil {
		return nil, err
	}
	if p.SessionID == "" {
		return nil, invalidParams("sessionId is required")
	}
	if err := checkCwd(p.Cwd); err != nil {
		return nil, err
	}
	method := "session/resume"
	if replay {
		method = "session/load"
	}
	s.noteIgnored(method, p.AdditionalDirectories)
	servers, rerr := mcpConfigs(p.MCPServers)
	if rerr != nil {
		return nil, rerr
	}
	info, err := s.h.Get(ctx, p.SessionID)
	if err != nil {
		return nil, hostError(err)
	}
	if info.Header.ID != p.SessionID {
		// ACP ids are exact; the host's prefix matching is a CLI nicety.
		return nil, &jsonrpc.Error{Code: CodeResourceNotFound, Message: "no session " + p.SessionID}
	}
	if filepath.Clean(p.Cwd) != filepath.Clean(info.Header.Cwd) {
		return nil, invalidParams("cwd %q is not the session's working directory %q", p.Cwd, info.Header.Cwd)
	}
	if ss := s.session(p.SessionID); ss != nil {
		// Already open here: a load still replays what is logged.
		if replay {
			if rerr := s.replay(ctx, p.SessionID, info.Header.Cwd); rerr != nil {
				return nil, rerr
			}
		}
		return obj{"modes": s.modes(ss), "configOptions": s.configOptions(ss)}, nil
	}
	if info, err = s.h.Resume(ctx, host.ResumeRequest{ID: p.SessionID, MCPServers: servers}); err != nil {
		return nil, hostError(err)
	}
	ss, rerr := s.attach(ctx, info, replay, servers)
	if rerr != nil {
		return nil, rerr
	}
	return obj{"modes": s.modes(ss), "configOptions": s.configOptions(ss)}, nil
}

// attach adds a live session to the connection: its log so far is
// folded into a translator (and sent as replay updates when replay is
// set), then a pump follows the rest.
func (s *server) attach(ctx context.Context, info host.Info, replay bool, servers []mcp.ServerConfig) (*sess, *jsonrpc.Error) {
	id := info.Header.ID
	tr := newTranslator(info.Header.Cwd, replay)
	after := int64(-1)
	for {
		events, next, err := s.h.Events(ctx, id, after, host.MaxEventsLimit)
		if err != nil {
			return nil, hostError(err)
		}
		for _, e := range events {
			ups := tr.translate(e)
			if !replay {
				continue
			}
			for _, u := range ups {
				if err := s.conn.Notify("session/update", obj{"sessionId": id, "update": u}); err != nil {
					return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: err.Error()}
				}
			}
		}
		if len(events) == 0 {
			break
		}
		after = next
	}
	tr.replay = false
	ss := newSess(s, id, tr)
	ss.mcp = servers
	s.mu.Lock()
	if old := s.sessions[id]; old != nil {
		s.mu.Unlock()
		return old, nil
	}
	s.sessions[id] = ss
	s.mu.Unlock()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		ss.pump(after)
	}()
	// Approvals the session was already waiting for.
	for _, a := range s.h.Approvals(id) {
		s.ask(a)
	}
	return ss, nil
}

// replay sends session id's logged conversation again, through a
// translator of its own.
func (s *server) replay(ctx context.Context, id, cwd string) *jsonrpc.Error {
	tr := newTranslator(cwd, true)
	for after := int64(-1); ; {
		events, next, err := s.h.Events(ctx, id, after, host.MaxEventsLimit)
		if err != nil {
			return hostError(err)
		}
		if len(events) == 0 {
			return nil
		}
		for _, e := range events {
			for _, u := range tr.translate(e) {
				if err := s.conn.Notify("session/update", obj{"sessionId": id, "update": u}); err != nil {
					return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: err.Error()}
				}
			}
		}
		after = next
	}
}

// modePlan is the ACP mode of plan mode, beside the permission presets.
const modePlan = "plan"

// modes is the session's mode state: the permission presets, and plan
// mode (current while the session is in it; its permission preset stays
// what it was and applies again when plan mode ends).
func (s *server) modes(ss *sess) obj {
	var avail []obj
	for _, p := range permission.Presets() {
		avail = append(avail, obj{"id": p.Name, "name": p.Label, "description": presetDescription(p)})
	}
	avail = append(avail, obj{"id": modePlan, "name": "Plan", "description": "explore and present a plan for approval before changing anything (writing tools are refused, commands run read-only)"})
	return obj{"currentModeId": ss.currentMode(), "availableModes": avail}
}

func presetDescription(p permission.Preset) string {
	d := fmt.Sprintf("sandbox %s, approvals %s", p.Knobs.Mode, p.Knobs.Approval)
	if p.AutoReview {
		d += ", asks go to the automatic reviewer"
	}
	return d
}

// currentModel is the session's "provider/model": the live route, else
// the last one its log names, else the default.
func (s *server) currentModel(ss *sess) string {
	if spec, _, ok := s.h.Route(ss.id); ok {
		return spec
	}
	if m := ss.model(); m != "" {
		return m
	}
	spec, _ := s.defaultRoute()
	return spec
}

// configOptions is the model selector from the provider catalog.
func (s *server) configOptions(ss *sess) []obj {
	cur := s.currentModel(ss)
	var opts []obj
	seen := false
	for _, p := range s.h.App().Catalog.Providers() {
		for _, m := range p.Models {
			v := p.ID + "/" + m.ID
			seen = seen || v == cur
			opts = append(opts, obj{"value": v, "name": v})
		}
	}
	if !seen {
		opts = append([]obj{{"value": cur, "name": cur}}, opts...)
	}
	return []obj{{"id": "model", "name": "Model", "category": "model", "type": "select", "currentValue": cur, "options": opts}}
}

func (s *server) listSessions(ctx context.Context, params json.RawMessage) (any, *jsonrpc.Error) {
	var p struct {
		Cwd    string `json:"cwd"`
		Cursor string `json:"cursor"`
	}
	if len(params) > 0 && string(params) != "null" {
		if err := decode(params, &p); err != nil {
			return nil, err
		}
	}
	if p.Cwd != "" {
		if err := checkCwd(p.Cwd); err != nil {
			return nil, err
		}
	}
	page, err := s.h.ListPage(ctx, host.ListFilter{Cwd: p.Cwd, Limit: listPage, Before: p.Cursor})
	if err != nil {
		if host.ErrorCode(err) == host.CodeInvalidArgument {
			return nil, invalidParams("cursor %q is not one this agent returned: %v", p.Cursor, err)
		}
		return nil, hostError(err)
	}
	out := []obj{}
	for _, in := range page.Sessions {
		e := obj{"sessionId": in.Header.ID, "cwd": in.Header.Cwd}
		if in.Title != "" {
			e["title"] = in.Title
		}
		if in.UpdatedAt > 0 {
			e["updatedAt"] = time.UnixMilli(in.UpdatedAt).UTC().Format(time.RFC3339Nano)
		}
		out = append(out, e)
	}
	res := obj{"sessions": out}
	if page.Next != "" {
		res["nextCursor"] = page.Next
	}
	return res, nil
}

func (s *server) closeSession(ctx context.Context, params json.RawMessage) (any, *jsonrpc.Error) {
	var p struct {
		SessionID string `json:"sessionId"`
	}
	if err := decode(params, &p); err != nil {
		return nil, err
	}
	s.mu.Lock()
	ss := s.sessions[p.SessionID]
	delete(s.sessions, p.SessionID)
	s.mu.Unlock()
	if ss == nil {
		return nil, &jsonrpc.Error{Code: CodeResourceNotFound, Message: "session " + p.SessionID + " is not open on this connection"}
	}
	// Dispose cancels a running turn; its prompt is answered cancelled
	// once the pump has passed the turn's end.
	err := s.h.Dispose(ctx, ss.id)
	ss.waitIdle(ctx)
	ss.stop()
	if err != nil {
		return nil, hostError(err)
	}
	return obj{}, nil
}

// reopen disposes an idle session and opens it again with new choices;
// what changed is logged by the wiring (permission/preset, and the model
// in the next request/context).
func (s *server) reopen(ctx context.Context, ss *sess, r host.ResumeRequest) *jsonrpc.Error {
	if ss.busy() {
		return &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: "session " + ss.id + " is running a prompt"}
	}
	if info, err := s.h.Get(ctx, ss.id); err == nil && info.Status != host.StatusIdle {
		return &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: "session " + ss.id + " is " + string(info.Status)}
	}
	if err := s.h.Dispose(ctx, ss.id); err != nil {
		return hostError(err)
	}
	r.ID, r.MCPServers = ss.id, ss.mcp
	if _, err := s.h.Resume(ctx, r); err != nil {
		return hostError(err)
	}
	return nil
}

func (s *server) attached(id string) (*sess, *jsonrpc.Error) {
	ss := s.session(id)
	if ss == nil {
		return nil, &jsonrpc.Error{Code: CodeResourceNotFound, Message: "session " + id + " is not open on this connection"}
	}
	return ss, nil
}

func (s *server) setMode(ctx context.Context, params json.RawMessage) (any, *jsonrpc.Error) {
	var p struct {
		SessionID string `json:"sessionId"`
		ModeID    string `json:"modeId"`
	}
	if err := decode(params, &p); err != nil {
		return nil, err
	}
	ss, rerr := s.attached(p.SessionID)
	if rerr != nil {
		return nil, rerr
	}
	if p.ModeID == modePlan || ss.planMode() {
		// Plan mode is logged into the live session: one the host disposed
		// while idle is reopened as a prompt would reopen it (its own model,
		// the client's MCP servers), not by the host's on-demand resume.
		if _, _, live := s.h.Route(ss.id); !live {
			if _, err := s.h.Resume(ctx, host.ResumeRequest{ID: ss.id, Model: ss.model(), MCPServers: ss.mcp}); err != nil {
				return nil, hostError(err)
			}
		}
	}
	if p.ModeID == modePlan {
		if err := s.h.SetPlanMode(ctx, ss.id, true); err != nil {
			return nil, hostError(err)
		}
		// The pump sends current_mode_update when it reads plan/mode.
		ss.waitFor(ctx, func() bool { return ss.shownPlan })
		return obj{}, nil
	}
	if _, ok := permission.LookupPreset(p.ModeID); !ok {
		return nil, invalidParams("unknown mode %q", p.ModeID)
	}
	if ss.planMode() {
		// Leaving plan mode for a preset: plan mode ends first; the
		// session is reopened only when the preset changes too.
		if err := s.h.SetPlanMode(ctx, ss.id, false); err != nil {
			return nil, hostError(err)
		}
		ss.waitFor(ctx, func() bool { return !ss.shownPlan })
		if p.ModeID == ss.currentMode() {
			return obj{}, nil
		}
	}
	if rerr := s.reopen(ctx, ss, host.ResumeRequest{Permission: p.ModeID, Model: s.currentModel(ss)}); rerr != nil {
		return nil, rerr
	}
	// The pump sends current_mode_update when it reads the logged
	// permission/preset; answer after it has.
	ss.waitMode(ctx, p.ModeID)
	return obj{}, nil
}

func (s *server) setConfigOption(ctx context.Context, params json.RawMessage) (any, *jsonrpc.Error) {
	var p struct {
		SessionID string          `json:"sessionId"`
		ConfigID  string          `json:"configId"`
		Value     json.RawMessage `json:"value"`
	}
	if err := decode(params, &p); err != nil {
		return nil, err
	}
	ss, rerr := s.attached(p.SessionID)
	if rerr != nil {
		return nil, rerr
	}
	if p.ConfigID != "model" {
		return nil, invalidParams("unknown config option %q (dsh offers \"model\")", p.ConfigID)
	}
	var model string
	if json.Unmarshal(p.Value, &model) != nil || model == "" {
		return nil, invalidParams("the model option takes a \"provider/model\" string")
	}
	if _, err := s.h.App().Catalog.Resolve(model, ""); err != nil {
		return nil, invalidParams("model %q: %v", model, err)
	}
	if rerr := s.reopen(ctx, ss, host.ResumeRequest{Model: model}); rerr != nil {
		return nil, rerr
	}
	opts := s.configOptions(ss)
	if err := s.conn.Notify("session/update", obj{"sessionId": ss.id, "update": obj{"sessionUpdate": "config_option_update", "configOptions": opts}}); err != nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: err.Error()}
	}
	return obj{"configOptions": opts}, nil
}
