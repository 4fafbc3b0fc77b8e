package host

import (
	"context"
	"errors"
	"time"

	"github.com/dsh-dev/dsh/internal/session"
	"github.com/dsh-dev/dsh/internal/store"
)

// DefaultEventsLimit is Events' page size when limit <= 0; MaxEventsLimit
// caps it.
const (
	DefaultEventsLimit = 500
	MaxEventsLimit     = 5000
)

// Events returns the events of session id with seq > after (after = -1:
// from the start), at most limit of them, and next = the seq of the last
// returned event (after when none). A live session's are read from its
// log (including what is not flushed yet), a stored one's from the store.
func (h *Host) Events(ctx context.Context, id string, after int64, limit int) ([]session.Event, int64, error) {
	if after < -1 {
		return nil, after, errorf(CodeInvalidArgument, "after %d: want a seq, or -1 for the start", after)
	}
	if limit <= 0 {
		limit = DefaultEventsLimit
	}
	limit = min(limit, MaxEventsLimit)
	full, err := h.resolve(ctx, id)
	if err != nil {
		return nil, after, err
	}
	var events []session.Event
	if e, _ := h.lookup(full); e != nil {
		// One page, payloads released from memory read back.
		if events, err = e.sess.Log.Read(ctx, after+1, after+1+int64(limit)); err != nil {
			return nil, after, classify(err)
		}
	} else if events, err = h.app.Store.ReadFrom(ctx, full, after+1); err != nil {
		return nil, after, classify(err)
	}
	if len(events) > limit {
		events = events[:limit]
	}
	next := after
	if len(events) > 0 {
		next = events[len(events)-1].Seq
	}
	return events, next, nil
}

// ExternalPollInterval is how often a stream reads the store for new
// events of a session another process holds (its lease is live but the
// session is not live in this host).
const ExternalPollInterval = 500 * time.Millisecond

// Stream is a Follow subscription; it is used by one goroutine.
type Stream struct {
	h    *Host
	id   string
	next int64 // seq of the next event to deliver

	e *entry            // the live session followed, nil while stored
	f *session.Follower // over e's log
}

// errDisposed interrupts a follower whose session is being disposed.
var errDisposed = errors.New("session disposed")

// Follow streams every event of session id with seq > after (-1: from
// the start): replayed from the store, then live as appended (chunks
// included), with no gap and no duplicate, also when the session goes
// live, is disposed and is opened again while it is followed. A session
// that is not live in this host is replayed from the store and then
// waits until it goes live here; while another process holds it (dsh
// run), the store is polled every ExternalPollInterval.
func (h *Host) Follow(ctx context.Context, id string, after int64) (*Stream, error) {
	if after < -1 {
		return nil, errorf(CodeInvalidArgument, "after %d: want a seq, or -1 for the start", after)
	}
	full, err := h.resolve(ctx, id)
	if err != nil {
		return nil, err
	}
	if h.isClosed() {
		return nil, ErrHostClosed
	}
	return &Stream{h: h, id: full, next: after + 1}, nil
}

// SessionID is the followed session's full id.
func (s *Stream) SessionID() string { return s.id }

// Next returns the next events in seq order, blocking until there is at
// least one or ctx ends.
func (s *Stream) Next(ctx context.Context) ([]session.Event, error) {
	for {
		if err := ctx.Err(); err != nil {
			return nil, context.Cause(ctx)
		}
		if s.f == nil {
			e, changed := s.h.lookup(s.id)
			if e != nil {
				s.e, s.f = e, e.sess.Log.Follow(s.next)
				continue
			}
			events, err := s.h.app.Store.ReadFrom(ctx, s.id, s.next)
			if err != nil {
				return nil, classify(err)
			}
			if len(events) > 0 {
				s.next = events[len(events)-1].Seq + 1
				return events, nil
			}
			if err := s.waitStored(ctx, changed); err != nil {
				return nil, err
			}
			continue
		}
		fctx, cancel := context.WithCancelCause(ctx)
		stop := context.AfterFunc(s.e.ctx, func() { cancel(errDisposed) })
		events, err := s.f.Next(fctx, 0)
		stop()
		cancel(nil)
		if len(events) > 0 {
			s.next = events[len(events)-1].Seq + 1
			return events, nil
		}
		if ctxErr := ctx.Err(); ctxErr != nil {
			return nil, context.Cause(ctx)
		}
		if !errors.Is(err, errDisposed) {
			return nil, err
		}
		// The session is being disposed: once it is, nothing more is
		// appended and the store holds everything; deliver what the log
		// still has, then look again (stored, or live anew).
		select {
		case <-s.e.done:
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		}
		done, cancelDone := context.WithCancel(context.Background())
		cancelDone()
		var rest []session.Event
		for {
			batch, err := s.f.Next(done, 0)
			if err != nil || len(batch) == 0 {
				break
			}
			rest = append(rest, batch...)
		}
		s.f.Close()
		s.e, s.f = nil, nil
		if len(rest) > 0 {
			s.next = rest[len(rest)-1].Seq + 1
			return rest, nil
		}
	}
}

// waitStored waits until the session may have new events while it is
// not live here: it goes live (changed), or, while another process holds
// it (dsh run has its lease), the next poll of the store is due.
func (s *Stream) waitStored(ctx context.Context, changed <-chan struct{}) error {
	var poll <-chan time.Time
	if en, err := s.h.app.Store.Get(ctx, s.id); err == nil && en.Status == store.StatusRunning {
		t := time.NewTimer(ExternalPollInterval)
		defer t.Stop()
		poll = t.C
	}
	select {
	case <-changed:
	case <-poll:
	case <-ctx.Done():
		return context.Cause(ctx)
	}
	return nil
}

// Close ends the stream.
func (s *Stream) Close() {
	if s.f != nil {
		s.f.Close()
		s.e, s.f = nil, nil
	}
}
