package acp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/dsh-dev/dsh/internal/host"
)

// Permission option ids dsh offers. allow_always is offered only for a
// bash command, the one thing dsh can grant for the rest of a session (a
// logged session grant of that exact command).
const (
	optionAllowOnce   = "allow-once"
	optionAllowAlways = "allow-always"
	optionRejectOnce  = "reject-once"
)

// watchApprovals turns the host feed's approvals of the connection's
// sessions into session/request_permission requests.
func (s *server) watchApprovals(feed *host.Feed) {
	for {
		events, err := feed.Next(s.ctx)
		if err != nil {
			if errors.Is(err, host.ErrFeedOverflow) {
				// Dropped: resubscribe and ask what is pending now.
				fmt.Fprintf(s.o.Log, "dsh acp: %v; resubscribing\n", err)
				feed = s.h.Subscribe()
				defer feed.Close()
				for _, a := range s.h.Approvals("") {
					if s.session(a.SessionID) != nil {
						s.ask(a)
					}
				}
				for _, q := range s.h.Questions("") {
					if s.session(q.SessionID) != nil {
						s.askQuestion(q)
					}
				}
				continue
			}
			return
		}
		for _, e := range events {
			switch e.Type {
			case host.FeedApprovalPending:
				if e.Approval != nil && s.session(e.SessionID) != nil {
					s.ask(*e.Approval)
				}
			case host.FeedApprovalResolved:
				s.stopAsking(e.ApprovalID)
			case host.FeedQuestion:
				if e.Question != nil && s.session(e.SessionID) != nil {
					s.askQuestion(*e.Question)
				}
			case host.FeedQuestionResolved:
				s.stopAsking(e.ID)
			}
		}
	}
}

// ask sends one session/request_permission and answers the approval
// with the option chosen; anything but allow-once or allow-always
// (reject-once, a cancelled request, an unknown option, an error)
// rejects.
func (s *server) ask(a host.Approval) {
	s.startAsking(a.ID, a.SessionID, func(ctx context.Context) {
		args := obj{}
		if len(a.Arguments) > 0 && json.Unmarshal(a.Arguments, &args) != nil {
			args = obj{"arguments": string(a.Arguments)}
		}
		call := obj{"toolCallId": a.CallID, "title": title(a.ToolName, args), "kind": kindOf(a.ToolName),
			"status": "pending", "rawInput": args}
		if a.Reason != "" {
			call["content"] = []obj{{"type": "content", "content": obj{"type": "text", "text": a.Reason}}}
		}
		options := []obj{{"optionId": optionAllowOnce, "name": "Allow once", "kind": "allow_once"}}
		if a.Command != "" {
			options = append(options, obj{"optionId": optionAllowAlways, "name": "Allow this exact command for the rest of the session", "kind": "allow_always"})
		}
		options = append(options, obj{"optionId": optionRejectOnce, "name": "Reject", "kind": "reject_once"})
		params := obj{"sessionId": a.SessionID, "toolCall": call, "options": options}
		var res permissionOutcome
		err := s.conn.Call(ctx, "session/request_permission", params, &res)
		if ctx.Err() != nil {
			return // resolved without this client
		}
		ans := host.Answer{Decision: host.DecisionReject}
		switch {
		case err != nil:
			fmt.Fprintf(s.o.Log, "dsh acp: permission request %s: %v; rejecting\n", a.ID, err)
		case res.Outcome.Outcome == "selected" && res.Outcome.OptionID == optionAllowOnce:
			ans = host.Answer{Decision: host.DecisionAllowOnce}
		case res.Outcome.Outcome == "selected" && res.Outcome.OptionID == optionAllowAlways && a.Command != "":
			ans = host.Answer{Decision: host.DecisionAllowSession}
		}
		if err := s.h.Answer(s.ctx, a.SessionID, a.ID, ans); err != nil && host.ErrorCode(err) != host.CodeApprovalNotPending {
			fmt.Fprintf(s.o.Log, "dsh acp: answer %s: %v\n", a.ID, err)
		}
	})
}

// startAsking runs ask for pending approval or question id of session
// sessionID on a goroutine of its own, once the client heard of the call
// (the pump wrote its tool_call): at most one per id, ended by
// stopAsking (resolved elsewhere) or the server's end through ctx.
func (s *server) startAsking(id, sessionID string, ask func(ctx context.Context)) {
	s.mu.Lock()
	if _, dup := s.asking[id]; dup {
		s.mu.Unlock()
		return
	}
	ctx, cancel := context.WithCancel(s.ctx)
	s.asking[id] = cancel
	s.wg.Add(1)
	s.mu.Unlock()
	go func() {
		defer s.wg.Done()
		defer func() {
			s.mu.Lock()
			delete(s.asking, id)
			s.mu.Unlock()
			cancel()
		}()
		ss := s.session(sessionID)
		if ss == nil {
			return
		}
		if !ss.waitFor(ctx, func() bool { return ss.asked[id] }) {
			return
		}
		ask(ctx)
	}()
}

// stopAsking ends the asking of approval or question id: it was answered
// elsewhere or cancelled.
func (s *server) stopAsking(id string) {
	s.mu.Lock()
	if cancel := s.asking[id]; cancel != nil {
		cancel()
	}
	s.mu.Unlock()
}
