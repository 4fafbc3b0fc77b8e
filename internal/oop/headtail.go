package oop

import (
	"fmt"
	"sync"
)

// boundedBuf keeps the first and last bytes written to it (40% head, 60%
// tail of the limit) and counts the rest. Safe for concurrent use.
type boundedBuf struct {
	mu         sync.Mutex
	headCap    int
	tailCap    int
	head, tail []byte
	total      int64
}

func newBoundedBuf(limit int) *boundedBuf {
	h := limit * 2 / 5
	return &boundedBuf{headCap: h, tailCap: limit - h}
}

// Write records p; it never fails.
func (b *boundedBuf) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := len(p)
	b.total += int64(n)
	if room := b.headCap - len(b.head); room > 0 {
		k := min(room, len(p))
		b.head = append(b.head, p[:k]...)
		p = p[k:]
	}
	if len(p) == 0 {
		return n, nil
	}
	b.tail = append(b.tail, p...)
	// Compact at twice the cap: amortised O(1) per byte.
	if len(b.tail) > 2*b.tailCap {
		b.tail = append(b.tail[:0], b.tail[len(b.tail)-b.tailCap:]...)
	}
	return n, nil
}

// Bytes returns the kept bytes with a marker line where bytes were dropped.
func (b *boundedBuf) Bytes() []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	tail := b.tail
	if len(tail) > b.tailCap {
		tail = tail[len(tail)-b.tailCap:]
	}
	out := append([]byte(nil), b.head...)
	if elided := b.total - int64(len(b.head)+len(tail)); elided > 0 {
		out = fmt.Appendf(out, "\n[… %d bytes elided …]\n", elided)
	}
	return append(out, tail...)
}
