package rpc

import (
	"context"
	"errors"

	"github.com/google/uuid"

	"github.com/dsh-dev/dsh/internal/host"
	"github.com/dsh-dev/dsh/internal/llm"
	"github.com/dsh-dev/dsh/internal/session"
)

// TurnResult is how a prompted turn ended, read from the log.
type TurnResult struct {
	// Status is the turn/end reason kind: completed, aborted, error,
	// max-tokens, blocked, interrupted.
	Status string `json:"status"`
	// Cause is set for aborted (user, disposed, shutdown…).
	Cause string `json:"cause,omitempty"`
	// Text is the turn's final answer: the text of its last assistant
	// message that had any.
	Text string `json:"text"`
	// Usage sums the turn's model requests.
	Usage llm.Usage `json:"usage"`
	// Failure is the model failure of an error turn.
	Failure *llm.Failure `json:"failure,omitempty"`
	// Turn is the turn number; EndSeq the seq of its turn/end.
	Turn   int   `json:"turn"`
	EndSeq int64 `json:"endSeq"`
}

// Prompt sends msg to session id (queued: it starts a turn when the
// session is idle) and waits until the turn that took it ends. Everything
// it reports is read from the session's log through host.Follow, from
// the message's user/message to the turn's turn/end. When ctx ends
// first, the wait is abandoned (the turn goes on; cancel it with
// host.Cancel).
func Prompt(ctx context.Context, h *host.Host, id string, msg llm.Message) (TurnResult, error) {
	info, err := h.Get(ctx, id)
	if err != nil {
		return TurnResult{}, err
	}
	id = info.Header.ID
	if msg.ID == "" {
		msg.ID = uuid.NewString()
	}
	if msg.Source.Kind == "" {
		msg.Source = llm.Source{Kind: "user"}
	}
	// The message is logged after LastSeq: follow from there, before
	// sending, so nothing is missed.
	st, err := h.Follow(ctx, id, info.LastSeq)
	if err != nil {
		return TurnResult{}, err
	}
	defer st.Close()
	if err := h.Send(ctx, id, msg, host.DeliveryQueue); err != nil {
		return TurnResult{}, err
	}
	var res TurnResult
	started := false
	for {
		events, err := st.Next(ctx)
		if err != nil {
			return res, err
		}
		for _, e := range events {
			switch e.Type {
			case session.TypeUserMessage:
				var m llm.Message
				if !started && e.Decode(&m) == nil && m.ID == msg.ID {
					started = true
				}
			case session.TypeAssistantMsg:
				var p session.AssistantMessage
				if started && e.Decode(&p) == nil {
					if t := p.Message.Text(); t != "" {
						res.Text = t
					}
					if p.Usage != nil {
						res.Usage.Add(*p.Usage)
					}
				}
			case session.TypeTurnEnd:
				if !started {
					continue
				}
				var p session.TurnEnd
				if err := e.Decode(&p); err != nil {
					return res, errors.Join(errors.New("decode turn/end"), err)
				}
				res.Status, res.Cause, res.Failure = p.Reason.Kind, p.Reason.Cause, p.Reason.Failure
				res.Turn, res.EndSeq = p.Turn, e.Seq
				return res, nil
			}
		}
	}
}
