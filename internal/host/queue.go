package host

import (
	"context"
	"errors"

	"github.com/dsh-dev/dsh/internal/agent"
	"github.com/dsh-dev/dsh/internal/subagent"
)

// CodeQueueItemNotFound: no queued next-turn message has the id an
// UpdateQueue named (a turn took it already, or it was steered or
// removed before).
const CodeQueueItemNotFound = agent.CodeQueueItemNotFound

// Queue operations of UpdateQueue.
const (
	// QueueSteer moves a queued message into the running turn's next
	// step (or starts a turn with it when the agent is idle).
	QueueSteer = "steer"
	// QueueRemove drops a queued message.
	QueueRemove = "remove"
)

// UpdateQueue acts on the message messageID that waits in session id's
// next-turn queue (sent with delivery queue): op QueueSteer promotes it
// to the next step, QueueRemove removes it. A stored session is resumed
// on demand, as for Send. It returns once the change is logged and
// stored.
func (h *Host) UpdateQueue(ctx context.Context, id, messageID, op string) error {
	switch op {
	case QueueSteer, QueueRemove:
	default:
		return errorf(CodeInvalidArgument, "queue op %q: want %q or %q", op, QueueSteer, QueueRemove)
	}
	if messageID == "" {
		return errorf(CodeInvalidArgument, "the message id is empty")
	}
	full, err := h.resolve(ctx, id)
	if err != nil {
		return err
	}
	if e, _ := h.lookup(full); e == nil {
		// As for Send: a child's queue belongs to its parent's session.
		hd, err := h.app.Store.Header(ctx, full)
		if err != nil {
			return classify(err)
		}
		if hd.Origin == subagent.OriginSubagent {
			return errorf(CodeInvalidArgument, "session %s is a subagent child: its parent's session drives it, clients only read it", full)
		}
	}
	e, done, err := h.deliverTo(ctx, full)
	if err != nil {
		return err
	}
	defer done()
	if op == QueueSteer {
		err = e.sess.Agent.Promote(messageID)
	} else {
		err = e.sess.Agent.Unqueue(messageID)
	}
	var qe *agent.QueueItemError
	if errors.As(err, &qe) {
		return &Error{Code: CodeQueueItemNotFound, Err: err}
	}
	if err != nil {
		return classify(err)
	}
	return classify(e.sess.Log.Flush(ctx))
}
