package app

import (
	"context"
	"errors"

	"github.com/dsh-dev/dsh/internal/session"
	"github.com/dsh-dev/dsh/internal/store"
)

// pendingLease creates and leases a new session on its own goroutine, so
// that the store's two write transactions overlap the wiring of the
// session's agent (start-up, issue 12); a store that can do both in one
// ([store.CreateLeaser]) does. Until they are done it is the
// log's sink: the log writes nothing before its first flush, and an
// append waits for the lease. OpenSession waits for it before it
// returns, so a caller never sees a session that is not yet stored.
type pendingLease struct {
	done  chan struct{}
	lease store.Lease // set before done is closed; nil when err is set
	err   error
}

func startPendingLease(ctx context.Context, st store.Store, h session.Header, holder string) *pendingLease {
	p := &pendingLease{done: make(chan struct{})}
	go func() {
		defer close(p.done)
		if cl, ok := st.(store.CreateLeaser); ok {
			p.lease, p.err = cl.CreateLeased(ctx, h, holder)
			return
		}
		if err := st.Create(ctx, h); err != nil {
			p.err = err
			return
		}
		p.lease, p.err = st.Acquire(ctx, h.ID, holder)
	}()
	return p
}

// wait returns the lease once the session is created and leased.
func (p *pendingLease) wait() (store.Lease, error) {
	<-p.done
	return p.lease, p.err
}

// release waits for the lease and releases it, if there is one.
func (p *pendingLease) release(ctx context.Context) error {
	l, err := p.wait()
	if err != nil {
		return nil // nothing was leased
	}
	return l.Release(ctx)
}

// Append implements [session.Sink] through the lease.
func (p *pendingLease) Append(ctx context.Context, id string, events []session.Event) error {
	select {
	case <-p.done:
	case <-ctx.Done():
		return context.Cause(ctx)
	}
	if p.err != nil {
		return errors.Join(errors.New("session not stored"), p.err)
	}
	return p.lease.Append(ctx, id, events)
}
