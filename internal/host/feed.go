package host

import (
	"context"
	"errors"
	"sync"
)

// Feed event types.
const (
	FeedSessionAdded     = "session/added"
	FeedSessionStatus    = "session/status"
	FeedSessionRemoved   = "session/removed"
	FeedApprovalPending  = "approval/pending"
	FeedApprovalResolved = "approval/resolved"
	// FeedQuestion carries a pending question (Question);
	// FeedQuestionResolved its end (ID, and Status "answered" or
	// "cancelled").
	FeedQuestion         = "question"
	FeedQuestionResolved = "question-resolved"
	// FeedPlanMode says a session's plan mode changed (Active).
	FeedPlanMode         = "plan-mode"
	FeedWorkspaceChanged = "workspace/changed"
	FeedWorkspaceRemoved = "workspace/removed"
	FeedWorkspaceOrder   = "workspace/order"
)

// FeedEvent is one change a client of many sessions watches.
type FeedEvent struct {
	Type       string    `json:"type"`
	SessionID  string    `json:"sessionId,omitempty"`
	Status     Status    `json:"status,omitempty"`
	Info       *Info     `json:"session,omitempty"`
	Approval   *Approval `json:"approval,omitempty"`
	ApprovalID string    `json:"approvalId,omitempty"`
	Outcome    string    `json:"outcome,omitempty"`
	Question   *Question `json:"question,omitempty"`
	// ID is the question id of question-resolved.
	ID string `json:"id,omitempty"`
	// Active is the new plan mode of plan-mode.
	Active      *bool  `json:"active,omitempty"`
	WorkspaceID string `json:"workspaceId,omitempty"`
}

// FeedBuffer is how many undelivered events a subscriber may have before
// it is dropped.
const FeedBuffer = 1024

// ErrFeedOverflow is what Feed.Next returns to a subscriber that fell
// FeedBuffer events behind: it was dropped so that it never blocks the
// host, and should resubscribe and rebuild its view (sessions, approvals).
var ErrFeedOverflow = &Error{Code: CodeFeedOverflow, Message: "the feed subscriber fell too far behind and was dropped"}

// errFeedClosed ends a feed closed by its owner or by the host.
var errFeedClosed = errors.New("feed closed")

// Feed is one subscription to the host feed.
type Feed struct {
	hub  *feedHub
	wake chan struct{} // one token: "there is something to read"

	mu      sync.Mutex
	buf     []FeedEvent // guarded by mu
	err     error       // guarded by mu; set once dropped or closed
	maxSize int
}

type feedHub struct {
	mu   sync.Mutex
	subs map[*Feed]struct{} // guarded by mu
	shut bool               // guarded by mu
}

// Subscribe returns a new subscription to the host feed: every event
// published from now on, in order, until it is closed or dropped.
func (h *Host) Subscribe() *Feed {
	f := &Feed{hub: &h.feeds, wake: make(chan struct{}, 1), maxSize: FeedBuffer}
	h.feeds.mu.Lock()
	defer h.feeds.mu.Unlock()
	if h.feeds.shut {
		f.err = ErrHostClosed
		return f
	}
	if h.feeds.subs == nil {
		h.feeds.subs = map[*Feed]struct{}{}
	}
	h.feeds.subs[f] = struct{}{}
	return f
}

// subscribed reports whether the feed has any subscriber. An event whose
// Info costs a store read (a session added or closed) is not built when
// nobody listens: `dsh run` has no subscriber, and the read (a connection
// of its own on the first) sat between exec and the first model request.
// A subscriber that joins right after the check misses the event, as it
// would have a moment later.
func (h *Host) subscribed() bool {
	h.feeds.mu.Lock()
	defer h.feeds.mu.Unlock()
	return len(h.feeds.subs) > 0
}

// Publish sends e to every subscriber. It never blocks: a subscriber
// whose buffer is full is dropped.
func (h *Host) Publish(e FeedEvent) {
	h.feeds.mu.Lock()
	defer h.feeds.mu.Unlock()
	for f := range h.feeds.subs {
		if !f.push(e) {
			delete(h.feeds.subs, f)
		}
	}
}

// push buffers e; it reports false when the subscriber overflowed.
func (f *Feed) push(e FeedEvent) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return false
	}
	if len(f.buf) >= f.maxSize {
		f.buf, f.err = nil, ErrFeedOverflow
	} else {
		f.buf = append(f.buf, e)
	}
	select {
	case f.wake <- struct{}{}:
	default:
	}
	return f.err == nil
}

// Next returns the buffered events, waiting until there is at least one
// or ctx ends. A dropped subscriber gets ErrFeedOverflow (after nothing
// else: what was buffered is discarded, since the client must rebuild
// anyway); a closed one an error.
func (f *Feed) Next(ctx context.Context) ([]FeedEvent, error) {
	for {
		f.mu.Lock()
		if len(f.buf) > 0 {
			out := f.buf
			f.buf = nil
			f.mu.Unlock()
			return out, nil
		}
		err := f.err
		f.mu.Unlock()
		if err != nil {
			return nil, err
		}
		select {
		case <-f.wake:
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		}
	}
}

// Close ends the subscription. It is idempotent.
func (f *Feed) Close() {
	f.hub.mu.Lock()
	delete(f.hub.subs, f)
	f.hub.mu.Unlock()
	f.end(errFeedClosed)
}

func (f *Feed) end(err error) {
	f.mu.Lock()
	if f.err == nil {
		f.err = err
	}
	f.mu.Unlock()
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

// closeAll ends every subscription (the host closed).
func (hub *feedHub) closeAll() {
	hub.mu.Lock()
	subs := hub.subs
	hub.subs, hub.shut = nil, true
	hub.mu.Unlock()
	for f := range subs {
		f.end(ErrHostClosed)
	}
}
