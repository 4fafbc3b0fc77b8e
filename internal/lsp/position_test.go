package lsp

import (
	"slices"
	"testing"
)

func TestLines(t *testing.T) {
	for in, want := range map[string][]string{
		"":            {""},
		"a":           {"a"},
		"a\n":         {"a", ""},
		"a\r\nb\rc\n": {"a", "b", "c", ""},
	} {
		if got := Lines(in); !slices.Equal(got, want) {
			t.Errorf("Lines(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestColumnsAcrossEncodings(t *testing.T) {
	// é is 2 bytes, 1 UTF-16 unit; 𝔘 is 4 bytes, 2 UTF-16 units (a
	// surrogate pair), 1 code point.
	line := "/* é𝔘 */ X"
	x := len(line) - 1 // byte offset of X
	if x != 13 {
		t.Fatalf("byte offset of X = %d", x)
	}
	for _, c := range []struct {
		enc  string
		col  int
		okay bool
	}{
		{EncodingUTF16, 10, true},
		{EncodingUTF8, 13, true},
		{EncodingUTF32, 9, true},
	} {
		if got := Column(line, x, c.enc); got != c.col {
			t.Errorf("Column(%s) = %d, want %d", c.enc, got, c.col)
		}
		if off, ok := ByteOffset(line, c.col, c.enc); !ok || off != x {
			t.Errorf("ByteOffset(%s, %d) = %d, %v, want %d", c.enc, c.col, off, ok, x)
		}
	}
	if got := Convert(line, 10, EncodingUTF16, EncodingUTF8); got != 13 {
		t.Errorf("Convert utf-16→utf-8 = %d, want 13", got)
	}
	if got := Convert(line, 13, EncodingUTF8, EncodingUTF16); got != 10 {
		t.Errorf("Convert utf-8→utf-16 = %d, want 10", got)
	}
	// Inside the surrogate pair of 𝔘 (units 4 and 5 start at 4): 5 is
	// not a character boundary.
	if _, ok := ByteOffset(line, 5, EncodingUTF16); ok {
		t.Error("a column inside a surrogate pair was accepted")
	}
	if _, ok := ByteOffset(line, 4, EncodingUTF8); ok {
		t.Error("a byte offset inside a UTF-8 sequence was accepted")
	}
	// The end of the line is a valid position; past it is not.
	if off, ok := ByteOffset(line, UTF16Len(line), EncodingUTF16); !ok || off != len(line) {
		t.Errorf("end of line = %d, %v", off, ok)
	}
	if _, ok := ByteOffset(line, UTF16Len(line)+1, EncodingUTF16); ok {
		t.Error("a column past the end was accepted")
	}
	if _, ok := ByteOffset(line, -1, EncodingUTF16); ok {
		t.Error("a negative column was accepted")
	}
}
