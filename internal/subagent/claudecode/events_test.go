package claudecode

import (
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

func TestReadLines(t *testing.T) {
	in := "one\n" + strings.Repeat("x", 40) + "\n\ntwo\n" + strings.Repeat("y", 11) + "\nlast"
	var lines []string
	var over []int
	// A one-byte reader splits lines across reads and a 10-byte limit
	// exercises skipping.
	err := readLines(iotest.OneByteReader(strings.NewReader(in)), 10, func(b []byte) { lines = append(lines, string(b)) }, func(n int) { over = append(over, n) })
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(lines, "|"); got != "one||two|last" {
		t.Errorf("lines %q", got)
	}
	if len(over) != 2 || over[0] != 41 || over[1] != 12 {
		t.Errorf("oversize %v", over)
	}
}

func TestReadLinesError(t *testing.T) {
	boom := errors.New("boom")
	var lines []string
	err := readLines(io.MultiReader(strings.NewReader("a\nb"), iotest.ErrReader(boom)), 100, func(b []byte) { lines = append(lines, string(b)) }, func(int) {})
	if !errors.Is(err, boom) || strings.Join(lines, "|") != "a|b" {
		t.Fatalf("err %v lines %q", err, lines)
	}
}

func TestSummarize(t *testing.T) {
	for in, want := range map[string]string{
		`{"command":"go test\n  ./..."}`:           "go test ./...",
		`{"file_path":"/a/b.go","old_string":"x"}`: "/a/b.go",
		`{"todos":[1]}`:                            `{"todos":[1]}`,
		`{}`:                                       "",
		`not json`:                                 "",
	} {
		if got := summarize(json.RawMessage(in)); got != want {
			t.Errorf("summarize(%s) = %q, want %q", in, got, want)
		}
	}
	if got := clip("héllo", 4); got != "h…" {
		t.Errorf("clip = %q", got)
	}
	if got := oneLine(" a\n\tb  c ", 100); got != "a b c" {
		t.Errorf("oneLine = %q", got)
	}
}
