package host

import (
	"cmp"
	"context"
	"iter"
	"slices"
	"strings"

	"github.com/dsh-dev/dsh/internal/session"
)

// The host keeps two queues of asks waiting for a person: approvals
// (permission asks) and questions (ask_user_question, exit_plan_mode).
// Both live the same way, which the helpers below hold once: an ask is
// announced on the feed, waits for the first answer or the end of its
// call's context (which takes it out of the queue itself, so a late
// answer finds it not pending), and is announced again as resolved; an
// answer that finds nothing pending is told whether the session ever
// asked it.

// announce publishes ev and, when the ask's session is live, its changed
// status (a session with an ask waiting reads as waiting).
func (h *Host) announce(e *entry, ev FeedEvent) {
	h.Publish(ev)
	if e != nil {
		h.statusChanged(e)
	}
}

// awaitAnswer waits for the answer of the ask queued as queue[id]. When
// ctx ends first it drops the ask from queue and returns ctx's cause.
func awaitAnswer[P, A any](ctx context.Context, h *Host, queue map[string]P, id string, answer <-chan A) (A, error) {
	select {
	case a := <-answer:
		return a, nil
	case <-ctx.Done():
		h.mu.Lock()
		delete(queue, id)
		h.mu.Unlock()
		var zero A
		return zero, context.Cause(ctx)
	}
}

// pendingKey is what the listing of a queue filters and orders by.
type pendingKey struct {
	sessionID string
	askedAt   int64
	id        string
}

// listPending returns the items of queue for session sessionID ("" for
// every session's), oldest first, ties by id. item gives a queued ask's
// item and key; it runs under h.mu, so it only reads fields.
func listPending[P, T any](h *Host, queue map[string]P, sessionID string, item func(P) (T, pendingKey)) []T {
	type keyed struct {
		v T
		k pendingKey
	}
	var all []keyed
	h.mu.Lock()
	for _, p := range queue {
		if v, k := item(p); sessionID == "" || k.sessionID == sessionID {
			all = append(all, keyed{v, k})
		}
	}
	h.mu.Unlock()
	slices.SortFunc(all, func(a, b keyed) int {
		return cmp.Or(cmp.Compare(a.k.askedAt, b.k.askedAt), strings.Compare(a.k.id, b.k.id))
	})
	var out []T
	for _, kv := range all {
		out = append(out, kv.v)
	}
	return out
}

// loggedAsk reports whether session id logged an event of type typ that
// match accepts: whether an ask an answer found not pending was ever
// asked (then it was already answered or cancelled).
func (h *Host) loggedAsk(ctx context.Context, id, typ string, match func(session.Event) bool) (bool, error) {
	var events iter.Seq[session.Event]
	if e, _ := h.lookup(id); e != nil {
		events = e.sess.Log.View().All()
	} else {
		stored, err := h.app.Store.ReadFrom(ctx, id, 0)
		if err != nil {
			return false, classify(err)
		}
		events = slices.Values(stored)
	}
	for ev := range events {
		if ev.Type == typ && match(ev) {
			return true, nil
		}
	}
	return false, nil
}

// askKind names one of the host's queues for answerPending.
type askKind struct {
	noun                 string // "approval", "question"
	notPending, notFound string // error codes
	eventType            string // the session event that logs an ask
}

// answerPending hands an answer to ask id of session full in queue; the
// first answer wins. mine reads a queued ask's session. give runs under
// h.mu: it checks the answer and sends it on the ask's buffered channel,
// so it must neither block nor call out; the ask leaves the queue unless
// give refuses. Nothing pending gets kind's not-pending code when the
// session logged the ask (logged matches its event: already answered or
// cancelled), its not-found code when the session never asked it.
func answerPending[P any](ctx context.Context, h *Host, queue map[string]P, kind askKind, full, id string,
	mine func(P) string, give func(P) error, logged func(session.Event) bool) error {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return ErrHostClosed
	}
	if p, ok := queue[id]; ok && mine(p) == full {
		err := give(p)
		if err == nil {
			delete(queue, id)
		}
		h.mu.Unlock()
		return err
	}
	h.mu.Unlock()
	asked, err := h.loggedAsk(ctx, full, kind.eventType, logged)
	if err != nil {
		return err
	}
	if asked {
		return errorf(kind.notPending, "%s %s of session %s is not pending: it was already answered or cancelled", kind.noun, id, full)
	}
	return errorf(kind.notFound, "session %s has no %s %s", full, kind.noun, id)
}
