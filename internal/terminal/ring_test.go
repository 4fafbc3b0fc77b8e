package terminal

import (
	"strings"
	"testing"
)

// Offsets stay absolute across wraps; a read from a dropped offset
// starts at the oldest kept byte and says how much was dropped.
func TestRingOffsets(t *testing.T) {
	r := newRing(10)
	r.write([]byte("0123456789"))
	r.write([]byte("abcde"))
	if got, start, dropped := r.read(0, 0); string(got) != "56789abcde" || start != 5 || dropped != 5 {
		t.Fatalf("read(0): %q %d %d", got, start, dropped)
	}
	if got, start, _ := r.read(7, 3); string(got) != "789" || start != 7 {
		t.Fatalf("read(7,3): %q %d", got, start)
	}
	if got, start, _ := r.read(12, 0); string(got) != "cde" || start != 12 {
		t.Fatalf("read(12): %q %d", got, start)
	}
	r.write([]byte(strings.Repeat("x", 25)))
	if got, start, dropped := r.read(14, 0); string(got) != strings.Repeat("x", 10) || start != 30 || dropped != 16 {
		t.Fatalf("after a big write: %q %d %d", got, start, dropped)
	}
}

// Clean removes escape sequences and CRs before LFs; complete never
// cuts a sequence.
func TestClean(t *testing.T) {
	if got := Clean([]byte("\x1b[?2004h>>> \x1b[1;32mok\x1b[0m\r\n\x1b]0;title\x07done\a")); got != ">>> ok\ndone" {
		t.Fatalf("Clean: %q", got)
	}
	for _, c := range []struct {
		in   string
		want int
	}{{"abc\x1b[1;3", 3}, {"abc\x1b", 3}, {"ab\xe2\x82", 2}, {"ab\xe2\x82\xac", 5}, {"a\x1b[0mb", 6}} {
		if got := complete([]byte(c.in)); got != c.want {
			t.Errorf("complete(%q) = %d, want %d", c.in, got, c.want)
		}
	}
}
