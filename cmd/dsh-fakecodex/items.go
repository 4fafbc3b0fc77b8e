package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"
)

func (s *server) itemStarted(t *activeTurn, item any, startedMs int64) {
	s.notify("item/started", itemStarted{Item: item, ThreadID: t.th.ID, TurnID: t.id, StartedAtMs: startedMs})
}

func (s *server) itemCompleted(t *activeTurn, item any) {
	s.notify("item/completed", itemCompleted{Item: item, ThreadID: t.th.ID, TurnID: t.id, CompletedAtMs: nowMs()})
}

func (s *server) nextCallID() string {
	s.callSeq++
	return fmt.Sprintf("call_%d", s.callSeq)
}

// emitItem plays one scripted item. A non-empty status ends the turn with
// it ("interrupted").
func (s *server) emitItem(t *activeTurn, it *ItemScript) (string, error) {
	switch it.Type {
	case "agentMessage":
		s.emitAgentMessage(t, it.Text, phase(it.Phase, nil))
	case "commandExecution":
		item := s.commandItem(t, it)
		s.itemStarted(t, item, item.StartedAtMs)
		s.finishCommand(t, item, it)
	case "fileChange":
		item := s.fileChangeItem(it.Path, it.Kind, it.Diff, it.MovePath)
		s.itemStarted(t, item, item.StartedAtMs)
		s.finishFileChange(t, item, "completed")
	case "imageView":
		item := imageViewItem{Type: "imageView", ID: s.nextCallID(), Path: it.Path}
		s.itemStarted(t, item, nowMs())
		s.itemCompleted(t, item)
	case "mcpToolCall":
		s.emitMcpToolCall(t, it)
	case "approval":
		return s.emitApproval(t, it)
	}
	return "", nil
}

// emitAgentMessage streams an agentMessage: item/started with empty text
// and null phase, deltas, item/completed with the text and phase.
func (s *server) emitAgentMessage(t *activeTurn, text string, ph *string) *agentMessageItem {
	s.msgSeq++
	item := agentMessageItem{Type: "agentMessage", ID: fmt.Sprintf("msg_%d", s.msgSeq), StartedAtMs: nowMs()}
	s.itemStarted(t, item, item.StartedAtMs)
	for _, d := range chunks(text) {
		s.notify("item/agentMessage/delta", itemDelta{ThreadID: t.th.ID, TurnID: t.id, ItemID: item.ID, Delta: d})
	}
	done := nowMs()
	item.Text, item.Phase, item.CompletedAtMs = text, ph, &done
	s.itemCompleted(t, item)
	return &item
}

// chunks splits text into deltas the way a model streams: the first rune
// alone, then up to 16 runes at a time.
func chunks(text string) []string {
	var out []string
	size := 1
	for text != "" {
		n, i := 0, 0
		for i < len(text) && n < size {
			_, w := utf8.DecodeRuneInString(text[i:])
			i += w
			n++
		}
		out = append(out, text[:i])
		text = text[i:]
		size = 16
	}
	return out
}

func (s *server) commandItem(t *activeTurn, it *ItemScript) commandItem {
	cwd := it.Cwd
	if cwd == "" {
		cwd = t.th.Cwd
	}
	return commandItem{
		Type: "commandExecution", ID: s.nextCallID(), Command: it.Command, Cwd: cwd,
		Source: "agent", Status: "inProgress",
		CommandActions: []commandAction{{Type: "unknown", Command: innerCommand(it.Command)}},
		StartedAtMs:    nowMs(),
	}
}

// finishCommand "runs" the command: output delta, then item/completed.
func (s *server) finishCommand(t *activeTurn, item commandItem, it *ItemScript) {
	if it.Output != "" {
		s.notify("item/commandExecution/outputDelta", itemDelta{ThreadID: t.th.ID, TurnID: t.id, ItemID: item.ID, Delta: it.Output})
	}
	code := 0
	if it.ExitCode != nil {
		code = *it.ExitCode
	}
	item.Status = "completed"
	if code != 0 {
		item.Status = "failed"
	}
	done := nowMs()
	dur := done - item.StartedAtMs
	out := it.Output
	item.AggregatedOutput, item.ExitCode, item.DurationMs, item.CompletedAtMs = &out, &code, &dur, &done
	s.itemCompleted(t, item)
}

func (s *server) fileChangeItem(path, kind, diff string, movePath *string) fileChangeItem {
	if kind == "" {
		kind = "add"
	}
	var ck any = changeKind{Type: kind}
	if kind == "update" {
		ck = updateKind{Type: kind, MovePath: movePath}
	}
	return fileChangeItem{
		Type: "fileChange", ID: s.nextCallID(),
		Changes: []fileUpdateChange{{Path: path, Kind: ck, Diff: diff}},
		Status:  "inProgress", StartedAtMs: nowMs(),
	}
}

func (s *server) finishFileChange(t *activeTurn, item fileChangeItem, status string) {
	done := nowMs()
	item.Status, item.CompletedAtMs = status, &done
	s.itemCompleted(t, item)
}

func (s *server) emitMcpToolCall(t *activeTurn, it *ItemScript) {
	args := it.Arguments
	if len(args) == 0 {
		args = json.RawMessage("{}")
	}
	item := mcpToolCallItem{Type: "mcpToolCall", ID: s.nextCallID(), Server: it.Server, Tool: it.Tool, Status: "inProgress", Arguments: args}
	start := nowMs()
	s.itemStarted(t, item, start)
	dur := nowMs() - start
	item.DurationMs = &dur
	if it.IsError {
		msg := it.Text
		if msg == "" {
			msg = "tool call failed"
		}
		item.Status, item.Error = "failed", &mcpError{Message: msg}
	} else {
		res := &mcpResult{Content: []map[string]string{}}
		if it.Text != "" {
			res.Content = append(res.Content, map[string]string{"type": "text", "text": it.Text})
		}
		if it.ImageBase64 != "" {
			mime := it.Mime
			if mime == "" {
				mime = "image/png"
			}
			res.Content = append(res.Content, map[string]string{"type": "image", "data": it.ImageBase64, "mimeType": mime})
		}
		item.Status, item.Result = "completed", res
	}
	s.itemCompleted(t, item)
}

type commandApprovalParams struct {
	Kind                        string          `json:"kind"`
	ThreadID                    string          `json:"threadId"`
	TurnID                      string          `json:"turnId"`
	ItemID                      string          `json:"itemId"`
	StartedAtMs                 int64           `json:"startedAtMs"`
	EnvironmentID               string          `json:"environmentId"`
	Command                     string          `json:"command"`
	Cwd                         string          `json:"cwd"`
	CommandActions              []commandAction `json:"commandActions"`
	Reason                      *string         `json:"reason,omitempty"`
	ProposedExecpolicyAmendment []string        `json:"proposedExecpolicyAmendment"`
	AvailableDecisions          json.RawMessage `json:"availableDecisions"`
}

type fileChangeApprovalParams struct {
	ThreadID    string  `json:"threadId"`
	TurnID      string  `json:"turnId"`
	ItemID      string  `json:"itemId"`
	StartedAtMs int64   `json:"startedAtMs"`
	Reason      *string `json:"reason"`
	GrantRoot   *string `json:"grantRoot"`
}

// emitApproval plays an item that needs the client's approval: it asks,
// waits for the answer (serving other requests meanwhile), and completes
// the item accordingly.
func (s *server) emitApproval(t *activeTurn, it *ItemScript) (string, error) {
	var (
		method string
		params any
		cmd    commandItem
		fc     fileChangeItem
	)
	if it.Kind == "command" {
		cmd = s.commandItem(t, it)
		s.itemStarted(t, cmd, cmd.StartedAtMs)
		amend := strings.Fields(innerCommand(it.Command))
		decisions := it.AvailableDecisions
		if len(decisions) == 0 {
			decisions, _ = json.Marshal([]any{"accept",
				map[string]any{"acceptWithExecpolicyAmendment": map[string]any{"execpolicy_amendment": amend}},
				"cancel"})
		}
		method = "item/commandExecution/requestApproval"
		params = commandApprovalParams{
			Kind: "command", ThreadID: t.th.ID, TurnID: t.id, ItemID: cmd.ID, StartedAtMs: cmd.StartedAtMs,
			EnvironmentID: "local", Command: cmd.Command, Cwd: cmd.Cwd, CommandActions: cmd.CommandActions,
			Reason: it.Reason, ProposedExecpolicyAmendment: amend, AvailableDecisions: decisions,
		}
	} else {
		fc = s.fileChangeItem(it.Path, it.ChangeKind, it.Diff, it.MovePath)
		s.itemStarted(t, fc, fc.StartedAtMs)
		method = "item/fileChange/requestApproval"
		params = fileChangeApprovalParams{ThreadID: t.th.ID, TurnID: t.id, ItemID: fc.ID, StartedAtMs: nowMs(), Reason: it.Reason}
	}
	s.notify("thread/status/changed", statusChanged{ThreadID: t.th.ID, Status: statusActive("waitingOnApproval")})
	id := s.request(method, params)
	t.pending = id
	resp, err := s.await(t, id, nil)
	if err != nil {
		return "", err
	}
	if t.interrupted {
		return "interrupted", nil // runTurn resolves the pending request
	}
	t.pending = -1
	s.notify("serverRequest/resolved", map[string]any{"threadId": t.th.ID, "requestId": id})
	s.notify("thread/status/changed", statusChanged{ThreadID: t.th.ID, Status: statusActive()})
	decision := approvalDecision(resp)
	accepted := false
	switch decision {
	case "accept", "acceptForSession", "acceptWithExecpolicyAmendment", "applyNetworkPolicyAmendment":
		accepted = true
	}
	if it.Kind == "command" {
		if accepted {
			s.finishCommand(t, cmd, it)
		} else {
			done := nowMs()
			cmd.Status, cmd.CompletedAtMs = "declined", &done
			s.itemCompleted(t, cmd)
		}
	} else {
		status := "declined"
		if accepted {
			status = "completed"
		}
		s.finishFileChange(t, fc, status)
	}
	if decision == "cancel" {
		return "interrupted", nil
	}
	return "", nil
}

// approvalDecision extracts result.decision: the string, or the single
// key of an object decision; "" for an error answer or a malformed one.
func approvalDecision(resp *inMsg) string {
	if resp == nil || len(resp.Result) == 0 {
		return ""
	}
	var r struct {
		Decision json.RawMessage `json:"decision"`
	}
	if json.Unmarshal(resp.Result, &r) != nil {
		return ""
	}
	var str string
	if json.Unmarshal(r.Decision, &str) == nil {
		return str
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(r.Decision, &obj) == nil && len(obj) == 1 {
		for k := range obj {
			return k
		}
	}
	return ""
}
