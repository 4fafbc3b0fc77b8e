package jobs

import (
	"strings"
	"testing"
)

func TestRing(t *testing.T) {
	type read struct {
		since         int64
		chunk         string
		dropped, next int64
	}
	tests := []struct {
		name   string
		cap    int
		writes []string
		reads  []read
	}{
		{"empty", 4, nil, []read{{0, "", 0, 0}, {3, "", 0, 0}}},
		{"under capacity", 8, []string{"ab", "cd"}, []read{{0, "abcd", 0, 4}, {2, "cd", 0, 4}, {4, "", 0, 4}, {-3, "abcd", 0, 4}}},
		{"exactly full", 4, []string{"abcd"}, []read{{0, "abcd", 0, 4}, {1, "bcd", 0, 4}}},
		{"wraps", 4, []string{"abc", "def"}, []read{{0, "cdef", 2, 6}, {3, "def", 0, 6}, {5, "f", 0, 6}, {9, "", 0, 6}}},
		{"wraps twice in small writes", 3, []string{"a", "b", "c", "d", "e", "f", "g"}, []read{{0, "efg", 4, 7}, {5, "fg", 0, 7}}},
		{"write larger than capacity", 4, []string{"ab", "0123456789"}, []read{{0, "6789", 8, 12}, {10, "89", 0, 12}}},
		{"write after a large one", 4, []string{"0123456789", "xy"}, []read{{0, "89xy", 8, 12}, {9, "9xy", 0, 12}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRing(tt.cap)
			for _, w := range tt.writes {
				r.write([]byte(w))
			}
			if r.total != int64(len(strings.Join(tt.writes, ""))) || len(r.buf) > tt.cap {
				t.Fatalf("total %d, buffer %d bytes", r.total, len(r.buf))
			}
			for _, rd := range tt.reads {
				chunk, next, dropped := r.read(rd.since)
				if string(chunk) != rd.chunk || next != rd.next || dropped != rd.dropped {
					t.Errorf("read(%d) = %q next %d dropped %d; want %q %d %d", rd.since, chunk, next, dropped, rd.chunk, rd.next, rd.dropped)
				}
			}
		})
	}
}

// TestRingMatchesNaive compares the ring with keeping everything and
// slicing, over many write-size patterns.
func TestRingMatchesNaive(t *testing.T) {
	for capacity := 1; capacity <= 7; capacity++ {
		for step := 1; step <= 9; step++ {
			r := newRing(capacity)
			var all []byte
			for i := 0; i < 40; i += step {
				p := []byte(strings.Repeat(string(rune('a'+i%26)), step))
				r.write(p)
				all = append(all, p...)
				for since := int64(0); since <= int64(len(all)); since++ {
					chunk, _, dropped := r.read(since)
					from := max(since, int64(len(all)-capacity))
					if string(chunk) != string(all[from:]) || dropped != from-since {
						t.Fatalf("cap %d step %d since %d: %q dropped %d, want %q dropped %d", capacity, step, since, chunk, dropped, all[from:], from-since)
					}
				}
			}
		}
	}
}
