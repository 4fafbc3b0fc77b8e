package terminal

import "testing"

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
