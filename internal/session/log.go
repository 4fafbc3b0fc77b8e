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
type Log struct {
	mu        sync.Mutex
	header    Header
	events    []Event       // guarded by mu
	surface   []llm.Message // guarded by mu; derived model history
	nodeSeqs  []int64       // guarded by mu; the event seq behind each surface node
	pending   []Event       // guarded by mu; not yet in the sink
	pendingAt time.Time     // guarded by mu; time of the oldest pending event
	observers []func(Event) // guarded by mu
	sink      Sink
	now       func() time.Time
	firstLive int64
}

// NewLog returns a live log continuing seed (events already durable in the
// sink, e.g. a resumed session). sink may be nil for an ephemeral log.
func NewLog(h Header, seed []Event, sink Sink) (*Log, error) {
	l := &Log{header: h, sink: sink, now: time.Now, firstLive: int64(len(seed))}
	for i, e := range seed {
		if e.Seq != int64(i) {
			return nil, &FormatError{SessionID: h.ID, Seq: e.Seq, Reason: fmt.Sprintf("seq %d at position %d", e.Seq, i)}
		}
		if err := l.foldSurfaceLocked(e); err != nil {
			return nil, err
		}
	}
	l.events = append(make([]Event, 0, len(seed)+64), seed...)
	return l, nil
}

// Header returns the session header.
func (l *Log) Header() Header { return l.header }

// ID returns the session id.
func (l *Log) ID() string { return l.header.ID }

// FirstLiveSeq is the seq of the first event appended by this process.
func (l *Log) FirstLiveSeq() int64 { return l.firstLive }

// Observe registers fn to be called, in seq order and under the log's
// lock, for every event appended after this call. fn must not append.
func (l *Log) Observe(fn func(Event)) {
	l.mu.Lock()
	l.observers = append(l.observers, fn)
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
	l.mu.Lock()
	defer l.mu.Unlock()
	e.Seq = int64(len(l.events))
	e.Time = l.now().UnixMilli()
	// Data from encodeData is lossless: checked if raw, produced by
	// encoding/json otherwise.
	if err := e.validateEnvelope(); err != nil {
		return Event{}, fmt.Errorf("append: %w", err)
	}
	if err := l.foldSurfaceLocked(e); err != nil {
		return Event{}, err
	}
	l.events = append(l.events, e)
	if len(l.pending) == 0 {
		l.pendingAt = l.now()
	}
	l.pending = append(l.pending, e)
	for _, fn := range l.observers {
		fn(e)
	}
	if len(l.pending) >= flushEvery || l.now().Sub(l.pendingAt) >= flushAfter {
		// A failed opportunistic flush keeps the events pending; the next
		// explicit Flush reports the error.
		_ = l.flushLocked(context.Background())
	}
	return e, nil
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

// Flush writes every pending event to the sink.
func (l *Log) Flush(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.flushLocked(ctx)
}

func (l *Log) flushLocked(ctx context.Context) error {
	if l.sink == nil || len(l.pending) == 0 {
		l.pending = l.pending[:0]
		return nil
	}
	if err := l.sink.Append(ctx, l.header.ID, l.pending); err != nil {
		return fmt.Errorf("flush session %s: %w", l.header.ID, err)
	}
	l.pending = l.pending[:0]
	return nil
}

// Len returns the number of events.
func (l *Log) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.events)
}

// Events returns a copy of the event list.
func (l *Log) Events() []Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]Event(nil), l.events...)
}

// Messages returns the model history derived from the log.
func (l *Log) Messages() []llm.Message {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]llm.Message(nil), l.surface...)
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
