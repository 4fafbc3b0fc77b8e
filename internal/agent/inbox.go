package agent

import (
	"fmt"
	"reflect"
	"sync"

	"github.com/dsh-dev/dsh/internal/llm"
	"github.com/dsh-dev/dsh/internal/session"
)

// inbox holds pending input in two ordered lists: next-turn (one prompt
// per turn) and next-step (steering and injected context, all claimed at
// the next step boundary). Every mutation is logged as
// agent/inbox/spliced so that a log reader can reconstruct it.
type inbox struct {
	mu       sync.Mutex
	nextTurn []queued // guarded by mu
	nextStep []queued // guarded by mu
	log      *session.Log
}

// queued is a pending message and where the log holds it: a message that
// enters the history is logged as a reference to it (session.InboxRef),
// so that it is stored once.
type queued struct {
	msg llm.Message
	ref session.InboxRef
}

// claimed is what a step took from the inbox.
type claimed []queued

// messages returns the claimed messages in order.
func (c claimed) messages() []llm.Message {
	var out []llm.Message
	for _, q := range c {
		out = append(out, q.msg)
	}
	return out
}

// ref returns the inbox reference of m when m was claimed unchanged (a
// pre-step hook may have rewritten or added messages).
func (c claimed) ref(m llm.Message) (session.InboxRef, bool) {
	for _, q := range c {
		if q.msg.ID == m.ID && reflect.DeepEqual(q.msg, m) {
			return q.ref, true
		}
	}
	return session.InboxRef{}, false
}

func (ib *inbox) list(target string) *[]queued {
	if target == session.TargetNextTurn {
		return &ib.nextTurn
	}
	return &ib.nextStep
}

// push appends msg to target and logs the splice.
func (ib *inbox) push(target string, msg llm.Message) error {
	ib.mu.Lock()
	defer ib.mu.Unlock()
	l := ib.list(target)
	e, err := ib.log.Append(session.TypeInboxSpliced, session.InboxSpliced{
		Target: target, Start: len(*l), Inserted: []llm.Message{msg},
	})
	if err != nil {
		return err
	}
	*l = append(*l, queued{msg: msg, ref: session.InboxRef{Seq: e.Seq}})
	return nil
}

// claim removes and returns what a step may take: at a turn boundary all
// of next-step plus exactly one next-turn message; between steps only
// next-step. When check refuses what would be taken, it is removed all
// the same, with outcome "refused" (it must not wait to be refused
// again), and the refusal is returned instead of the messages.
func (ib *inbox) claim(turnBoundary bool, check func([]llm.Message) *llm.Failure) (claimed, *llm.Failure, error) {
	ib.mu.Lock()
	defer ib.mu.Unlock()
	var out claimed
	out = append(out, ib.nextStep...)
	takeTurn := turnBoundary && len(ib.nextTurn) > 0
	if takeTurn {
		out = append(out, ib.nextTurn[0])
	}
	var refused *llm.Failure
	outcome := ""
	if len(out) > 0 && check != nil {
		if refused = check(out.messages()); refused != nil {
			outcome = "refused"
		}
	}
	if len(ib.nextStep) > 0 {
		if err := ib.removeLocked(session.TargetNextStep, len(ib.nextStep), outcome); err != nil {
			return nil, nil, err
		}
		ib.nextStep = nil
	}
	if takeTurn {
		if err := ib.removeLocked(session.TargetNextTurn, 1, outcome); err != nil {
			return nil, nil, err
		}
		ib.nextTurn = ib.nextTurn[1:]
	}
	if refused != nil {
		return nil, refused, nil
	}
	return out, nil, nil
}

func (ib *inbox) removeLocked(target string, n int, outcome string) error {
	_, err := ib.log.Append(session.TypeInboxSpliced, session.InboxSpliced{
		Target: target, Start: 0, RemovedCount: n, Inserted: []llm.Message{}, Outcome: outcome,
	})
	return err
}

// CodeQueueItemNotFound is the stable code of a [QueueItemError].
const CodeQueueItemNotFound = "QUEUE_ITEM_NOT_FOUND"

// QueueItemError reports that no queued next-turn message has the id a
// Promote or Unqueue named: it was never queued, or a turn already took
// it, or it was promoted or removed before.
type QueueItemError struct{ ID string }

func (e *QueueItemError) Error() string {
	return fmt.Sprintf("no queued message %q (it may have started a turn already)", e.ID)
}

// Code returns [CodeQueueItemNotFound].
func (e *QueueItemError) Code() string { return CodeQueueItemNotFound }

// Promote moves the queued next-turn message msgID to the end of
// next-step, so it enters the running turn at its next step (or starts a
// turn when the agent is idle, like Steer). The move is logged as two
// splices, a removal from next-turn with outcome "steered" and an
// insertion into next-step, so that restore rebuilds the same inbox.
func (a *Agent) Promote(msgID string) error {
	if err := a.goLive(); err != nil {
		return err
	}
	if err := a.inbox.promote(msgID); err != nil {
		return err
	}
	a.Wake()
	return nil
}

// Unqueue removes the queued next-turn message msgID (logged as a splice
// with outcome "removed").
func (a *Agent) Unqueue(msgID string) error {
	if err := a.goLive(); err != nil {
		return err
	}
	return a.inbox.unqueue(msgID)
}

// indexLocked returns the position of msgID in next-turn.
func (ib *inbox) indexLocked(msgID string) (int, error) {
	for i, q := range ib.nextTurn {
		if q.msg.ID == msgID {
			return i, nil
		}
	}
	return 0, &QueueItemError{ID: msgID}
}

func (ib *inbox) promote(msgID string) error {
	ib.mu.Lock()
	defer ib.mu.Unlock()
	i, err := ib.indexLocked(msgID)
	if err != nil {
		return err
	}
	q := ib.nextTurn[i]
	if err := ib.removeAtLocked(session.TargetNextTurn, i, "steered"); err != nil {
		return err
	}
	ib.nextTurn = append(ib.nextTurn[:i:i], ib.nextTurn[i+1:]...)
	// The inserting splice holds the message again, and the step that
	// claims it stores its user/message as a reference to this splice,
	// exactly as restore would rebuild it.
	e, err := ib.log.Append(session.TypeInboxSpliced, session.InboxSpliced{
		Target: session.TargetNextStep, Start: len(ib.nextStep), Inserted: []llm.Message{q.msg},
	})
	if err != nil {
		return err
	}
	ib.nextStep = append(ib.nextStep, queued{msg: q.msg, ref: session.InboxRef{Seq: e.Seq}})
	return nil
}

func (ib *inbox) unqueue(msgID string) error {
	ib.mu.Lock()
	defer ib.mu.Unlock()
	i, err := ib.indexLocked(msgID)
	if err != nil {
		return err
	}
	if err := ib.removeAtLocked(session.TargetNextTurn, i, "removed"); err != nil {
		return err
	}
	ib.nextTurn = append(ib.nextTurn[:i:i], ib.nextTurn[i+1:]...)
	return nil
}

func (ib *inbox) removeAtLocked(target string, i int, outcome string) error {
	_, err := ib.log.Append(session.TypeInboxSpliced, session.InboxSpliced{
		Target: target, Start: i, RemovedCount: 1, Inserted: []llm.Message{}, Outcome: outcome,
	})
	return err
}

// clear discards both lists (a cancel without keepInbox).
func (ib *inbox) clear() error {
	ib.mu.Lock()
	defer ib.mu.Unlock()
	for _, t := range []string{session.TargetNextStep, session.TargetNextTurn} {
		l := ib.list(t)
		if len(*l) == 0 {
			continue
		}
		if err := ib.removeLocked(t, len(*l), "canceled"); err != nil {
			return err
		}
		*l = nil
	}
	return nil
}

func (ib *inbox) pending() (turn, step int) {
	ib.mu.Lock()
	defer ib.mu.Unlock()
	return len(ib.nextTurn), len(ib.nextStep)
}

// restore rebuilds the inbox from a resumed log by replaying its splices,
// so input queued before a stop is not lost.
func (ib *inbox) restore(view session.View) {
	ib.mu.Lock()
	defer ib.mu.Unlock()
	for e := range view.All() {
		if e.Type != session.TypeInboxSpliced {
			continue
		}
		var sp session.InboxSpliced
		if e.Decode(&sp) != nil {
			continue
		}
		l := ib.list(sp.Target)
		start := min(max(sp.Start, 0), len(*l))
		end := min(start+sp.RemovedCount, len(*l))
		next := append([]queued(nil), (*l)[:start]...)
		for i, m := range sp.Inserted {
			next = append(next, queued{msg: m, ref: session.InboxRef{Seq: e.Seq, Index: i}})
		}
		*l = append(next, (*l)[end:]...)
	}
}
