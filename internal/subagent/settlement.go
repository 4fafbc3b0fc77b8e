package subagent

import (
	"context"
	"sync"
)

// Settlement is the publish-once end of a provider's run: the run's own
// loop publishes its Result exactly once; Wait reads it; a dispose request
// is a signal the loop watches (Disposed) so that it can settle the run as
// aborted before publishing. Out-of-process providers share it so that
// their Run methods keep one contract.
type Settlement struct {
	once     sync.Once
	disposed chan struct{}
	done     chan struct{}
	res      Result // written before done is closed
}

// NewSettlement returns an unsettled run end.
func NewSettlement() *Settlement {
	return &Settlement{disposed: make(chan struct{}), done: make(chan struct{})}
}

// Publish records the run's result and releases every waiter. It must be
// called exactly once, by the run's loop.
func (s *Settlement) Publish(res Result) {
	s.res = res
	close(s.done)
}

// Done is closed once the result is published.
func (s *Settlement) Done() <-chan struct{} { return s.done }

// Disposed is closed when disposal was requested.
func (s *Settlement) Disposed() <-chan struct{} { return s.disposed }

// Wait blocks until the result is published or ctx ends.
func (s *Settlement) Wait(ctx context.Context) (Result, error) {
	select {
	case <-s.done:
		return s.res, nil
	case <-ctx.Done():
		return Result{}, ctx.Err()
	}
}

// RequestDispose signals disposal (idempotently) and waits for the
// result to be published.
func (s *Settlement) RequestDispose() {
	s.once.Do(func() { close(s.disposed) })
	<-s.done
}
