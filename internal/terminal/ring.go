package terminal

// ring keeps the last cap bytes of a terminal's output and counts every
// byte, so that reads address output by absolute offset (bytes since the
// terminal opened) and page correctly after the buffer wrapped. Not safe
// for concurrent use: the Terminal guards it with its mutex.
type ring struct {
	cap   int
	buf   []byte // grows up to cap, then is overwritten circularly
	start int    // index in buf of the oldest kept byte once buf is full
	total int64  // bytes ever written
}

func newRing(capacity int) *ring { return &ring{cap: capacity} }

// write records p; memory grows with the output only up to cap.
func (r *ring) write(p []byte) {
	r.total += int64(len(p))
	if len(p) >= r.cap {
		r.buf = append(r.buf[:0], p[len(p)-r.cap:]...)
		r.start = 0
		return
	}
	if room := r.cap - len(r.buf); room > 0 {
		k := min(room, len(p))
		r.buf = append(r.buf, p[:k]...)
		p = p[k:]
	}
	for len(p) > 0 {
		n := copy(r.buf[r.start:], p)
		p = p[n:]
		r.start = (r.start + n) % r.cap
	}
}

// first is the offset of the oldest byte still kept.
func (r *ring) first() int64 { return r.total - int64(len(r.buf)) }

// read returns a copy of at most count kept bytes from offset from, the
// offset the copy starts at (from, or the oldest kept byte when from
// scrolled out) and how many bytes between from and that start were
// dropped. from is clamped to [0, total]; count <= 0 means to the end.
func (r *ring) read(from int64, count int) (chunk []byte, start, dropped int64) {
	from = max(0, min(from, r.total))
	if f := r.first(); from < f {
		dropped, from = f-from, f
	}
	n := int(r.total - from)
	if count > 0 && count < n {
		n = count
	}
	chunk = make([]byte, 0, n)
	// The kept bytes in order are buf[start:] then buf[:start]; skip the
	// ones before from.
	skip := int(from - r.first())
	older, newer := r.buf[r.start:], r.buf[:r.start]
	if skip < len(older) {
		chunk = append(chunk, older[skip:]...)
		chunk = append(chunk, newer...)
	} else {
		chunk = append(chunk, newer[skip-len(older):]...)
	}
	return chunk[:n], from, dropped
}
