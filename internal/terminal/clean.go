package terminal

import (
	"bytes"
	"unicode/utf8"
)

// complete returns how many leading bytes of b end neither inside an
// escape sequence nor inside a UTF-8 sequence, so that a page or a
// streamed chunk cut there cleans the same as the whole would.
func complete(b []byte) int {
	n := len(b)
	// An ESC in the last 64 bytes without its final byte yet: cut before
	// it. Longer sequences (OSC titles) are rare enough to clean as text.
	from := max(0, n-64)
	if i := bytes.LastIndexByte(b[from:], 0x1b); i >= 0 {
		i += from
		if end := escapeEnd(b, i); end < 0 {
			return i
		}
	}
	// A rune cut in two: back up to its first byte.
	for k := 1; k <= utf8.UTFMax && k <= n; k++ {
		c := b[n-k]
		if c < utf8.RuneSelf {
			break
		}
		if utf8.RuneStart(c) {
			if !utf8.FullRune(b[n-k:]) {
				return n - k
			}
			break
		}
	}
	return n
}

// escapeEnd returns the index just past the escape sequence starting at
// b[i] (an ESC), or -1 when b ends before the sequence does.
func escapeEnd(b []byte, i int) int {
	if i+1 >= len(b) {
		return -1
	}
	switch b[i+1] {
	case '[': // CSI: parameters and intermediates, then a final byte @..~
		for j := i + 2; j < len(b); j++ {
			if b[j] >= 0x40 && b[j] <= 0x7e {
				return j + 1
			}
		}
		return -1
	case ']', 'P', '_', '^': // OSC, DCS…: up to BEL or ESC \
		for j := i + 2; j < len(b); j++ {
			if b[j] == 0x07 {
				return j + 1
			}
			if b[j] == 0x1b && j+1 < len(b) && b[j+1] == '\\' {
				return j + 2
			}
		}
		return -1
	case '(', ')', '*', '+', '#', '%': // charset selection: one more byte
		if i+2 < len(b) {
			return i + 3
		}
		return -1
	}
	return i + 2
}

// Clean turns raw terminal output into text for the model: escape
// sequences (colours, cursor movement, bracketed-paste toggles, titles)
// and BEL are removed, CR LF becomes LF, and invalid UTF-8 is replaced.
// A lone CR stays: it is how progress bars redraw, and the model can read
// it.
func Clean(b []byte) string {
	var out bytes.Buffer
	out.Grow(len(b))
	for i := 0; i < len(b); i++ {
		switch c := b[i]; c {
		case 0x1b:
			end := escapeEnd(b, i)
			if end < 0 {
				i = len(b)
				continue
			}
			i = end - 1
		case 0x07:
		case '\r':
			if i+1 < len(b) && b[i+1] == '\n' {
				continue
			}
			out.WriteByte(c)
		default:
			out.WriteByte(c)
		}
	}
	return string(bytes.ToValidUTF8(out.Bytes(), []byte("\uFFFD")))
}
