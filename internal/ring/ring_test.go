package ring

import (
	"strings"
	"testing"
)

func TestBuffer(t *testing.T) {
	type read struct {
		from        int64
		count       int
		chunk       string
		start, drop int64
	}
	tests := []struct {
		name   string
		cap    int
		writes []string
		reads  []read
	}{
		{"empty", 4, nil, []read{{0, 0, "", 0, 0}, {3, 0, "", 0, 0}, {-1, 5, "", 0, 0}}},
		{"zero capacity counts", 0, []string{"ab", "c"}, []read{{0, 0, "", 3, 3}, {3, 0, "", 3, 0}}},
		{"negative capacity", -2, []string{"ab"}, []read{{0, 0, "", 2, 2}}},
		{"under capacity", 8, []string{"ab", "cd"}, []read{{0, 0, "abcd", 0, 0}, {2, 0, "cd", 2, 0}, {4, 0, "", 4, 0}, {-3, 0, "abcd", 0, 0}, {9, 0, "", 4, 0}}},
		{"exactly full", 4, []string{"abcd"}, []read{{0, 0, "abcd", 0, 0}, {1, 0, "bcd", 1, 0}}},
		{"wraps", 4, []string{"abc", "def"}, []read{{0, 0, "cdef", 2, 2}, {3, 0, "def", 3, 0}, {5, 0, "f", 5, 0}, {9, 0, "", 6, 0}}},
		{"wraps twice in small writes", 3, []string{"a", "b", "c", "d", "e", "f", "g"}, []read{{0, 0, "efg", 4, 4}, {5, 0, "fg", 5, 0}}},
		{"write larger than capacity", 4, []string{"ab", "0123456789"}, []read{{0, 0, "6789", 8, 8}, {10, 0, "89", 10, 0}}},
		{"write after a large one", 4, []string{"0123456789", "xy"}, []read{{0, 0, "89xy", 8, 8}, {9, 0, "9xy", 9, 0}}},
		{"pages", 10, []string{"0123456789", "abcde"}, []read{{0, 0, "56789abcde", 5, 5}, {7, 3, "789", 7, 0}, {12, 0, "cde", 12, 0}, {0, 2, "56", 5, 5}, {13, 9, "de", 13, 0}, {8, -1, "89abcde", 8, 0}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := New(tt.cap)
			for _, w := range tt.writes {
				if n, err := r.Write([]byte(w)); n != len(w) || err != nil {
					t.Fatalf("Write(%q) = %d, %v", w, n, err)
				}
			}
			if r.Total() != int64(len(strings.Join(tt.writes, ""))) || len(r.buf) > max(0, tt.cap) {
				t.Fatalf("total %d, buffer %d bytes", r.Total(), len(r.buf))
			}
			for _, rd := range tt.reads {
				chunk, start, dropped := r.Read(rd.from, rd.count)
				if string(chunk) != rd.chunk || start != rd.start || dropped != rd.drop {
					t.Errorf("Read(%d, %d) = %q start %d dropped %d; want %q %d %d", rd.from, rd.count, chunk, start, dropped, rd.chunk, rd.start, rd.drop)
				}
			}
		})
	}
}

// After a write far past the capacity, offsets stay absolute and First
// says how much scrolled out.
func TestBufferBigWrite(t *testing.T) {
	r := New(10)
	r.Write([]byte("0123456789abcde"))
	r.Write([]byte(strings.Repeat("x", 25)))
	if r.First() != 30 || r.Total() != 40 {
		t.Fatalf("First %d Total %d", r.First(), r.Total())
	}
	if got, start, dropped := r.Read(14, 0); string(got) != strings.Repeat("x", 10) || start != 30 || dropped != 16 {
		t.Fatalf("Read(14): %q %d %d", got, start, dropped)
	}
}

// The chunk is a copy: later writes do not change what a reader holds.
func TestBufferReadCopies(t *testing.T) {
	r := New(4)
	r.Write([]byte("abcd"))
	got, _, _ := r.Read(0, 0)
	r.Write([]byte("wxyz"))
	if string(got) != "abcd" {
		t.Fatalf("chunk changed to %q", got)
	}
}

// TestBufferMatchesNaive compares the buffer with keeping everything and
// slicing, over many capacities, write sizes, offsets and counts.
func TestBufferMatchesNaive(t *testing.T) {
	for capacity := 1; capacity <= 7; capacity++ {
		for step := 1; step <= 9; step++ {
			r := New(capacity)
			var all []byte
			for i := 0; i < 40; i += step {
				p := []byte(strings.Repeat(string(rune('a'+i%26)), step))
				r.Write(p)
				all = append(all, p...)
				for from := int64(0); from <= int64(len(all)); from++ {
					for count := 0; count <= capacity+1; count++ {
						chunk, start, dropped := r.Read(from, count)
						first := max(from, int64(len(all)-capacity))
						want := all[first:]
						if count > 0 && count < len(want) {
							want = want[:count]
						}
						if string(chunk) != string(want) || start != first || dropped != first-from {
							t.Fatalf("cap %d step %d Read(%d, %d): %q start %d dropped %d, want %q %d %d", capacity, step, from, count, chunk, start, dropped, want, first, first-from)
						}
					}
				}
			}
		}
	}
}
