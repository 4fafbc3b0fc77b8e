package jobs

// ring keeps the last cap bytes written to it and counts every byte, so
// that readers address output by absolute offset (bytes since the job
// started) and can tell how much scrolled out before they read it. Not
// safe for concurrent use: the registry guards it with its mutex.
type ring struct {
	cap   int
	buf   []byte // grows up to cap, then is overwritten circularly
	start int    // index in buf of the oldest kept byte once buf is full
	total int64  // bytes ever written
}

func newRing(capacity int) *ring { return &ring{cap: capacity} }

// write records p. Memory grows with the output only up to cap: a job
// that prints little never costs the full buffer.
func (r *ring) write(p []byte) {
	r.total += int64(len(p))
	if len(p) >= r.cap {
		// Only the end of p survives; rebuild the buffer from it.
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

// read returns a copy of the kept bytes from offset since to the end, the
// offset after them, and how many bytes between since and the oldest kept
// byte were dropped. since is clamped to [0, total].
func (r *ring) read(since int64) (chunk []byte, next, dropped int64) {
	since = max(0, min(since, r.total))
	if f := r.first(); since < f {
		dropped, since = f-since, f
	}
	n := int(r.total - since)
	chunk = make([]byte, 0, n)
	// The kept bytes in order are buf[start:] then buf[:start]; the last
	// n of them are wanted.
	skip := len(r.buf) - n
	older, newer := r.buf[r.start:], r.buf[:r.start]
	if skip < len(older) {
		chunk = append(chunk, older[skip:]...)
		chunk = append(chunk, newer...)
	} else {
		chunk = append(chunk, newer[skip-len(older):]...)
	}
	return chunk, r.total, dropped
}
