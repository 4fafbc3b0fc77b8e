// Package ring is a bounded byte buffer addressed by absolute offset:
// it keeps the last Capacity bytes written and counts every byte, so
// that readers name output by its position since the first write, page
// correctly after the buffer wrapped and learn how much scrolled out
// before they read it. Background jobs and terminals keep their output
// in one.
package ring

// Buffer keeps the last cap bytes written to it. The zero value keeps
// nothing but still counts; use New. Not safe for concurrent use: its
// owner guards it with its own mutex.
type Buffer struct {
	cap   int
	buf   []byte // grows up to cap, then is overwritten circularly
	start int    // index in buf of the oldest kept byte once buf is full
	total int64  // bytes ever written
}

// New returns a Buffer that keeps at most capacity bytes (negative
// counts as 0). Memory grows with the output only up to capacity: a
// producer that prints little never costs the full buffer.
func New(capacity int) *Buffer { return &Buffer{cap: max(0, capacity)} }

// Write records p. It never fails; the signature is io.Writer's.
func (r *Buffer) Write(p []byte) (int, error) {
	n := len(p)
	r.total += int64(n)
	if len(p) >= r.cap {
		// Only the end of p survives; rebuild the buffer from it.
		r.buf = append(r.buf[:0], p[len(p)-r.cap:]...)
		r.start = 0
		return n, nil
	}
	if room := r.cap - len(r.buf); room > 0 {
		k := min(room, len(p))
		r.buf = append(r.buf, p[:k]...)
		p = p[k:]
	}
	for len(p) > 0 {
		c := copy(r.buf[r.start:], p)
		p = p[c:]
		r.start = (r.start + c) % r.cap
	}
	return n, nil
}

// Total is the number of bytes ever written: the offset the next byte
// will have.
func (r *Buffer) Total() int64 { return r.total }

// First is the offset of the oldest byte still kept, which is also how
// many bytes scrolled out.
func (r *Buffer) First() int64 { return r.total - int64(len(r.buf)) }

// Read returns a copy of at most count kept bytes from offset from, the
// offset the copy starts at (from, or the oldest kept byte when from
// scrolled out) and how many bytes between from and that start were
// dropped. from is clamped to [0, Total]; count <= 0 means to the end.
func (r *Buffer) Read(from int64, count int) (chunk []byte, start, dropped int64) {
	from = max(0, min(from, r.total))
	if f := r.First(); from < f {
		dropped, from = f-from, f
	}
	n := int(r.total - from)
	if count > 0 && count < n {
		n = count
	}
	chunk = make([]byte, 0, n)
	// The kept bytes in order are buf[start:] then buf[:start]; skip the
	// ones before from.
	skip := int(from - r.First())
	older, newer := r.buf[r.start:], r.buf[:r.start]
	if skip < len(older) {
		chunk = append(chunk, older[skip:]...)
		chunk = append(chunk, newer...)
	} else {
		chunk = append(chunk, newer[skip-len(older):]...)
	}
	return chunk[:n], from, dropped
}
