package fs

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// splitLines splits like starts.text does: no empty line after a final
// newline.
func splitLines(s string) []string {
	st := lineStarts(s)
	out := make([]string, st.count(s))
	for i := range out {
		out[i] = st.text(s, i)
	}
	return out
}

// TestChangesProperty checks on random texts that the changes of a
// replacement are a correct line diff: rebuilding After from Before's
// lines outside the changes and After's lines inside them gives After.
func TestChangesProperty(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	alphabet := []string{"a", "b", "\n", "ab", "\n\n", "x"}
	gen := func(n int) string {
		var b strings.Builder
		for range n {
			b.WriteString(alphabet[rng.IntN(len(alphabet))])
		}
		return b.String()
	}
	for i := range 5000 {
		text, old, repl := gen(rng.IntN(12)), gen(1+rng.IntN(3)), gen(rng.IntN(3))
		offs := FindAll(text, old)
		if len(offs) == 0 {
			continue
		}
		r := NewReplacement(text, old, repl, offs)
		if want := strings.ReplaceAll(text, old, repl); r.After != want {
			t.Fatalf("%d: After %q; want %q", i, r.After, want)
		}
		before, after := splitLines(r.Before), splitLines(r.After)
		var got []string
		at := 0
		for _, c := range r.Changes {
			if c.OldStart < at || c.OldEnd < c.OldStart || c.NewEnd < c.NewStart {
				t.Fatalf("%d: bad change %+v in %+v", i, c, r.Changes)
			}
			got = append(got, before[at:c.OldStart]...)
			got = append(got, after[c.NewStart:c.NewEnd]...)
			at = c.OldEnd
		}
		got = append(got, before[at:]...)
		if !slices.Equal(got, after) {
			t.Fatalf("%d: text %q old %q new %q: changes %+v rebuild %q; want %q", i, text, old, repl, r.Changes, got, after)
		}
	}
}

func TestDiff(t *testing.T) {
	text := linesFile(30)
	tests := []struct {
		name     string
		old, new string
		want     string
	}{
		{"two hunks", "line 3\n", "third\n",
			"@@ -1,6 +1,6 @@\n line 1\n line 2\n-line 3\n+third\n line 4\n line 5\n line 6\n"},
		{"last line", "line 30\n", "",
			"@@ -27,4 +27,3 @@\n line 27\n line 28\n line 29\n-line 30\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := NewReplacement(text, tt.old, tt.new, FindAll(text, tt.old))
			if got := strings.TrimPrefix(r.Diff("f"), "--- f\n+++ f\n"); got != tt.want {
				t.Fatalf("got\n%s\nwant\n%s", got, tt.want)
			}
		})
	}
	t.Run("separate and merged hunks", func(t *testing.T) {
		// Lines 10, 20 and 30 are too far apart to share context.
		r := NewReplacement(text, "0\n", "0!\n", FindAll(text, "0\n"))
		if got := r.Diff("f"); strings.Count(got, "@@ -") != 3 {
			t.Fatalf("want 3 hunks:\n%s", got)
		}
		// Changes on lines 2 and 5 share their context: one hunk.
		small := "a\nX\nb\nc\nX\nd\ne\nf\ng\nh\n"
		r = NewReplacement(small, "X", "Y", FindAll(small, "X"))
		want := "@@ -1,8 +1,8 @@\n a\n-X\n+Y\n b\n c\n-X\n+Y\n d\n e\n f\n"
		if got := strings.TrimPrefix(r.Diff("f"), "--- f\n+++ f\n"); got != want {
			t.Fatalf("got\n%s\nwant\n%s", got, want)
		}
	})
	t.Run("bounded", func(t *testing.T) {
		big := strings.Repeat("x\n", 5000)
		r := NewReplacement(big, "x", "y", FindAll(big, "x"))
		d := r.Diff("f")
		if strings.Count(d, "\n") > maxDiffLines+2 || len(d) > maxDiffBytes+100 || !strings.HasSuffix(d, "[… diff truncated]\n") {
			t.Fatalf("diff not bounded: %d lines, %d bytes", strings.Count(d, "\n"), len(d))
		}
	})
}

func TestAdaptLineEndings(t *testing.T) {
	tests := []struct{ text, s, want string }{
		{"a\r\nb\r\n", "x\ny", "x\r\ny"},
		{"a\r\nb\r\n", "x\r\ny\n", "x\r\ny\r\n"},
		{"a\r\nb\r\n", "single", "single"},
		{"a\nb\n", "x\ny", "x\ny"},
		{"a\nb\nc\r\n", "x\ny", "x\ny"}, // mostly LF
	}
	for _, tt := range tests {
		if got := AdaptLineEndings(tt.text, tt.s); got != tt.want {
			t.Errorf("AdaptLineEndings(%q, %q) = %q; want %q", tt.text, tt.s, got, tt.want)
		}
	}
}

func TestSnippet(t *testing.T) {
	text := linesFile(100)
	got := Snippet(text, 50, 50, 2, 3)
	want := numbered(48, "line 48", "line 49", "line 50") + "[… 2 more lines]\n"
	if got != want {
		t.Fatalf("got %q; want %q", got, want)
	}
	if got := Snippet("only\n", 1, 1, 5, 10); got != "     1\tonly\n" {
		t.Fatalf("got %q", got)
	}
}

func TestNumberLines(t *testing.T) {
	if got := NumberLines("a\r\nb\n\nc", 9); got != numbered(9, "a", "b", "", "c") {
		t.Fatalf("got %q", got)
	}
	if got := NumberLines("", 1); got != "" {
		t.Fatalf("got %q", got)
	}
}
