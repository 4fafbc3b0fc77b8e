package redact

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
)

// TestWriterMatchesRedact writes a stream holding secrets in several
// forms in random pieces (down to single bytes, so that every secret is
// split somewhere): the output is always exactly Redact of the whole.
func TestWriterMatchesRedact(t *testing.T) {
	multiline := "line one\nline two secret"
	r := New(marker, key, "abcdefgh", multiline)
	var sb strings.Builder
	for i := range 40 {
		sb.WriteString(strings.Repeat("noise ", i%5))
		switch i % 6 {
		case 0:
			sb.WriteString(key)
		case 1:
			sb.WriteString(base64.StdEncoding.EncodeToString([]byte("K=" + key + "\n")))
		case 2:
			sb.WriteString(hex.EncodeToString([]byte(key)) + "\n")
		case 3:
			sb.WriteString(reverse(key))
		case 4:
			sb.WriteString("abcdefg" + "abcdefgh" + "h\n") // overlapping near-misses
		case 5:
			sb.WriteString(multiline)
		}
	}
	stream := sb.String()
	want := r.Redact(stream)
	if strings.Contains(want, key) || !strings.Contains(want, marker) {
		t.Fatalf("Redact itself failed: %q", want)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := range 200 {
		var out bytes.Buffer
		w := NewWriter(&out, r)
		for rest := stream; rest != ""; {
			n := 1 + rng.IntN(min(len(rest), 1+trial%40))
			if m, err := w.Write([]byte(rest[:n])); m != n || err != nil {
				t.Fatalf("Write = %d, %v", m, err)
			}
			rest = rest[n:]
		}
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
		if out.String() != want {
			t.Fatalf("trial %d: chunked output differs from Redact:\n got %q\nwant %q", trial, out.String(), want)
		}
	}
}

// TestWriterPassesLinesOn: with no secret spanning lines, a complete line
// is passed on at once rather than held back.
func TestWriterPassesLinesOn(t *testing.T) {
	var out bytes.Buffer
	w := NewWriter(&out, New(marker, key))
	w.Write([]byte("progress 1\nprogress 2\n"))
	if out.String() != "progress 1\nprogress 2\n" {
		t.Fatalf("held back complete lines: %q", out.String())
	}
	w.Write([]byte("partial " + key[:5]))
	if strings.Contains(out.String(), key[:5]) {
		t.Fatalf("passed on what may start a secret: %q", out.String())
	}
	w.Write([]byte(key[5:] + " done"))
	w.Flush()
	if out.String() != "progress 1\nprogress 2\npartial "+marker+" done" {
		t.Fatalf("output %q", out.String())
	}
	var plain bytes.Buffer
	pw := NewWriter(&plain, New(marker, "x"))
	pw.Write([]byte("no secrets to hold for"))
	if plain.String() != "no secrets to hold for" || pw.Flush() != nil {
		t.Fatalf("a Writer without secrets held output: %q", plain.String())
	}
}

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errors.New("closed") }

func TestWriterError(t *testing.T) {
	w := NewWriter(failWriter{}, New(marker, key))
	if _, err := w.Write([]byte("a line\n")); err == nil {
		t.Fatal("the underlying error was lost")
	}
}
