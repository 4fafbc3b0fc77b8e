package rpc

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"sync"

	"github.com/dsh-dev/dsh/internal/session"
	"github.com/dsh-dev/dsh/internal/subagent"
)

func bytesReader(b []byte) *bytes.Reader { return bytes.NewReader(b) }

// follow notifies every event of session id after seq after, and of its
// subagent children, until ctx ends.
func (s *server) follow(ctx context.Context, id string, after int64) {
	for _, a := range s.h.Approvals(id) {
		_ = s.conn.Notify("approval/requested", map[string]any{"approval": a})
	}
	for _, q := range s.h.Questions(id) {
		_ = s.conn.Notify("question/requested", map[string]any{"question": q})
	}
	// Once the follower ends, nobody waits for its notifications.
	defer s.noteEmitted(id, math.MaxInt64)
	st, err := s.h.Follow(ctx, id, after)
	if err != nil {
		fmt.Fprintf(s.o.Log, "dsh rpc: follow %s: %v\n", id, err)
		return
	}
	defer st.Close()
	k := newKids(s, ctx)
	defer k.wait()
	for {
		events, err := st.Next(ctx)
		if err != nil {
			return
		}
		for _, e := range events {
			s.emit(id, e, k)
		}
		if n := len(events); n > 0 {
			s.noteEmitted(id, events[n-1].Seq)
		}
	}
}

// emit writes one event notification and starts or ends the follower of
// a child it announces.
func (s *server) emit(id string, e session.Event, k *kids) {
	_ = s.conn.Notify("session/event", map[string]any{"sessionId": id, "event": e})
	switch e.Type {
	case session.TypeSubagentStart:
		var p subagent.StartEvent
		if e.Decode(&p) == nil {
			k.start(p.RunID, p.ChildID)
		}
	case session.TypeSubagentEnd:
		var p subagent.EndEvent
		if e.Decode(&p) == nil {
			k.end(p.RunID)
		}
	}
}

// kids follows the subagent children of one session: each run from its
// subagent/start to its subagent/end in the parent's log.
type kids struct {
	s    *server
	ctx  context.Context
	runs map[string]context.CancelFunc // by run id; only the owner goroutine touches it
	done []chan struct{}
	mu   sync.Mutex
	// sent is the next seq to send per child, so a continuable child
	// resumed by a later run is not sent twice.
	sent map[string]int64 // guarded by mu
}

func newKids(s *server, ctx context.Context) *kids {
	return &kids{s: s, ctx: ctx, runs: map[string]context.CancelFunc{}, sent: map[string]int64{}}
}

// start follows child from the start of its log (or where an earlier run
// left off) until end(runID).
func (k *kids) start(runID, child string) {
	if _, dup := k.runs[runID]; dup {
		return
	}
	ended, stop := context.WithCancel(context.Background())
	k.runs[runID] = stop
	done := make(chan struct{})
	k.done = append(k.done, done)
	k.s.wg.Add(1)
	go func() {
		defer k.s.wg.Done()
		defer close(done)
		k.followChild(ended, child)
	}()
}

// sendChild emits a child's event unless an earlier run sent it.
func (k *kids) sendChild(child string, e session.Event, grand *kids) {
	k.mu.Lock()
	if e.Seq < k.sent[child] {
		k.mu.Unlock()
		return
	}
	k.sent[child] = e.Seq + 1
	k.mu.Unlock()
	k.s.emit(child, e, grand)
}

// end lets the run's follower drain what the child logged, then stop.
func (k *kids) end(runID string) {
	if stop := k.runs[runID]; stop != nil {
		stop()
	}
}

// wait ends every child follower (the parent's stream ended) and waits.
func (k *kids) wait() {
	for _, stop := range k.runs {
		stop()
	}
	for _, d := range k.done {
		<-d
	}
}

// followChild sends child's events from seq from while the run lasts
// (ended), then what is left in its log. A child that is not a dsh
// session (an external agent's) has no log and sends nothing.
func (k *kids) followChild(ended context.Context, child string) {
	k.mu.Lock()
	from := k.sent[child]
	k.mu.Unlock()
	grand := newKids(k.s, k.ctx)
	defer grand.wait()
	live := k.s.h.App().CatalogDeps().Live
	if log, ok := live.Log(child); ok {
		f := log.Follow(from)
		defer f.Close()
		ctx, cancel := context.WithCancel(ended)
		defer cancel()
		stop := context.AfterFunc(k.ctx, cancel)
		defer stop()
		for {
			// Once ended, Next still returns what the log holds, then fails.
			events, err := f.Next(ctx, 0)
			if err != nil {
				return
			}
			for _, e := range events {
				k.sendChild(child, e, grand)
			}
		}
	}
	select {
	case <-ended.Done():
	case <-k.ctx.Done():
		return
	}
	events, err := k.s.h.App().Store.ReadFrom(k.ctx, child, from)
	if err != nil {
		return // not a dsh session
	}
	for _, e := range events {
		k.sendChild(child, e, grand)
	}
}
