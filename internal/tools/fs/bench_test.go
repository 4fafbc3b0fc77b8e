package fs

import (
	"strings"
	"testing"
)

// mediumFile is about 200 kB of source-like text in 5000 lines.
func mediumFile() string {
	var b strings.Builder
	for i := range 5000 {
		b.WriteString("\tresult = append(result, compute(input[")
		b.WriteString(itoa(i))
		b.WriteString("], options)) // keep going\n")
	}
	return b.String()
}

func BenchmarkRead(b *testing.B) {
	h := newHarness(b, Options{})
	h.write(b, "medium.go", mediumFile())
	args := map[string]any{"file_path": "medium.go", "offset": 1000, "limit": 500}
	b.ReportAllocs()
	for b.Loop() {
		if r := h.run(b, NameRead, args); r.IsError {
			b.Fatal(text(r))
		}
	}
}

func BenchmarkEdit(b *testing.B) {
	h := newHarness(b, Options{})
	h.write(b, "medium.go", mediumFile())
	h.mustRun(b, NameRead, map[string]any{"file_path": "medium.go"})
	// Alternate between two strings so that every edit has a match; each
	// edit records the new state, so no re-read is needed.
	flip := []map[string]any{
		{"file_path": "medium.go", "old_string": "input[2500]", "new_string": "input[2500+0]"},
		{"file_path": "medium.go", "old_string": "input[2500+0]", "new_string": "input[2500]"},
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if r := h.run(b, NameEdit, flip[i%2]); r.IsError {
			b.Fatal(text(r))
		}
		i++
	}
}
