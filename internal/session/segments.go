package session

import (
	"encoding/json"
	"iter"
	"os"
	"slices"
	"sort"
	"strconv"
	"sync"
)

// The log's event storage.
//
// Events live in fixed-size segments. A segment is live while it fills:
// its elements are written once, at append, past the length of every
// view handed out, and never again. Once a segment is full, durable and
// delivered to every observer it is sealed: replaced (in a new segment
// list, so no view ever sees a write) by a compact form that keeps each
// event's type, time and flags, the surface op and sources of the events
// that have them, and the data of every event whose type is not
// [Releasable]. A released event's data is read back from the log's
// [Source] by [Log.Scan], [Log.Read], [Log.At] and followers.
//
// A live envelope costs an [Event] (~100 bytes) plus its data; a sealed
// released one ~10 bytes, so a long run's log holds little more than the
// small events the loop and the policies read back.

// DefaultSegmentSize is how many events a segment holds.
const DefaultSegmentSize = 256

var (
	segMu sync.Mutex
	// segSizeVal is the segment size of logs created from now on; 0 is
	// DSH_LOG_SEGMENT (a testing knob: 1 seals every durable event, so
	// a test suite run with it finds any reader that decodes a released
	// payload) or DefaultSegmentSize.
	segSizeVal int
)

func segmentSize() int {
	segMu.Lock()
	defer segMu.Unlock()
	if segSizeVal == 0 {
		segSizeVal = DefaultSegmentSize
		if v, err := strconv.Atoi(os.Getenv("DSH_LOG_SEGMENT")); err == nil && v > 0 {
			segSizeVal = v
		}
	}
	return segSizeVal
}

// SetSegmentSize sets the segment size of the logs created afterwards
// (n <= 0 restores the default) and returns the previous one. It is for
// tests that must see payloads released in a short run.
func SetSegmentSize(n int) (previous int) {
	previous = segmentSize()
	segMu.Lock()
	defer segMu.Unlock()
	if n <= 0 {
		n = DefaultSegmentSize
	}
	segSizeVal = n
	return previous
}

// seg is one segment: live (ev) or sealed (c). Neither field changes
// after the segment is made.
type seg struct {
	ev []Event // len == the log's segment size
	c  *sealed
}

// sealed is a full segment's compact form.
type sealed struct {
	names []string // the segment's distinct types
	typ   []uint8  // index into names
	flags []uint8
	time  []int64
	kept  []offData // data kept, by offset
	ext   []offExt  // surface ops and sources, by offset
}

const (
	flagIgnorable = 1 << iota
	flagReleased
)

type offData struct {
	off  int32
	data json.RawMessage
}

type offExt struct {
	off int32
	op  *SurfaceOp
	src []int64
}

// sealSeg returns the compact form of a full live segment, releasing the
// data of releasable types. It returns nil when a segment holds more
// than 256 distinct types (it then stays live).
func sealSeg(s *seg) *seg {
	c := &sealed{typ: make([]uint8, len(s.ev)), flags: make([]uint8, len(s.ev)), time: make([]int64, len(s.ev))}
	for i := range s.ev {
		e := &s.ev[i]
		k := slices.Index(c.names, e.Type)
		if k < 0 {
			if len(c.names) == 256 {
				return nil
			}
			k = len(c.names)
			c.names = append(c.names, e.Type)
		}
		c.typ[i], c.time[i] = uint8(k), e.Time
		if e.Ignorable {
			c.flags[i] |= flagIgnorable
		}
		if e.released || Releasable(e.Type) {
			c.flags[i] |= flagReleased
		} else {
			c.kept = append(c.kept, offData{int32(i), e.Data})
		}
		if e.SurfaceOp != nil || e.SourceEventSeqs != nil {
			c.ext = append(c.ext, offExt{int32(i), e.SurfaceOp, e.SourceEventSeqs})
		}
	}
	c.kept, c.ext = slices.Clip(c.kept), slices.Clip(c.ext)
	return &seg{c: c}
}

// at returns the event at offset i of a segment whose first seq is first.
func (s *seg) at(first int64, i int) Event {
	if s.c == nil {
		return s.ev[i]
	}
	c := s.c
	e := Event{Type: c.names[c.typ[i]], Seq: first + int64(i), Time: c.time[i],
		Ignorable: c.flags[i]&flagIgnorable != 0, released: c.flags[i]&flagReleased != 0}
	if !e.released {
		if j := sort.Search(len(c.kept), func(j int) bool { return c.kept[j].off >= int32(i) }); j < len(c.kept) && c.kept[j].off == int32(i) {
			e.Data = c.kept[j].data
		}
	}
	if j := sort.Search(len(c.ext), func(j int) bool { return c.ext[j].off >= int32(i) }); j < len(c.ext) && c.ext[j].off == int32(i) {
		e.SurfaceOp, e.SourceEventSeqs = c.ext[j].op, c.ext[j].src
	}
	return e
}

// View is a snapshot of a log's envelopes: what the log held when the
// view was taken. It is cheap to take and safe to read from any
// goroutine while the log grows. The data of released events (see
// [Releasable]) is nil: a reader that decodes those types reads through
// [Log.Scan] instead.
type View struct {
	segs []*seg
	n    int64
	size int64
}

// Len is the number of events in the view.
func (v View) Len() int64 { return v.n }

// At returns the envelope at seq (0 <= seq < Len).
func (v View) At(seq int64) Event {
	return v.segs[seq/v.size].at(seq/v.size*v.size, int(seq%v.size))
}

// From iterates the envelopes from seq from on, in seq order.
func (v View) From(from int64) iter.Seq[Event] {
	return func(yield func(Event) bool) {
		for seq := max(from, 0); seq < v.n; seq++ {
			if !yield(v.At(seq)) {
				return
			}
		}
	}
}

// All iterates every envelope in seq order.
func (v View) All() iter.Seq[Event] { return v.From(0) }

// Backward iterates the envelopes from the newest to the oldest.
func (v View) Backward() iter.Seq[Event] {
	return func(yield func(Event) bool) {
		for seq := v.n - 1; seq >= 0; seq-- {
			if !yield(v.At(seq)) {
				return
			}
		}
	}
}

// Slice returns a copy of the envelopes from seq from up to (not
// including) to.
func (v View) Slice(from, to int64) []Event {
	from, to = max(from, 0), min(to, v.n)
	if from >= to {
		return nil
	}
	out := make([]Event, 0, to-from)
	for seq := from; seq < to; seq++ {
		out = append(out, v.At(seq))
	}
	return out
}

// viewLocked returns a view of the log; the caller holds l.mu.
func (l *Log) viewLocked() View {
	return View{segs: l.segs[:len(l.segs):len(l.segs)], n: l.n, size: l.size}
}

// atLocked returns the envelope at seq; the caller holds l.mu.
func (l *Log) atLocked(seq int64) Event {
	return l.segs[seq/l.size].at(seq/l.size*l.size, int(seq%l.size))
}

// putLocked appends e (numbered l.n) to the storage.
func (l *Log) putLocked(e Event) {
	if l.n%l.size == 0 {
		l.segs = append(l.segs, &seg{ev: make([]Event, l.size)})
	}
	l.segs[l.n/l.size].ev[l.n%l.size] = e
	l.n++
}

// sealLocked seals every full segment that is durable and delivered.
func (l *Log) sealLocked() {
	if l.source == nil {
		return
	}
	end := min(l.durable, l.nextDeliver)
	var next []*seg
	for k := l.sealedTo; int64(k+1)*l.size <= end && k < len(l.segs); k++ {
		s := l.segs[k]
		if s.c == nil {
			if s = sealSeg(s); s == nil {
				s = l.segs[k]
			}
		}
		if next == nil {
			// A new list: a view taken earlier keeps the old one.
			next = slices.Clone(l.segs)
		}
		next[k] = s
		l.sealedTo = k + 1
	}
	if next != nil {
		l.segs = next
	}
}
