package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"time"
)

// activeTurn is the turn in progress (at most one per connection).
type activeTurn struct {
	th          *threadRecord
	id          string
	startedMs   int64
	reqID       json.RawMessage // the turn/start request
	responded   bool
	pending     int64 // server request awaiting its answer, -1 when none
	interrupted bool
	final       *agentMessageItem
	err         *turnError
}

type turnParams struct {
	ThreadID       *string         `json:"threadId"`
	Input          json.RawMessage `json:"input"`
	Cwd            *string         `json:"cwd"`
	ApprovalPolicy json.RawMessage `json:"approvalPolicy"`
	SandboxPolicy  json.RawMessage `json:"sandboxPolicy"`
	Model          *string         `json:"model"`
	Effort         *string         `json:"effort"`
}

func (s *server) turnStart(m *inMsg) error {
	var p turnParams
	if e := decodeParams(m.Params, &p); e != nil {
		return e
	}
	switch {
	case p.ThreadID == nil:
		return missingField("threadId")
	case len(p.Input) == 0 || isNull(p.Input):
		return missingField("input")
	}
	content, e := userContent(p.Input)
	if e != nil {
		return e
	}
	approval, e := checkApproval(p.ApprovalPolicy)
	if e != nil {
		return e
	}
	sandbox, e := checkSandboxPolicy(p.SandboxPolicy)
	if e != nil {
		return e
	}
	if err := s.checkpoint("turn/start"); err != nil {
		return err
	}
	th, err := s.loaded(*p.ThreadID)
	if err != nil {
		return err
	}
	if s.active != nil {
		return plainf("thread %s already has a turn in progress (%s)", s.active.th.ID, s.active.id)
	}
	if p.Cwd != nil {
		th.Cwd = *p.Cwd
	}
	if approval != nil {
		th.ApprovalPolicy = approval
	}
	if sandbox != nil {
		th.Sandbox = sandbox
	}
	if p.Model != nil {
		th.Model = *p.Model
	}
	if p.Effort != nil {
		th.ReasoningEffort = p.Effort
	}
	return s.runTurn(m, th, content)
}

// userContent validates UserInput[] and renders it as userMessage content.
func userContent(raw json.RawMessage) ([]json.RawMessage, *reqError) {
	var in []map[string]json.RawMessage
	if err := json.Unmarshal(raw, &in); err != nil {
		return nil, invalidf("invalid type: %s, expected a sequence for field `input`", raw)
	}
	out := make([]json.RawMessage, 0, len(in))
	for _, el := range in {
		var typ string
		if err := json.Unmarshal(el["type"], &typ); err != nil {
			return nil, missingField("type")
		}
		var b []byte
		switch typ {
		case "text":
			var text string
			if json.Unmarshal(el["text"], &text) != nil {
				return nil, missingField("text")
			}
			elems := el["text_elements"]
			if len(elems) == 0 || isNull(elems) {
				elems = json.RawMessage("[]")
			}
			b, _ = json.Marshal(struct {
				Type         string          `json:"type"`
				Text         string          `json:"text"`
				TextElements json.RawMessage `json:"text_elements"`
			}{"text", text, elems})
		case "localImage":
			var path string
			if json.Unmarshal(el["path"], &path) != nil {
				return nil, missingField("path")
			}
			detail := el["detail"]
			if len(detail) == 0 {
				detail = json.RawMessage("null")
			}
			b, _ = json.Marshal(struct {
				Type   string          `json:"type"`
				Detail json.RawMessage `json:"detail"`
				Path   string          `json:"path"`
			}{"localImage", detail, path})
		case "image", "skill", "mention":
			b, _ = json.Marshal(el)
		default:
			return nil, unknownVariant(typ, "text", "image", "localImage", "skill", "mention")
		}
		out = append(out, b)
	}
	return out, nil
}

// checkSandboxPolicy validates a SandboxPolicy object; nil when absent.
func checkSandboxPolicy(raw json.RawMessage) (json.RawMessage, *reqError) {
	if len(raw) == 0 || isNull(raw) {
		return nil, nil
	}
	var p struct {
		Type *string `json:"type"`
	}
	if json.Unmarshal(raw, &p) != nil {
		return nil, invalidf("invalid type: %s, expected a sandbox policy object", raw)
	}
	if p.Type == nil {
		return nil, missingField("type")
	}
	switch *p.Type {
	case "dangerFullAccess", "readOnly", "externalSandbox", "workspaceWrite":
		return raw, nil
	}
	return nil, unknownVariant(*p.Type, "dangerFullAccess", "readOnly", "externalSandbox", "workspaceWrite")
}

func (s *server) respondTurn(t *activeTurn) {
	if t.responded {
		return
	}
	t.responded = true
	s.reply(t.reqID, map[string]turnJSON{"turn": {
		ID: t.id, RootTurnID: t.id, Items: []any{}, ItemsView: "notLoaded", Status: "inProgress",
	}})
}

// runTurn plays the next scripted turn (see the package documentation for
// the order of events).
func (s *server) runTurn(m *inMsg, th *threadRecord, content []json.RawMessage) error {
	ts := &s.script.Turns[min(s.turnIdx, len(s.script.Turns)-1)]
	s.turnIdx++
	t := &activeTurn{th: th, id: newID(), startedMs: nowMs(), reqID: m.ID, pending: -1}
	warning := fmt.Sprintf("Model metadata for `%s` not found. Defaulting to fallback metadata; this can degrade performance and cause issues.", th.Model)
	if ts.Warning != nil {
		warning = *ts.Warning
	}
	if warning != "" {
		s.notify("warning", map[string]string{"threadId": th.ID, "message": warning})
	}
	if !s.script.NotifyBeforeResponse {
		s.respondTurn(t)
	}
	if s.script.Grandchild {
		s.spawnGrandchild()
	}
	s.notify("thread/status/changed", statusChanged{ThreadID: th.ID, Status: statusActive()})
	startedAt := t.startedMs / 1000
	s.notify("turn/started", threadTurn{ThreadID: th.ID, Turn: turnJSON{
		ID: t.id, RootTurnID: t.id, Items: []any{}, ItemsView: "notLoaded", Status: "inProgress", StartedAt: &startedAt,
	}})
	user := userMessageItem{Type: "userMessage", ID: newID(), Content: content, StartedAtMs: nowMs()}
	s.itemStarted(t, user, user.StartedAtMs)
	userDone := nowMs()
	user.CompletedAtMs = &userDone
	s.itemCompleted(t, user)
	if err := s.checkpoint("turn"); err != nil {
		if errors.Is(err, errHang) {
			s.respondTurn(t)
		}
		return err
	}

	s.active = t
	status, err := s.turnBody(t, ts)
	s.active = nil
	if err != nil {
		return err
	}
	s.respondTurn(t)
	if status == "interrupted" && t.pending >= 0 {
		s.notify("serverRequest/resolved", map[string]any{"threadId": th.ID, "requestId": t.pending})
		t.pending = -1
	}
	completedMs := nowMs()
	completedAt, dur := completedMs/1000, completedMs-t.startedMs
	final := turnJSON{
		ID: t.id, RootTurnID: t.id, Items: []any{}, ItemsView: "notLoaded", Status: status,
		Error: t.err, StartedAt: &startedAt, CompletedAt: &completedAt, DurationMs: &dur,
	}
	if status == "completed" {
		final.ItemsView = "summary"
		if t.final != nil {
			final.Items = []any{*t.final}
		}
	}
	rec := turnRecord{
		ID: t.id, Status: status, User: user, Error: t.err,
		StartedAt: startedAt, CompletedAt: completedAt, DurationMs: dur,
	}
	if status == "completed" {
		rec.Answer = t.final
	}
	th.Turns = append(th.Turns, rec)
	th.UpdatedAt = completedAt
	if !th.Ephemeral {
		// Before turn/completed, so a client that sees the end can resume.
		if err := s.store.save(th); err != nil {
			fmt.Fprintln(s.stderr, "dsh-fakecodex: persist thread:", err)
		}
	}
	if status != "failed" {
		s.notify("thread/status/changed", statusChanged{ThreadID: th.ID, Status: threadStatus{Type: "idle"}})
	}
	s.notify("turn/completed", threadTurn{ThreadID: th.ID, Turn: final})
	return nil
}

// turnBody emits the scripted part of a turn and returns its status.
func (s *server) turnBody(t *activeTurn, ts *TurnScript) (string, error) {
	for i := range ts.Items {
		status, err := s.emitItem(t, &ts.Items[i])
		if err != nil || status != "" {
			return status, err
		}
	}
	if ts.DelayMs > 0 || ts.WaitForInterrupt {
		s.respondTurn(t)
		var timer <-chan time.Time
		if !ts.WaitForInterrupt {
			tm := time.NewTimer(time.Duration(ts.DelayMs) * time.Millisecond)
			defer tm.Stop()
			timer = tm.C
		}
		if _, err := s.await(t, -1, timer); err != nil {
			return "", err
		}
		if t.interrupted {
			return "interrupted", nil
		}
	}
	if e := ts.Error; e != nil {
		te := turnError{Message: e.Message, CodexErrorInfo: e.CodexErrorInfo, AdditionalDetails: e.AdditionalDetails}
		if !e.WillRetry {
			s.notify("thread/status/changed", statusChanged{ThreadID: t.th.ID, Status: threadStatus{Type: "systemError"}})
		}
		s.notify("error", errorNotification{Error: te, WillRetry: e.WillRetry, ThreadID: t.th.ID, TurnID: t.id})
		if !e.WillRetry {
			t.err = &te
			return "failed", nil
		}
	}
	if a := ts.answer(); a != nil {
		t.final = s.emitAgentMessage(t, *a, phase(ts.AnswerPhase, strp("final_answer")))
	}
	s.emitUsage(t, ts)
	switch {
	case ts.RateLimits == nil:
		s.notify("account/rateLimits/updated", map[string]json.RawMessage{"rateLimits": defaultRateLimits})
	case !isNull(ts.RateLimits):
		s.notify("account/rateLimits/updated", map[string]json.RawMessage{"rateLimits": ts.RateLimits})
	}
	return "completed", nil
}

// await serves incoming frames while a turn is in progress, until the
// answer to server request reqID arrives (reqID >= 0; returned), the timer
// fires, or the turn is interrupted (t.interrupted). With reqID < 0 and a
// nil timer only an interrupt (or EOF) ends the wait.
func (s *server) await(t *activeTurn, reqID int64, timer <-chan time.Time) (*inMsg, error) {
	for {
		select {
		case m, ok := <-s.in:
			if !ok {
				return nil, errEOF
			}
			if m.isResponse() {
				if reqID >= 0 && m.idIs(reqID) {
					return m, nil
				}
				continue // a late or unknown answer
			}
			if err := s.handle(m); err != nil {
				return nil, err
			}
			if s.werr != nil {
				return nil, errWrite
			}
			if t.interrupted {
				return nil, nil
			}
		case <-timer:
			return nil, nil
		}
	}
}

// emitUsage sends the turn's thread/tokenUsage/updated snapshots.
func (s *server) emitUsage(t *activeTurn, ts *TurnScript) {
	snaps := []UsageScript{{}}
	if ts.Usage != nil {
		snaps = *ts.Usage
	}
	for _, u := range snaps {
		var prev Breakdown
		if t.th.Usage != nil {
			prev = t.th.Usage.Total
		}
		var total, last Breakdown
		switch {
		case u.Total != nil && u.Last != nil:
			total, last = *u.Total, *u.Last
		case u.Total != nil:
			total = *u.Total
			last = total.minus(prev)
		case u.Last != nil:
			last = *u.Last
			total = prev.plus(last)
		default:
			last = defaultLast
			total = prev.plus(last)
		}
		turnID := t.id
		switch u.TurnID {
		case "":
		case "other":
			turnID = newID()
		default:
			turnID = u.TurnID
		}
		mcw := u.ModelContextWindow
		if len(mcw) == 0 {
			mcw = json.RawMessage("258400")
		}
		s.notify("thread/tokenUsage/updated", tokenUsageUpdated{
			ThreadID: t.th.ID, TurnID: turnID,
			TokenUsage: tokenUsage{Total: total, Last: last, ModelContextWindow: mcw},
		})
		if turnID == t.id {
			t.th.Usage = &usageRecord{Total: total, Last: last, TurnID: turnID, ModelContextWindow: mcw}
		}
	}
}

// spawnGrandchild starts `sleep 300` in this process's group (no setsid)
// and logs its pid; nobody but a process-group kill ends it early.
func (s *server) spawnGrandchild() {
	cmd := exec.Command("sleep", "300")
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(s.stderr, "dsh-fakecodex: grandchild:", err)
		return
	}
	s.log.event("grandchild", "pid", cmd.Process.Pid)
	go func() { _ = cmd.Wait() }()
}
