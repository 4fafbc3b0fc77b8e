package proc

import (
	"bytes"
	"fmt"
	"sync"
	"unicode/utf8"
)

// headFraction of the output limit is kept from the start of the output,
// the rest from the end: the start shows what the command was doing, the
// end (errors, summaries, the last test failures) is usually what matters
// most.
const headFraction = 0.4

// headTail keeps the first headCap and the last tailCap bytes written to
// it, counting everything. Safe for concurrent use: a Process's stderr is
// read while its copier still writes.
type headTail struct {
	mu               sync.Mutex
	headCap, tailCap int
	head, tail       []byte
	total            int64
}

func newHeadTail(limit int) *headTail {
	h := int(float64(limit) * headFraction)
	return &headTail{headCap: h, tailCap: limit - h}
}

// Write records p; it never fails.
func (b *headTail) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := len(p)
	b.total += int64(n)
	if room := b.headCap - len(b.head); room > 0 {
		k := min(room, len(p))
		b.head = append(b.head, p[:k]...)
		p = p[k:]
	}
	// The tail buffer keeps one byte more than is shown, so that cut can
	// tell whether the shown tail already starts at a line boundary.
	keep := b.tailCap + 1
	if len(p) == 0 {
		return n, nil
	}
	if len(p) >= keep {
		b.tail = append(b.tail[:0], p[len(p)-keep:]...)
		return n, nil
	}
	if b.tail == nil {
		// Output past the head: size the tail once for what it can hold
		// before a compaction (under 3×keep), instead of growing it by
		// doubling (a command printing megabytes in small writes).
		b.tail = make([]byte, 0, 3*keep)
	}
	b.tail = append(b.tail, p...)
	// Compact only when twice the size is used: amortised O(1) per byte
	// without a ring buffer's index juggling.
	if len(b.tail) > 2*keep {
		b.tail = append(b.tail[:0], b.tail[len(b.tail)-keep:]...)
	}
	return n, nil
}

// keptTail is the tail actually shown (the last tailCap bytes) and the
// byte just before it (0 if none was written).
func (b *headTail) keptTail() (tail []byte, prev byte) {
	if len(b.tail) > b.tailCap {
		i := len(b.tail) - b.tailCap
		return b.tail[i:], b.tail[i-1]
	}
	return b.tail, 0
}

// cut returns the head and tail to show. When bytes were dropped, both are
// trimmed to a line boundary if one is in their inner half (so the model
// does not see half a line at the seam) and otherwise to a UTF-8
// boundary.
func (b *headTail) cut() (head, tail []byte) {
	head, tail, prev := b.head, nil, byte(0)
	tail, prev = b.keptTail()
	if b.total == int64(len(head)+len(tail)) {
		return head, tail
	}
	if i := bytes.LastIndexByte(head, '\n'); i >= 0 && i >= len(head)/2 {
		head = head[:i+1]
	} else {
		head = head[:runeCut(head, len(head))]
	}
	if prev == '\n' {
		return head, tail
	}
	if i := bytes.IndexByte(tail, '\n'); i >= 0 && i < len(tail)/2 {
		tail = tail[i+1:]
	} else {
		j := 0
		for j < len(tail) && j < utf8.UTFMax && !utf8.RuneStart(tail[j]) {
			j++
		}
		tail = tail[j:]
	}
	return head, tail
}

// runeCut moves n back so that s[:n] does not end inside a UTF-8
// sequence.
func runeCut(s []byte, n int) int {
	for i := n - 1; i >= 0 && i >= n-utf8.UTFMax; i-- {
		if utf8.RuneStart(s[i]) {
			if !utf8.FullRune(s[i:n]) {
				return i
			}
			return n
		}
	}
	return n
}

// counts returns the number of bytes written and of bytes dropped from
// the middle.
func (b *headTail) counts() (total, elided int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	head, tail := b.cut()
	return b.total, b.total - int64(len(head)+len(tail))
}

// Bytes returns the kept output, with a marker line where bytes were
// dropped.
func (b *headTail) Bytes() []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	head, tail := b.cut()
	elided := b.total - int64(len(head)+len(tail))
	if elided == 0 {
		return append(append([]byte(nil), head...), tail...)
	}
	out := make([]byte, 0, len(head)+len(tail)+48)
	out = append(out, head...)
	if len(head) > 0 && head[len(head)-1] != '\n' {
		out = append(out, '\n')
	}
	out = fmt.Appendf(out, "[… %d bytes elided …]\n", elided)
	return append(out, tail...)
}
