package session

import (
	"context"
	"fmt"
	"slices"
)

// Released payloads.
//
// A long run's log would otherwise hold every payload it ever appended:
// each step's streamed chunks, the assistant message they assemble into,
// its tool calls and their results, although the model-visible part of
// them already lives in the derived history ([Log.History]) and all of
// them are in the store. A log given a [Source] therefore seals its full
// segments once they are durable (written by a successful flush) and
// delivered (segments.go): the envelopes stay, the data of the types in
// [Releasable] is released (nil Data, [Event.Released]).
//
// Invariants:
//   - Only durable events are released, so the source can always give
//     their data back, and only delivered ones, so every observer sees
//     every event whole.
//   - Releasing never writes an element the log handed out (see [View]).
//   - Readers that need the data of a releasable type read it with
//     [Log.Scan], [Log.Read], [Log.At] or a [Follower], which read
//     released payloads back from the source a page at a time;
//     [Event.Decode] of a released event fails with *[ReleasedError]
//     instead of decoding nothing.

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

// Bare reports whether events of type typ have an envelope that is
// their type, seq and time alone: the validation refuses a surface op,
// source seqs or the ignorable flag on them. A store can then hand a log
// one of them released ([ReleasedEvent]) from its columns, without
// reading its body: a resumed long session's streamed chunks, three in
// four of its events, are never read unless someone reads them.
func Bare(typ string) bool { return typ == TypeAssistantChunk }

// ReleasedEvent is the envelope of a stored event of a [Bare] type whose
// data was not read. A log seeded with it holds it released (see
// [Releasable]) and reads its data back from its [Source] when asked.
func ReleasedEvent(typ string, seq, time int64) Event {
	return Event{Type: typ, Seq: seq, Time: time, released: true}
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

// SetSource lets the log release durable payloads (see [Releasable]) and
// read them back from src. Call it before the log is shared. Sealing
// happens after a flush, so the readers that fold a resumed log's seed
// while the session is wired read it from memory.
func (l *Log) SetSource(src Source) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.source = src
}

// readPage is how many stored events one read-back asks for.
const readPage = 256

// fill reads the released payloads among evs (a copy the caller owns,
// in seq order) back from the source.
func (l *Log) fill(ctx context.Context, evs []Event) error {
	return l.fillWanted(ctx, evs, nil)
}

// fillWanted is fill of the released events want accepts (nil: all).
func (l *Log) fillWanted(ctx context.Context, evs []Event, want func(string) bool) error {
	l.mu.Lock()
	src := l.source
	l.mu.Unlock()
	wanted := func(e *Event) bool { return e.released && (want == nil || want(e.Type)) }
	for i := 0; i < len(evs); {
		if !wanted(&evs[i]) {
			i++
			continue
		}
		if src == nil {
			return fmt.Errorf("session %s: event %d was not read and the log has no source to read it from", l.header.ID, evs[i].Seq)
		}
		// One read up to the last wanted event of this page.
		last := i
		for j := i; j < len(evs) && j < i+readPage; j++ {
			if wanted(&evs[j]) {
				last = j
			}
		}
		from := evs[i].Seq
		page, err := src.ReadPage(ctx, l.header.ID, from, last-i+1)
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
			if wanted(&evs[j]) {
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
	return l.ScanTypes(ctx, from, nil, fn)
}

// ScanTypes is [Log.Scan] of the events whose type is in types (nil:
// every event): only their payloads are read back, so a fold of a few
// types over a resumed long log does not read its chunks.
func (l *Log) ScanTypes(ctx context.Context, from int64, types []string, fn func(Event) error) error {
	var want func(string) bool
	if types != nil {
		want = func(typ string) bool { return slices.Contains(types, typ) }
	}
	view := l.View()
	var page []Event
	for i := max(from, 0); i < view.Len(); i += readPage {
		hi := min(i+readPage, view.Len())
		// The wanted envelopes of this window, copied one by one: a scan
		// of a few types over a long log copies only those.
		page = page[:0]
		released := false
		for seq := i; seq < hi; seq++ {
			if e := view.At(seq); want == nil || want(e.Type) {
				released = released || e.released
				page = append(page, e)
			}
		}
		if released {
			// Read back through the whole window, which fill reads as
			// contiguous pages of the store.
			all := view.Slice(i, hi)
			if err := l.fillWanted(ctx, all, want); err != nil {
				return err
			}
			page = page[:0]
			for _, e := range all {
				if want == nil || want(e.Type) {
					page = append(page, e)
				}
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
	view := l.View()
	if to < 0 || to > view.Len() {
		to = view.Len()
	}
	out := view.Slice(from, to)
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
