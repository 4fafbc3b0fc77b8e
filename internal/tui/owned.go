package tui

import (
	"context"
	"errors"
	"sync"
)

// streamer is a followed log or feed: Next blocks until there is
// something, Close ends it. Neither may run while the other does.
type streamer[T any] interface {
	Next(ctx context.Context) ([]T, error)
	Close()
}

// errClosed is what wait returns once the stream is closed.
var errClosed = errors.New("stream closed")

// owned gives a stream one owner: the UI's commands read it one at a
// time, and close cancels the read in flight and waits for it to return
// before closing the stream, so Next and Close never overlap.
type owned[T any] struct {
	s      streamer[T]
	ctx    context.Context
	cancel context.CancelFunc
	// token is held by whoever uses s (a read or the close).
	token  chan struct{}
	once   sync.Once
	closed bool // guarded by token
}

func own[T any](parent context.Context, s streamer[T]) *owned[T] {
	ctx, cancel := context.WithCancel(parent)
	o := &owned[T]{s: s, ctx: ctx, cancel: cancel, token: make(chan struct{}, 1)}
	o.token <- struct{}{}
	return o
}

// wait reads the next batch.
func (o *owned[T]) wait() ([]T, error) {
	<-o.token
	defer func() { o.token <- struct{}{} }()
	if o.closed {
		return nil, errClosed
	}
	return o.s.Next(o.ctx)
}

// close ends the stream; it returns once no read is in flight. It is
// idempotent.
func (o *owned[T]) close() {
	o.once.Do(func() {
		o.cancel()
		<-o.token
		o.closed = true
		o.s.Close()
		o.token <- struct{}{}
	})
}
