package lsp

import (
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// Position encodings a server may choose (LSP 3.17 positionEncoding).
const (
	EncodingUTF16 = "utf-16"
	EncodingUTF8  = "utf-8"
	EncodingUTF32 = "utf-32"
)

// Lines splits text into lines the way LSP counts them: "\n", "\r\n" and
// a lone "\r" each end a line, and the text after the last terminator
// (possibly empty) is the last line. The terminators are not kept.
func Lines(text string) []string {
	var out []string
	start := 0
	for i := 0; i < len(text); i++ {
		switch text[i] {
		case '\n':
			out = append(out, text[start:i])
			start = i + 1
		case '\r':
			out = append(out, text[start:i])
			if i+1 < len(text) && text[i+1] == '\n' {
				i++
			}
			start = i + 1
		}
	}
	return append(out, text[start:])
}

// UTF16Len is the length of s in UTF-16 code units (invalid bytes count as
// U+FFFD, one unit, as editors show them).
func UTF16Len(s string) int {
	n := 0
	for _, r := range s {
		n += utf16.RuneLen(r)
	}
	return n
}

// ByteOffset converts a 0-based column in encoding enc on line to a byte
// offset into line. ok is false when the column is past the end of the
// line or falls inside a character (the middle of a UTF-16 surrogate pair
// or of a UTF-8 sequence).
func ByteOffset(line string, col int, enc string) (int, bool) {
	if col < 0 {
		return 0, false
	}
	if enc == EncodingUTF8 {
		if col > len(line) || (col < len(line) && !utf8.RuneStart(line[col])) {
			return 0, false
		}
		return col, true
	}
	units := 0
	for i, r := range line {
		if units == col {
			return i, true
		}
		if enc == EncodingUTF32 {
			units++
		} else {
			units += utf16.RuneLen(r)
		}
		if units > col {
			return 0, false // inside a surrogate pair
		}
	}
	if units == col {
		return len(line), true
	}
	return 0, false
}

// Column converts a byte offset into line to a 0-based column in encoding
// enc. An offset past the end is clamped to the end; one inside a
// character counts from that character's start.
func Column(line string, off int, enc string) int {
	off = min(max(off, 0), len(line))
	for off > 0 && off < len(line) && !utf8.RuneStart(line[off]) {
		off--
	}
	prefix := line[:off]
	switch enc {
	case EncodingUTF8:
		return len(prefix)
	case EncodingUTF32:
		return utf8.RuneCountInString(prefix)
	}
	return UTF16Len(prefix)
}

// Convert re-expresses a 0-based column on line from encoding from to
// encoding to. A column that does not fit the line is returned unchanged
// (the server knows better than a file that may have changed since).
func Convert(line string, col int, from, to string) int {
	if norm(from) == norm(to) {
		return col
	}
	off, ok := ByteOffset(line, col, norm(from))
	if !ok {
		return col
	}
	return Column(line, off, norm(to))
}

func norm(enc string) string {
	switch strings.ToLower(enc) {
	case EncodingUTF8:
		return EncodingUTF8
	case EncodingUTF32:
		return EncodingUTF32
	}
	return EncodingUTF16
}
