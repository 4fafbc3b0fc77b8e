package session

import (
	"context"
	"fmt"
)

// Follower reads a live log in seq order from its own goroutine. It
// holds no copy of the log: what it has not read yet stays in the log, so
// a follower that falls behind (a consumer blocked on a full pipe) loses
// nothing and slows no appender; it catches up by reading the events it
// missed, at most a bounded batch at a time. A Follower is used by one
// goroutine.
type Follower struct {
	l      *Log
	wake   chan struct{} // one token: "the log grew since you last looked"
	next   int64         // guarded by l.mu; seq of the next event to read
	done   bool          // guarded by l.mu
	window int64         // guarded by l.mu; > 0 makes the follower lossy
}

// FellBehindError is what [Follower.Next] returns to a lossy follower
// (see [Follower.Lossy]) that lagged too far: the events from From up to
// To (exclusive) were skipped, and the next call continues at To.
type FellBehindError struct {
	SessionID string
	From, To  int64
}

// Error implements error.
func (e *FellBehindError) Error() string {
	return fmt.Sprintf("session %s: fell behind; skipped events %d to %d", e.SessionID, e.From, e.To-1)
}

// Follow returns a follower that reads the events from seq from on
// (those already appended included). Close it when done.
func (l *Log) Follow(from int64) *Follower {
	f := &Follower{l: l, wake: make(chan struct{}, 1), next: max(from, 0)}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.followers == nil {
		l.followers = map[*Follower]struct{}{}
	}
	l.followers[f] = struct{}{}
	return f
}

// Lossy makes the follower skip ahead when it lags more than window
// events behind, for consumers that want the recent events rather than
// all of them (a live view): Next then reports the skip once with a
// *[FellBehindError] and continues with the newest window events. It
// returns f.
func (f *Follower) Lossy(window int) *Follower {
	f.l.mu.Lock()
	defer f.l.mu.Unlock()
	f.window = int64(max(window, 0))
	return f
}

// wakeLocked tells the follower that an event was delivered; it never
// blocks, since one pending token already says so.
func (f *Follower) wakeLocked() {
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

// Next returns the next events in seq order, at most limit of them
// (limit <= 0 means 256), waiting until there is at least one. Once ctx
// is done it still returns what is already in the log, and returns
// ctx's error only when nothing is left to read, so a consumer drains
// the log by calling Next with a cancelled context until it fails. A
// lossy follower may get a *[FellBehindError] instead of events.
func (f *Follower) Next(ctx context.Context, limit int) ([]Event, error) {
	if limit <= 0 {
		limit = 256
	}
	for {
		f.l.mu.Lock()
		if f.done {
			f.l.mu.Unlock()
			return nil, fmt.Errorf("session %s: follower closed", f.l.header.ID)
		}
		n := f.l.nextDeliver // what every observer has seen (deliveredLocked)
		if f.window > 0 && n-f.next > f.window {
			skipped := &FellBehindError{SessionID: f.l.header.ID, From: f.next, To: n - f.window}
			f.next = skipped.To
			f.l.mu.Unlock()
			return nil, skipped
		}
		if f.next < n {
			end := min(n, f.next+int64(limit))
			out := f.l.viewLocked().Slice(f.next, end)
			f.l.mu.Unlock()
			if hasReleased(out) {
				// A follower that fell behind a release reads the
				// payloads back; draining after ctx ended still reads.
				if err := f.l.fill(context.WithoutCancel(ctx), out); err != nil {
					return nil, err
				}
			}
			f.l.mu.Lock()
			f.next = end
			f.l.mu.Unlock()
			return out, nil
		}
		f.l.mu.Unlock()
		select {
		case <-f.wake:
		case <-ctx.Done():
			// An append may have raced with the cancellation: look
			// once more before reporting the end.
			select {
			case <-f.wake:
				continue
			default:
			}
			return nil, context.Cause(ctx)
		}
	}
}

// Lag is how many delivered events the follower has not read yet.
func (f *Follower) Lag() int64 {
	f.l.mu.Lock()
	defer f.l.mu.Unlock()
	return max(f.l.nextDeliver-f.next, 0)
}

// Close detaches the follower from the log; Next fails afterwards.
func (f *Follower) Close() {
	f.l.mu.Lock()
	defer f.l.mu.Unlock()
	delete(f.l.followers, f)
	f.done = true
}
