package sqlite

import (
	"fmt"
	"runtime"
	"sync"

	"github.com/dsh-dev/dsh/internal/session"
)

// decodeBatchRows is how many scanned rows a decoding goroutine takes at
// once; a read shorter than that decodes on the reading goroutine.
const decodeBatchRows = 2048

// decoder turns a read's rows into events (see readRange): rows are
// added in seq order as they are scanned and, once a batch is full,
// decoded on other goroutines while the scan goes on. Its goroutines end
// at finish or stop, which the reader always calls.
type decoder struct {
	id   string
	from int64
	bare bool

	// The rows scanned so far. An element is never written once added,
	// and a batch hands its workers sub-slices, so the scan appending
	// (and growing the arrays) never touches what a worker reads.
	bodies [][]byte
	types  []string
	times  []int64
	sent   int // rows handed to workers

	// events receives the decoded events in place (a batch writes only
	// its own range); a batch past its length (a log longer than the
	// preallocation's cap) goes to overflow.
	events []session.Event

	jobs     chan decodeBatch // nil until the first batch
	wg       sync.WaitGroup
	mu       sync.Mutex
	errs     map[int]error   // guarded by mu; by batch index
	overflow map[int]decoded // guarded by mu; by batch index
	batches  int
	closed   bool
}

type decodeBatch struct {
	k, lo  int // batch index, offset of its first row
	bodies [][]byte
	types  []string
	times  []int64
}

type decoded struct {
	lo     int
	events []session.Event
}

func newDecoder(id string, from int64, bare bool, capHint int64) *decoder {
	d := &decoder{id: id, from: from, bare: bare, events: make([]session.Event, capHint),
		bodies: make([][]byte, 0, capHint), types: make([]string, 0, capHint)}
	if bare {
		// Only a bare read makes events from the row's time.
		d.times = make([]int64, 0, capHint)
	}
	return d
}

// add records the next row.
func (d *decoder) add(typ []byte, tm int64, body []byte) {
	d.types = append(d.types, internType(d.types, typ))
	if d.bare {
		d.times = append(d.times, tm)
	}
	d.bodies = append(d.bodies, body)
	if len(d.bodies)-d.sent >= decodeBatchRows {
		d.send()
	}
}

// send hands the rows not yet sent to the workers, starting them.
func (d *decoder) send() {
	if d.jobs == nil {
		workers := max(runtime.GOMAXPROCS(0), 1)
		d.jobs = make(chan decodeBatch, workers)
		d.errs, d.overflow = map[int]error{}, map[int]decoded{}
		for range workers {
			d.wg.Go(d.work)
		}
	}
	lo, hi := d.sent, len(d.bodies)
	b := decodeBatch{k: d.batches, lo: lo, bodies: d.bodies[lo:hi], types: d.types[lo:hi]}
	if d.bare {
		b.times = d.times[lo:hi]
	}
	d.jobs <- b
	d.batches++
	d.sent = hi
}

func (d *decoder) work() {
	for b := range d.jobs {
		var out []session.Event
		inPlace := b.lo+len(b.bodies) <= len(d.events)
		if inPlace {
			out = d.events[b.lo : b.lo+len(b.bodies)]
		} else {
			out = make([]session.Event, len(b.bodies))
		}
		err := d.decode(b, out)
		d.mu.Lock()
		if err != nil {
			d.errs[b.k] = err
		} else if !inPlace {
			d.overflow[b.k] = decoded{b.lo, out}
		}
		d.mu.Unlock()
	}
}

// decode decodes one batch into out, stopping at its first bad row.
func (d *decoder) decode(b decodeBatch, out []session.Event) error {
	for i, body := range b.bodies {
		seq := d.from + int64(b.lo+i)
		if body == nil && d.bare {
			// The query left the body out: only a session.Bare type's.
			if !session.Bare(b.types[i]) {
				return fmt.Errorf("session %s: event %d: the body of a %s event was not read", d.id, seq, b.types[i])
			}
			out[i] = session.ReleasedEvent(b.types[i], seq, b.times[i])
			continue
		}
		e, err := decodeEvent(body)
		if err != nil {
			return corrupt(d.id, seq, err.Error())
		}
		if e.Seq != seq || e.Type != b.types[i] {
			return corrupt(d.id, seq, fmt.Sprintf("envelope (type %q, seq %d) does not match its row (type %q)", e.Type, e.Seq, b.types[i]))
		}
		out[i] = e
	}
	return nil
}

// finish decodes what is left and returns every event in seq order, or
// the error of the lowest bad row (what a sequential decode reports).
func (d *decoder) finish() ([]session.Event, error) {
	n := len(d.bodies)
	if d.jobs == nil {
		// A short read: decode it here.
		out := d.events[:min(n, len(d.events))]
		if n > len(d.events) {
			out = make([]session.Event, n)
		}
		err := d.decode(decodeBatch{bodies: d.bodies, types: d.types, times: d.times}, out)
		return out, err
	}
	if d.sent < n {
		d.send()
	}
	d.stop()
	for k := range d.batches {
		if err := d.errs[k]; err != nil {
			return nil, err
		}
	}
	if len(d.overflow) == 0 {
		return d.events[:n], nil
	}
	// Past the preallocation: the batches that overflowed are the last
	// ones, contiguous.
	first := n
	for _, o := range d.overflow {
		first = min(first, o.lo)
	}
	events := d.events[:first:first]
	for k := range d.batches {
		if o, ok := d.overflow[k]; ok {
			events = append(events, o.events...)
		}
	}
	return events, nil
}

// stop ends the workers after the batches sent; idempotent.
func (d *decoder) stop() {
	if d.jobs == nil || d.closed {
		return
	}
	d.closed = true
	close(d.jobs)
	d.wg.Wait()
}
