package session

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
)

// Released payloads.
//
// A long run's log would otherwise hold every payload it ever appended:
// each step's streamed chunks, the assistant message they assemble into,
// its tool calls and their results, although the model-visible part of
// them already lives in the derived history ([Log.History]) and all of
// them are in the store. A log given a [Source] therefore releases the
// data of the payload types in [Releasable] once those events are
// durable (written by a successful flush) and enough of them has piled
// up: the envelope (type, seq, time, surface op, sources) stays, its
// Data becomes nil, and the event reports [Event.Released].
//
// Invariants:
//   - Only durable events are released, so the source can always give
//     their data back; an event still pending for the sink keeps it.
//   - Releasing never writes an element the log handed out: the log
//     builds a new event list with the released envelopes and swaps it
//     in, so a view taken earlier keeps what it saw (see [Log.Envelopes]).
//   - Readers that need the data of a releasable type read it with
//     [Log.Scan], [Log.Read] or a [Follower], which read released
//     payloads back from the source a page at a time; [Event.Decode] of
//     a released event fails with *[ReleasedError] instead of decoding
//     nothing.

// Source reads back stored events of a session in the stored form, at
// most limit from fromSeq on (store.Store's ReadPage has this shape).
type Source interface {
	ReadPage(ctx context.Context, id string, fromSeq int64, limit int) ([]Event, error)
}

// Releasable reports whether the log may release the data of an event
// of type typ once it is durable: the streamed chunks and the surface
// payloads whose model-visible content the derived history holds. The
// small events the loop and the policies read back (turns, approvals,
// modes, inbox splices, user messages, request headers) always keep
// their data.
func Releasable(typ string) bool {
	switch typ {
	case TypeAssistantChunk, TypeAssistantMsg, TypeToolCall, TypeToolResult:
		return true
	}
	return false
}

// ReleasedError is what [Event.Decode] returns for an event whose data
// the log released; read the event with [Log.Scan] or [Log.Read].
type ReleasedError struct {
	Type string
	Seq  int64
}

func (e *ReleasedError) Error() string {
	return fmt.Sprintf("%s event %d: its data was released from memory; read it with Log.Scan", e.Type, e.Seq)
}

// Released reports whether the log released the event's data.
func (e Event) Released() bool { return e.released }

// defaultReleaseBytes is how much releasable durable data a log holds
// before it releases it: large enough that a short run never pays for
// the copy of its event list, small next to a long run's history.
const defaultReleaseBytes = 512 << 10

// releaseBytes returns the threshold, which DSH_LOG_RELEASE_BYTES
// overrides (a testing knob: 1 releases at every flush, so a test suite
// run with it finds any reader that decodes a released payload).
var releaseBytes = sync.OnceValue(func() int {
	if v, err := strconv.Atoi(os.Getenv("DSH_LOG_RELEASE_BYTES")); err == nil && v > 0 {
		return v
	}
	return defaultReleaseBytes
})

// SetReleaseThreshold sets how many bytes of releasable durable data a
// log holds before releasing them (n <= 0 restores the default) and
// returns the previous threshold. It is for tests that must see payloads
// released in a short run; it affects every log of the process.
func SetReleaseThreshold(n int) (previous int) {
	releaseMu.Lock()
	defer releaseMu.Unlock()
	previous = releaseBytes()
	if n <= 0 {
		n = defaultReleaseBytes
	}
	releaseBytes = func() int { return n }
	return previous
}

var releaseMu sync.Mutex

// SetSource lets the log release durable payloads (see [Releasable]) and
// read them back from src. Call it before the log is shared.
func (l *Log) SetSource(src Source) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.source = src
}

// noteDurableLocked records that every event before seq end is in the
// sink and releases payloads when enough are held.
func (l *Log) noteDurableLocked(end int64) {
	for i := max(l.durable, 0); i < end && i < int64(len(l.events)); i++ {
		if e := &l.events[i]; Releasable(e.Type) && !e.released {
			l.held += len(e.Data)
		}
	}
	l.durable = max(l.durable, end)
	if l.source == nil || l.held < releaseBytes() {
		return
	}
	// A new list, so no element handed out is ever written.
	evs := make([]Event, len(l.events), cap(l.events))
	copy(evs, l.events)
	for i := l.releasedTo; i < l.durable; i++ {
		if e := &evs[i]; Releasable(e.Type) && !e.released {
			e.Data, e.released = nil, true
		}
	}
	l.events, l.releasedTo, l.held = evs, l.durable, 0
}

// readPage is how many stored events one read-back asks for.
const readPage = 256

// fill reads the released payloads among evs (a copy the caller owns,
// in seq order) back from the source.
func (l *Log) fill(ctx context.Context, evs []Event) error {
	for i := 0; i < len(evs); {
		if !evs[i].released {
			i++
			continue
		}
		from := evs[i].Seq
		page, err := l.source.ReadPage(ctx, l.header.ID, from, min(readPage, len(evs)-i))
		if err != nil {
			return fmt.Errorf("session %s: read back event %d: %w", l.header.ID, from, err)
		}
		if len(page) == 0 {
			return fmt.Errorf("session %s: read back event %d: not in the store", l.header.ID, from)
		}
		for _, s := range page {
			j := i + int(s.Seq-from)
			if j >= len(evs) || evs[j].Seq != s.Seq {
				break
			}
			if evs[j].released {
				if s.Type != evs[j].Type {
					return fmt.Errorf("session %s: event %d is %s in the store, %s in the log", l.header.ID, s.Seq, s.Type, evs[j].Type)
				}
				evs[j].Data, evs[j].released = s.Data, false
			}
		}
		i += len(page)
	}
	return nil
}

// Scan calls fn with every event from seq from on, in seq order, with
// its data: released payloads are read back from the source a page at a
// time, so scanning a long log holds one page of them. It stops at the
// first error fn returns and returns it. Events appended while it scans
// are not included.
func (l *Log) Scan(ctx context.Context, from int64, fn func(Event) error) error {
	view := l.Envelopes()
	for i := max(from, 0); i < int64(len(view)); i += readPage {
		page := view[i:min(i+readPage, int64(len(view)))]
		if hasReleased(page) {
			page = append([]Event(nil), page...)
			if err := l.fill(ctx, page); err != nil {
				return err
			}
		}
		for _, e := range page {
			if err := fn(e); err != nil {
				return err
			}
		}
	}
	return nil
}

// Read returns a copy of the events from seq from up to (not including)
// seq to (to < 0: the end), with their data (see [Log.Scan]).
func (l *Log) Read(ctx context.Context, from, to int64) ([]Event, error) {
	view := l.Envelopes()
	if to < 0 || to > int64(len(view)) {
		to = int64(len(view))
	}
	from = max(from, 0)
	if from >= to {
		return nil, nil
	}
	out := append([]Event(nil), view[from:to]...)
	if hasReleased(out) {
		if err := l.fill(ctx, out); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func hasReleased(evs []Event) bool {
	for i := range evs {
		if evs[i].released {
			return true
		}
	}
	return false
}

// At returns the event at seq with its data (read back if released).
func (l *Log) At(ctx context.Context, seq int64) (Event, error) {
	evs, err := l.Read(ctx, seq, seq+1)
	if err != nil {
		return Event{}, err
	}
	if len(evs) != 1 {
		return Event{}, fmt.Errorf("session %s: no event %d", l.header.ID, seq)
	}
	return evs[0], nil
}
