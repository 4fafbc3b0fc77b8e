package llm

import (
	"bytes"
	"strings"
	"testing"
)

func TestAppendPieces(t *testing.T) {
	var pieces [][]byte
	var want []byte
	var held [][]byte // what earlier bodies saw
	for i, n := range []int{10, PieceSize - 20, 40, 3*PieceSize + 5, 1, PieceSize} {
		p := []byte(strings.Repeat(string(rune('a'+i)), n))
		held = append(held[:0:0], pieces...)
		snapshot := bytes.Clone(bytes.Join(held, nil))
		pieces = AppendPieces(pieces, p)
		want = append(want, p...)
		if got := bytes.Join(pieces, nil); !bytes.Equal(got, want) {
			t.Fatalf("after %d appends: %d bytes, want %d", i+1, len(got), len(want))
		}
		if got := bytes.Join(held, nil); !bytes.Equal(got, snapshot) {
			t.Fatalf("append %d changed what an earlier body holds", i+1)
		}
		total := 0
		for _, pc := range pieces {
			total += cap(pc)
		}
		if total-len(want) >= PieceSize {
			t.Fatalf("after %d appends: %d bytes of capacity for %d", i+1, total, len(want))
		}
	}
}
