package acp

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/dsh-dev/dsh/internal/llm"
	"github.com/dsh-dev/dsh/internal/permission"
	"github.com/dsh-dev/dsh/internal/projection"
	"github.com/dsh-dev/dsh/internal/session"
	"github.com/dsh-dev/dsh/internal/tools/question"
)

// obj is a JSON object on the wire.
type obj = map[string]any

// translator turns session events into ACP session/update payloads. It
// holds only what it folded from the events it was given (open tool
// calls, the context window, the mode), so the updates of a session are a
// function of its log.
type translator struct {
	cwd string
	// replay renders a stored conversation (session/load): whole
	// messages instead of chunks, user messages included.
	replay bool

	calls   map[string]*callState // open tool calls by call id
	asks    map[string]string     // approval id → call id, while asked
	order   []string              // open call ids, oldest first
	window  int64                 // context window of the last request/context
	mode    string                // last permission preset seen
	plan    bool                  // plan mode, from the last plan/mode
	model   string                // last "provider/model" of request/context
	turnEnd *session.TurnEnd      // set by the last turn/end translated
}

// currentMode is the ACP mode id: plan while in plan mode, else the
// permission preset (the default one before any was logged).
func (t *translator) currentMode() string {
	switch {
	case t.plan:
		return "plan"
	case t.mode == "":
		return permission.DefaultPreset
	}
	return t.mode
}

// callState is an open tool call: announced, not yet final.
type callState struct {
	name       string
	args       obj
	inProgress bool
	asked      bool // an approval was asked: in_progress waits for its answer
}

func newTranslator(cwd string, replay bool) *translator {
	return &translator{cwd: cwd, replay: replay, calls: map[string]*callState{}, asks: map[string]string{}}
}

// translate returns the updates of one event, in order.
func (t *translator) translate(e session.Event) []obj {
	var out []obj
	t.turnEnd = nil
	// A call that was announced and asked nothing is running once the
	// log moves on to anything but its own announcement or approval.
	if !t.replay && e.Type != session.TypeToolCall && e.Type != session.TypeApprovalAsked && e.Type != session.TypeToolResult {
		out = append(out, t.startPending()...)
	}
	switch e.Type {
	case session.TypeUserMessage:
		var m llm.Message
		if e.Decode(&m) != nil {
			return out
		}
		// A goal round's prompt comes from the host's goal driver, not the
		// client, so it is shown live as well as in a replay.
		if m.Source.Kind != "goal" && (!t.replay || m.Source.Kind != "user") {
			return out // the client sent it, or harness context (runtime snapshots, notices)
		}
		for _, b := range m.Content {
			if c, ok := contentOf(b); ok {
				out = append(out, obj{"sessionUpdate": "user_message_chunk", "content": c})
			}
		}
	case session.TypeAssistantChunk:
		if t.replay {
			return out
		}
		var p session.AssistantChunk
		if e.Decode(&p) != nil || p.Chunk.Text == "" {
			return out
		}
		switch p.Chunk.Type {
		case llm.ChunkTextDelta:
			out = append(out, chunk("agent_message_chunk", p.Chunk.Text))
		case llm.ChunkReasoningDelta:
			out = append(out, chunk("agent_thought_chunk", p.Chunk.Text))
		}
	case session.TypeAssistantMsg:
		var p session.AssistantMessage
		if e.Decode(&p) != nil {
			return out
		}
		if t.replay {
			for _, b := range p.Message.Content {
				switch {
				case b.Type == llm.BlockReasoning && b.Text != "":
					out = append(out, chunk("agent_thought_chunk", b.Text))
				case b.Type == llm.BlockText && b.Text != "":
					out = append(out, chunk("agent_message_chunk", b.Text))
				}
			}
		}
		if u := t.usage(p.Usage); u != nil {
			out = append(out, u)
		}
	case session.TypeToolCall:
		var p session.ToolCall
		if e.Decode(&p) != nil {
			return out
		}
		out = append(out, t.call(p))
	case session.TypeApprovalAsked:
		var p permission.ApprovalAsked
		if e.Decode(&p) == nil {
			if c := t.calls[p.CallID]; c != nil {
				c.asked = true
				t.asks[p.ID] = p.CallID
			}
		}
		out = append(out, t.startPending()...)
	case session.TypeApprovalDecided:
		// The asked call runs when allowed; a rejection ends in its
		// failed result.
		var p permission.ApprovalDecided
		if e.Decode(&p) == nil {
			id := t.asks[p.ID]
			delete(t.asks, p.ID)
			if c := t.calls[id]; c != nil && !c.inProgress && allowed(string(p.Outcome)) {
				c.asked = false
				out = append(out, t.progress(id))
			}
		}
	case session.TypeToolResult:
		var p session.ToolResult
		if e.Decode(&p) != nil {
			return out
		}
		if u := t.result(p); u != nil {
			out = append(out, u)
		}
	case session.TypeTodoWrite:
		var p projection.TodoWrite
		if e.Decode(&p) == nil {
			out = append(out, plan(p.Todos))
		}
	case session.TypeTitle:
		var p session.Title
		if e.Decode(&p) == nil && p.Title != "" {
			out = append(out, obj{"sessionUpdate": "session_info_update", "title": p.Title})
		}
	case session.TypeRequestContext:
		var p session.RequestContext
		if e.Decode(&p) == nil {
			if p.ContextWindow > 0 {
				t.window = int64(p.ContextWindow)
			}
			t.model = p.Provider + "/" + p.Model
		}
	case session.TypePermissionPreset:
		var p permission.PresetSelected
		if e.Decode(&p) == nil && p.Preset != t.mode {
			t.mode = p.Preset
			// In plan mode the ACP mode stays plan.
			if !t.replay && !t.plan {
				out = append(out, obj{"sessionUpdate": "current_mode_update", "currentModeId": p.Preset})
			}
		}
	case session.TypePlanMode:
		var p question.PlanMode
		if e.Decode(&p) == nil && p.Active != t.plan {
			t.plan = p.Active
			if !t.replay {
				out = append(out, obj{"sessionUpdate": "current_mode_update", "currentModeId": t.currentMode()})
			}
		}
	case session.TypeTurnEnd:
		var p session.TurnEnd
		if e.Decode(&p) == nil {
			t.turnEnd = &p
		}
		// Every call gets one final update, even one the log never
		// answered (a crash repaired later, a cancelled turn).
		out = append(out, t.closeOpen()...)
	}
	return out
}

func allowed(outcome string) bool {
	return strings.HasPrefix(outcome, "allowed")
}

func chunk(kind, text string) obj {
	return obj{"sessionUpdate": kind, "content": obj{"type": "text", "text": text}}
}

// contentOf renders a user block as an ACP content block.
func contentOf(b llm.Block) (obj, bool) {
	switch b.Type {
	case llm.BlockText:
		if b.Text == "" {
			return nil, false
		}
		return obj{"type": "text", "text": b.Text}, true
	case llm.BlockImage:
		return obj{"type": "image", "data": b.Data, "mimeType": b.MediaType}, true
	}
	return nil, false
}

// usage is the usage_update of a model request: the context it used
// (everything read, plus what it wrote) out of the window.
func (t *translator) usage(u *llm.Usage) obj {
	if u == nil || t.window <= 0 {
		return nil
	}
	used := u.InputTokens + u.CacheReadTokens + u.CacheWriteTokens + u.OutputTokens
	return obj{"sessionUpdate": "usage_update", "used": used, "size": t.window}
}

// call announces a tool call.
func (t *translator) call(p session.ToolCall) obj {
	args := obj{}
	if err := json.Unmarshal([]byte(p.Arguments), &args); err != nil || args == nil {
		args = obj{"arguments": p.Arguments}
	}
	if _, open := t.calls[p.CallID]; !open {
		t.order = append(t.order, p.CallID)
	}
	t.calls[p.CallID] = &callState{name: p.Name, args: args}
	u := obj{
		"sessionUpdate": "tool_call", "toolCallId": p.CallID, "title": title(p.Name, args),
		"kind": kindOf(p.Name), "status": "pending", "rawInput": args,
	}
	if loc := t.locations(args); loc != nil {
		u["locations"] = loc
	}
	return u
}

// startPending marks every announced call that asked nothing as running.
func (t *translator) startPending() []obj {
	var out []obj
	for _, id := range t.order {
		if c := t.calls[id]; !c.inProgress && !c.asked {
			out = append(out, t.progress(id))
		}
	}
	return out
}

func (t *translator) progress(id string) obj {
	t.calls[id].inProgress = true
	return obj{"sessionUpdate": "tool_call_update", "toolCallId": id, "status": "in_progress"}
}

// result is the final update of a call.
func (t *translator) result(p session.ToolResult) obj {
	c := t.calls[p.CallID]
	if c == nil {
		// A result without its call in what was translated (a stream
		// that started mid-turn): still final, still once.
		c = &callState{name: p.Name, args: obj{}}
	}
	delete(t.calls, p.CallID)
	t.order = removeID(t.order, p.CallID)
	status := "completed"
	if p.IsError {
		status = "failed"
	}
	var content []obj
	if text := resultText(p.Content); text != "" {
		content = append(content, obj{"type": "content", "content": obj{"type": "text", "text": text}})
	}
	if !p.IsError {
		if d := t.diff(c); d != nil {
			content = append(content, d)
		}
	}
	raw := obj{"isError": p.IsError}
	if p.Error != nil {
		raw["error"] = obj{"code": p.Error.Code, "reason": p.Error.Reason}
	}
	if len(p.Meta) > 0 {
		var m any
		if json.Unmarshal(p.Meta, &m) == nil {
			raw["meta"] = m
		}
	}
	u := obj{"sessionUpdate": "tool_call_update", "toolCallId": p.CallID, "status": status, "rawOutput": raw}
	if content != nil {
		u["content"] = content
	}
	return u
}

// closeOpen fails every call still open.
func (t *translator) closeOpen() []obj {
	var out []obj
	for _, id := range t.order {
		out = append(out, obj{"sessionUpdate": "tool_call_update", "toolCallId": id, "status": "failed",
			"rawOutput": obj{"isError": true, "error": obj{"code": "NO_RESULT", "reason": "the turn ended before the call had a result"}}})
	}
	t.calls, t.order = map[string]*callState{}, nil
	return out
}

func removeID(ids []string, id string) []string {
	for i, x := range ids {
		if x == id {
			return append(ids[:i:i], ids[i+1:]...)
		}
	}
	return ids
}

func resultText(bs []llm.Block) string {
	var parts []string
	for _, b := range bs {
		if b.Type == llm.BlockText && b.Text != "" {
			parts = append(parts, b.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// kindOf maps a dsh tool onto an ACP tool kind.
func kindOf(name string) string {
	switch name {
	case "read", "read_image":
		return "read"
	case "write", "edit", "str_replace_based_edit_tool":
		return "edit"
	case "bash", "terminal_open", "terminal_send", "terminal_signal":
		return "execute"
	case "terminal_read":
		return "read"
	case "glob", "grep", "lsp":
		return "search"
	case "web_fetch", "web_search":
		return "fetch"
	}
	return "other"
}

func str(args obj, keys ...string) string {
	for _, k := range keys {
		if s, ok := args[k].(string); ok && s != "" {
			return s
		}
	}
	return ""
}

// title is a call's one-line label.
func title(name string, args obj) string {
	var key string
	switch name {
	case "bash":
		key = str(args, "command")
	case "read", "write", "edit", "read_image":
		key = str(args, "file_path", "path")
	case "str_replace_based_edit_tool":
		key = strings.TrimSpace(str(args, "command") + " " + str(args, "path"))
	case "glob", "grep":
		key = str(args, "pattern")
	case "web_fetch":
		key = str(args, "url")
	case "web_search":
		key = str(args, "query")
	case "terminal_send":
		key = strings.TrimSpace(str(args, "session_id") + " " + str(args, "text"))
	case "terminal_open":
		key = str(args, "command", "type")
	case "lsp":
		key = lspKey(args)
	default:
		key = str(args, "description", "prompt", "path", "command", "id")
	}
	if i := strings.IndexByte(key, '\n'); i >= 0 {
		key = key[:i] + " …"
	}
	if key == "" {
		return name
	}
	return name + " " + key
}

// lspKey labels an lsp call: "goToDefinition main.go:12:5".
func lspKey(args obj) string {
	key := strings.TrimSpace(str(args, "operation") + " " + str(args, "file_path"))
	if l, ok := args["line"].(float64); ok {
		key += fmt.Sprintf(":%d", int(l))
		if c, ok := args["character"].(float64); ok {
			key += fmt.Sprintf(":%d", int(c))
		}
	}
	return key
}

// path is the absolute file a call names, "" when none.
func (t *translator) path(args obj) string {
	p := str(args, "file_path", "path")
	if p == "" {
		return ""
	}
	if !filepath.IsAbs(p) {
		p = filepath.Join(t.cwd, p)
	}
	return filepath.Clean(p)
}

func (t *translator) locations(args obj) []obj {
	if p := t.path(args); p != "" {
		return []obj{{"path": p}}
	}
	return nil
}

// diff is the diff content of a successful edit, from its arguments.
func (t *translator) diff(c *callState) obj {
	p := t.path(c.args)
	if p == "" {
		return nil
	}
	switch c.name {
	case "edit":
		return obj{"type": "diff", "path": p, "oldText": str(c.args, "old_string"), "newText": str(c.args, "new_string")}
	case "write":
		if s, ok := c.args["content"].(string); ok {
			return obj{"type": "diff", "path": p, "newText": s}
		}
	case "str_replace_based_edit_tool":
		switch str(c.args, "command") {
		case "str_replace":
			return obj{"type": "diff", "path": p, "oldText": str(c.args, "old_str"), "newText": str(c.args, "new_str")}
		case "create":
			return obj{"type": "diff", "path": p, "newText": str(c.args, "file_text")}
		}
	}
	return nil
}

// plan renders the todo list as an ACP plan. Each entry carries the
// priority the model gave it; ACP requires one on every entry, and an
// item given none is "medium", the middle of the same three ranks. A
// status ACP does not know becomes "pending".
func plan(todos []projection.Todo) obj {
	entries := make([]obj, 0, len(todos))
	for _, td := range todos {
		status := td.Status
		switch status {
		case "pending", "in_progress", "completed":
		default:
			status = "pending"
		}
		priority := td.Priority
		if priority == "" {
			priority = projection.TodoMedium
		}
		entries = append(entries, obj{"content": td.Content, "priority": priority, "status": status})
	}
	return obj{"sessionUpdate": "plan", "entries": entries}
}
