package session

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/dsh-dev/dsh/internal/llm"
)

// Sink persists appended events. Append receives events whose first seq
// equals the sink's expected next seq; it must be all-or-nothing.
type Sink interface {
	Append(ctx context.Context, sessionID string, events []Event) error
}

// Batching limits: pending events are written when this many accumulate
// or when the oldest has waited this long, whichever comes first, and
// always at an explicit Flush.
const (
	flushEvery = 256
	flushAfter = 200 * time.Millisecond
)

// Log is a live, in-memory session log bound to an optional durable sink.
// It is safe for concurrent use. Appends are assigned contiguous seqs and
// become visible to observers immediately; they reach the sink in batches
// and at every [Log.Flush].
//
// Nothing slow runs under the log's lock: observers are called and the
// sink is written after it is released, so readers (Events, Messages) and
// other appenders never wait on a callback or on I/O. Consumers that do
// I/O (a JSON stream on stdout) read the log by seq from their own
// goroutine through a [Follower] instead of observing it, so a consumer
// that stalls never stalls an appender.
type Log struct {
	mu        sync.Mutex
	delivered *sync.Cond // on mu; broadcast as each event reaches every observer
	header    Header
	// The events, in segments (segments.go); n is their count and size
	// the segment size, fixed at NewLog.
	segs      []*seg           // guarded by mu; never written in place once handed out
	n         int64            // guarded by mu
	size      int64            // immutable
	latest    map[string]int64 // guarded by mu; the seq of the latest event of each type
	surface   []llm.Message    // guarded by mu; derived model history
	nodeSeqs  []int64          // guarded by mu; the event seq behind each surface node
	pending   []Event          // guarded by mu; not yet in the sink
	pendingAt time.Time        // guarded by mu; time of the oldest pending event
	observers []observer       // guarded by mu; append-only, so a copied header stays valid
	// nextDeliver is the seq of the next event to hand to the observers,
	// and the end of what followers read; delivering is set while one
	// appender does so (outside the lock).
	nextDeliver int64                  // guarded by mu
	delivering  bool                   // guarded by mu
	followers   map[*Follower]struct{} // guarded by mu
	// flushTok is held (a value in the channel) by the one sink write in
	// flight, so that batches reach the sink in seq order without a lock
	// held across the write.
	flushTok  chan struct{}
	sink      Sink
	now       func() time.Time
	firstLive int64

	// Released payloads (release.go): source reads them back; every
	// event before durable is in the sink; the first sealedTo segments
	// are sealed.
	source   Source // guarded by mu
	durable  int64  // guarded by mu
	sealedTo int    // guarded by mu
}

type observer struct {
	fn   func(Event)
	from int64 // the first seq this observer sees
}

// NewLog returns a live log continuing seed (events already durable in the
// sink, e.g. a resumed session). sink may be nil for an ephemeral log.
func NewLog(h Header, seed []Event, sink Sink) (*Log, error) {
	return newLog(h, seed, sink, false)
}

// NewLogOwning is [NewLog] taking seed over: the log keeps its events in
// seed's array instead of copying them (a resumed long session's seed is
// most of what reopening it allocates), so the caller must not use seed
// afterwards.
func NewLogOwning(h Header, seed []Event, sink Sink) (*Log, error) {
	return newLog(h, seed, sink, true)
}

func newLog(h Header, seed []Event, sink Sink, own bool) (*Log, error) {
	l := &Log{header: h, sink: sink, now: time.Now, firstLive: int64(len(seed)),
		nextDeliver: int64(len(seed)), flushTok: make(chan struct{}, 1)}
	l.delivered = sync.NewCond(&l.mu)
	l.size = int64(segmentSize())
	l.latest = map[string]int64{}
	// The events with the user/messages expanded: in place when the log
	// owns seed, else as they are put.
	full := int(int64(len(seed)) / l.size * l.size)
	adopt := func() { // the full segments are seed's array itself
		for k := int64(0); k < int64(full)/l.size; k++ {
			l.segs = append(l.segs, &seg{ev: seed[k*l.size : (k+1)*l.size : (k+1)*l.size]})
		}
		l.n = int64(full)
	}
	for i, e := range seed {
		if e.Seq != int64(i) {
			return nil, &FormatError{SessionID: h.ID, Seq: e.Seq, Reason: fmt.Sprintf("seq %d at position %d", e.Seq, i)}
		}
		// A seed read from a store holds user/messages as inbox
		// references; the log holds them whole. Expanding reads only
		// inbox splices, which expanding never changes.
		e, err := expandEvent(seed, e)
		if err != nil {
			return nil, &FormatError{SessionID: h.ID, Seq: int64(i), Reason: err.Error()}
		}
		l.latest[e.Type] = e.Seq
		if own && i < full {
			seed[i] = e
			continue
		}
		if own && i == full {
			adopt()
		}
		l.putLocked(e)
	}
	if own && len(seed) == full {
		adopt()
	}
	if err := l.foldSeedLocked(seed); err != nil {
		return nil, err
	}
	l.durable = int64(len(seed))
	return l, nil
}

// Header returns the session header.
func (l *Log) Header() Header { return l.header }

// ID returns the session id.
func (l *Log) ID() string { return l.header.ID }

// FirstLiveSeq is the seq of the first event appended by this process.
func (l *Log) FirstLiveSeq() int64 { return l.firstLive }

// Observe registers fn to be called for every event appended after this
// call, in seq order, one event at a time, before the Append of that
// event returns. fn runs outside the log's lock (it may read the log) but
// on the appender's goroutine, and appenders wait for it: it must be
// quick, in-memory work (projections, meters) and must not append or
// block. Anything that does I/O follows the log with [Log.Follow].
func (l *Log) Observe(fn func(Event)) {
	l.mu.Lock()
	l.observers = append(l.observers, observer{fn: fn, from: l.n})
	l.mu.Unlock()
}

// AppendOption adjusts one append.
type AppendOption func(*Event)

// Surface marks a surface event with the append op and its source seqs.
func Surface(sourceSeqs ...int64) AppendOption {
	return func(e *Event) {
		e.SurfaceOp = Append
		e.SourceEventSeqs = sourceSeqs
	}
}

// Ignorable marks the event as skippable by older readers.
func Ignorable() AppendOption { return func(e *Event) { e.Ignorable = true } }

// Append marshals data and appends an event of type typ. A json.RawMessage
// is checked for losslessness; other values are marshalled by
// encoding/json, which cannot produce duplicate keys or NaN.
func (l *Log) Append(typ string, data any, opts ...AppendOption) (Event, error) {
	raw, err := encodeData(data)
	if err != nil {
		return Event{}, fmt.Errorf("append %s: %w", typ, err)
	}
	e := Event{Type: typ, Data: raw}
	for _, o := range opts {
		o(&e)
	}
	if IsSurfaceType(typ) && e.SurfaceOp == nil {
		e.SurfaceOp = Append
	}
	due, err := l.appendAndDeliver(&e)
	if err != nil {
		return Event{}, err
	}
	if due {
		// An opportunistic flush never waits for one in flight, which
		// will be followed by another; a failed one keeps the events
		// pending and the next explicit Flush reports the error.
		select {
		case l.flushTok <- struct{}{}:
			_ = l.flushHeld(context.Background())
			<-l.flushTok
		default:
		}
	}
	return e, nil
}

// appendAndDeliver numbers e, appends it and hands it to the observers.
// It reports whether the pending batch is due for the sink.
func (l *Log) appendAndDeliver(e *Event) (flushDue bool, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	e.Seq = l.n
	e.Time = l.now().UnixMilli()
	// Data from encodeData is lossless: checked if raw, produced by
	// encoding/json otherwise.
	if err := e.validateEnvelope(); err != nil {
		return false, fmt.Errorf("append: %w", err)
	}
	// The sink gets the stored form, which differs only for a
	// user/message that references the inbox (see InboxRef).
	stored := *e
	if ref := e.inboxRef; ref != nil {
		e.inboxRef, stored.inboxRef = nil, nil
		if e.Type != TypeUserMessage {
			return false, fmt.Errorf("append %s: only user/message may reference the inbox", e.Type)
		}
		data, err := storedForm(l.atLocked, l.n, e.Data, *ref)
		if err != nil {
			return false, fmt.Errorf("append: %w", err)
		}
		stored.Data = data
	}
	if err := l.foldSurfaceLocked(*e); err != nil {
		return false, err
	}
	l.putLocked(*e)
	l.latest[e.Type] = e.Seq
	if len(l.pending) == 0 {
		l.pendingAt = l.now()
	}
	l.pending = append(l.pending, stored)
	flushDue = len(l.pending) >= flushEvery || l.now().Sub(l.pendingAt) >= flushAfter
	l.deliverLocked(e.Seq)
	return flushDue, nil
}

// deliverLocked returns once every observer has seen the event at seq.
// One appender at a time delivers, in seq order, every event not yet
// delivered; the others wait for it. The lock is released around each
// callback.
func (l *Log) deliverLocked(seq int64) {
	for l.delivering && l.nextDeliver <= seq {
		l.delivered.Wait()
	}
	if l.nextDeliver > seq || len(l.observers) == 0 {
		l.deliveredLocked(max(l.nextDeliver, seq+1))
		return
	}
	l.delivering = true
	defer func() {
		// An observer that panics does not wedge the log: the event it
		// failed on counts as delivered (no observer gets it twice) and
		// the next appender takes over the delivery.
		r := recover()
		if r != nil {
			l.deliveredLocked(l.nextDeliver + 1)
		}
		l.delivering = false
		l.delivered.Broadcast()
		if r != nil {
			panic(r)
		}
	}()
	for l.nextDeliver < l.n {
		e, obs := l.atLocked(l.nextDeliver), l.observers
		l.callOutside(obs, e)
		l.deliveredLocked(l.nextDeliver + 1)
		l.delivered.Broadcast()
	}
}

// deliveredLocked records that every observer has seen the events before
// next, and wakes the followers: they read only delivered events, so a
// reader of the log never gets ahead of what the observers derive from
// it (a stream that shows a turn's end, say, before the host's status has
// left "running").
func (l *Log) deliveredLocked(next int64) {
	l.nextDeliver = next
	for f := range l.followers {
		f.wakeLocked()
	}
}

// callOutside calls the observers registered before e, without the lock.
func (l *Log) callOutside(obs []observer, e Event) {
	l.mu.Unlock()
	defer l.mu.Lock()
	for _, o := range obs {
		if e.Seq >= o.from {
			o.fn(e)
		}
	}
}

func encodeData(data any) (json.RawMessage, error) {
	switch d := data.(type) {
	case json.RawMessage:
		if err := CheckLossless(d); err != nil {
			return nil, err
		}
		return d, nil
	case nil:
		return json.RawMessage(`{}`), nil
	}
	return json.Marshal(data)
}

// Flush writes every pending event to the sink. It waits (bounded by
// ctx) for a write already in flight, then writes what is still pending;
// the log's lock is not held during the write.
func (l *Log) Flush(ctx context.Context) error {
	select {
	case l.flushTok <- struct{}{}:
	case <-ctx.Done():
		return fmt.Errorf("flush session %s: %w", l.header.ID, context.Cause(ctx))
	}
	defer func() { <-l.flushTok }()
	return l.flushHeld(ctx)
}

// flushHeld writes the pending batch; the caller holds flushTok.
func (l *Log) flushHeld(ctx context.Context) error {
	l.mu.Lock()
	batch, at := l.pending, l.pendingAt
	l.pending = nil
	l.mu.Unlock()
	if l.sink == nil || len(batch) == 0 {
		return nil
	}
	if err := l.sink.Append(ctx, l.header.ID, batch); err != nil {
		// Put the batch back in front of what was appended meanwhile.
		l.mu.Lock()
		l.pending, l.pendingAt = append(batch, l.pending...), at
		l.mu.Unlock()
		return fmt.Errorf("flush session %s: %w", l.header.ID, err)
	}
	l.mu.Lock()
	l.durable = max(l.durable, batch[len(batch)-1].Seq+1)
	l.sealLocked()
	l.mu.Unlock()
	return nil
}

// Len returns the number of events.
func (l *Log) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return int(l.n)
}

// Events returns a copy of the event list with every payload, read back
// from the source where released (see [Log.Scan]). It is for tests and
// small logs: it has no context and holds the whole log; an event whose
// payload cannot be read back keeps nil Data. Production readers use
// [Log.Scan], [Log.Read] or [Log.View].
func (l *Log) Events() []Event {
	out, err := l.Read(context.Background(), 0, -1)
	if err != nil {
		v := l.View()
		return v.Slice(0, v.Len())
	}
	return out
}

// Latest returns the latest event of type typ, or false when the log
// has none, without walking the log. For a [Releasable] type the event
// may be released (read it back with [Log.Read]).
func (l *Log) Latest(typ string) (Event, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	seq, ok := l.latest[typ]
	if !ok {
		return Event{}, false
	}
	return l.atLocked(seq), true
}

// View returns a snapshot of the log's envelopes without copying them
// (see [View]): the data of durable events of a [Releasable] type may
// have been released, so a caller that decodes those types reads them
// with [Log.Scan] instead.
func (l *Log) View() View {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.viewLocked()
}

// Messages returns the model history derived from the log.
func (l *Log) Messages() []llm.Message {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]llm.Message(nil), l.surface...)
}

// History returns the model history derived from the log without
// copying it, for a caller that reads it each step (the agent's request):
// it must not modify the messages or their blocks. Appending to it is
// safe, since its capacity ends at its length. The log never writes an
// element it has handed out: an append writes past it, and a replace
// builds a new history.
func (l *Log) History() []llm.Message {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.surface[:len(l.surface):len(l.surface)]
}

// SurfaceView returns History and the event seq behind each of its
// messages, both read in place under the same rules as History.
func (l *Log) SurfaceView() (seqs []int64, msgs []llm.Message) {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := len(l.surface)
	return l.nodeSeqs[:n:n], l.surface[:n:n]
}

// SurfaceNode is one message of the derived history with the seq of the
// event that produced it.
type SurfaceNode struct {
	Seq     int64
	Message llm.Message
}

// Surface returns the derived history with the event seq behind each
// message, for planners (compaction) that replace ranges of it.
func (l *Log) Surface() []SurfaceNode {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]SurfaceNode, len(l.surface))
	for i, m := range l.surface {
		out[i] = SurfaceNode{Seq: l.nodeSeqs[i], Message: m}
	}
	return out
}

func (l *Log) foldSurfaceLocked(e Event) error {
	before := len(l.surface)
	surface, err := foldSurface(l.surface, e)
	if err != nil {
		return err
	}
	switch {
	case e.SurfaceOp != nil && e.SurfaceOp.Replace:
		seqs := append([]int64(nil), l.nodeSeqs[:e.SurfaceOp.Start]...)
		if len(surface) == before-(e.SurfaceOp.End-e.SurfaceOp.Start+1)+1 {
			seqs = append(seqs, e.Seq)
		}
		l.nodeSeqs = append(seqs, l.nodeSeqs[e.SurfaceOp.End+1:]...)
	case len(surface) > before:
		l.nodeSeqs = append(l.nodeSeqs, e.Seq)
	}
	l.surface = surface
	return nil
}
