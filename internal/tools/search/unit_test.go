package search

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/dsh-dev/dsh/internal/tool"
)

func TestParseRgOutput(t *testing.T) {
	q := &query{root: "/r"}
	marker := fmt.Sprintf("\n[… %d%s\n", 123, elisionMark)

	files := parseFileList(q, []byte("/r/a.go\x00stray text\n/r/b/c.go\x00/other/x\x00/r/cut"+marker+"ted\x00/r/name\nwith newline\x00"))
	if want := []string{"/r/a.go", "/r/b/c.go", "/r/name\nwith newline"}; !slices.Equal(files, want) {
		t.Errorf("file list %q, want %q", files, want)
	}

	counts := parseCounts(q, []byte("/r/a.go\x003\nrg: some warning\n/r/b.go\x0012\n/r/bad\x00x\n/r/zero\x000\n"+marker+"/r/c.go\x001"))
	if want := []fileCount{{"/r/a.go", 3}, {"/r/b.go", 12}, {"/r/c.go", 1}}; !slices.Equal(counts, want) {
		t.Errorf("counts %v, want %v", counts, want)
	}

	single := &query{root: "/r/f.txt", isFile: true}
	if got := parseCounts(single, []byte("/r/f.txt\x002\n")); len(got) != 1 || got[0].count != 2 {
		t.Errorf("single file counts %v", got)
	}

	msg := func(typ, path, text string, line int, starts ...int) string {
		m := map[string]any{"type": typ, "data": map[string]any{
			"path": map[string]any{"text": path}, "lines": map[string]any{"text": text}, "line_number": line,
			"submatches": []map[string]int{},
		}}
		var subs []map[string]int
		for _, s := range starts {
			subs = append(subs, map[string]int{"start": s, "end": s + 1})
		}
		if subs != nil {
			m["data"].(map[string]any)["submatches"] = subs
		}
		b, _ := json.Marshal(m)
		return string(b)
	}
	out := strings.Join([]string{
		`{"type":"begin","data":{"path":{"text":"/r/a"}}}`,
		msg("context", "/r/a", "before\n", 1),
		msg("match", "/r/a", "hit here\r\n", 2, 4),
		`{"type":"match","data":{"path":{"text":"/r/b"},"lines":{"bytes":"Y2Fm6SBoaXQK"},"line_number":7,"submatches":[{"start":5}]}}`,
		msg("match", "/r/c", "one\ntwo\nthree\n", 3, 1, 8),
		msg("match", "/r/d", "no submatches\n", 5),
		`{"type":"match","data":{"path":{"text":"/r/a"},"lines":{"text":"trunc`,
		"not json",
		marker,
	}, "\n")
	got := parseJSON([]byte(out))
	want := []fileLines{
		{"/r/a", []outLine{{num: 1, text: "before", col: -1}, {num: 2, text: "hit here", match: true, start: true, col: 4}}},
		{"/r/b", []outLine{{num: 7, text: "caf\xe9 hit", match: true, start: true, col: 5}}},
		{"/r/c", []outLine{
			{num: 3, text: "one", match: true, start: true, col: 1},
			{num: 4, text: "two", match: true, col: -1},
			{num: 5, text: "three", match: true, start: true, col: 0},
		}},
		{"/r/d", []outLine{{num: 5, text: "no submatches", match: true, start: true, col: -1}}},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("parseJSON\n got %+v\nwant %+v", got, want)
	}
}

// TestGrepRgMissing checks that a configured rg that cannot be started
// falls back to the Go search.
func TestGrepRgMissing(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, grepTree)
	h := newHarness(t, dir, NewGrep(Options{Ripgrep: filepath.Join(dir, "no-such-rg")}))
	r := h.call(t.Context(), t, GrepName, map[string]any{"pattern": "world"})
	var m grepMeta
	_ = json.Unmarshal(r.Meta, &m)
	if r.IsError || h.text(r) != "Found 1 file\n$ROOT/a.go" || m.Backend != "go" {
		t.Errorf("got %q, meta %s", h.text(r), r.Meta)
	}
}

func TestClipLine(t *testing.T) {
	tests := []struct {
		s     string
		col   int
		limit int
		want  string
	}{
		{"short", 0, 10, "short"},
		{"bad \xff byte", -1, 20, "bad \uFFFD byte"},
		{"abcdefghij", -1, 4, "abcd… [6 characters clipped]"},
		{"abcdefghij", 0, 4, "abcd… [6 characters clipped]"},
		// The window starts a fifth of the width before the match.
		{"0123456789abcdefghijKLMNOPQRSTUVWXYZ", 20, 10, "…ijKLMNOPQR… [26 characters clipped]"},
		// Near the end, the window is moved back to stay full.
		{"0123456789abcdefghij", 19, 10, "…abcdefghij [10 characters clipped]"},
		// Characters, not bytes.
		{"ééééé", -1, 2, "éé… [3 characters clipped]"},
	}
	for _, tc := range tests {
		if got := clipLine(tc.s, tc.col, tc.limit); got != tc.want {
			t.Errorf("clipLine(%q, %d, %d) = %q, want %q", tc.s, tc.col, tc.limit, got, tc.want)
		}
	}
}

func TestComparePaths(t *testing.T) {
	in := []string{"a.txt", "b", "a/z", "a-b", "a", "a/b/c", "A"}
	slices.SortFunc(in, comparePaths)
	want := []string{"A", "a", "a/b/c", "a/z", "a-b", "a.txt", "b"}
	if !slices.Equal(in, want) {
		t.Errorf("sorted %q, want %q", in, want)
	}
}

func TestMatchStarts(t *testing.T) {
	tests := []struct {
		pattern, text string
		multiline     bool
		want          string // "line:col" of each start
	}{
		{"b", "abc\nxbx\n", false, "0:1 4:1"},
		{"x*", "ab\ncd", false, "0:0 3:0"},
		{"x*", "ab\n", false, "0:0"},
		{"x*", "", false, ""},
		{`c\s+x`, "abc\nxbc x\n", false, "4:2"},
		{`\Ax`, "xa\nxb\nay\n", false, "0:0 3:0"},
		{`y\z`, "ay\nby", false, "0:1 3:1"},
		{"$", "a\n\nb", false, "0:1 2:0 3:1"},
		{`c\nx`, "abc\nxbc\nx", true, "0:2 4:2"},
		{`a.*?b`, "a\n\nb a b\n", true, "0:0 3:2"},
	}
	for _, tc := range tests {
		flags := "(?m)"
		if tc.multiline {
			flags = "(?ms)"
		}
		f := fields{tool.Fields{Tool: "grep"}}
		re, perLine, err := compilePattern(f, grepArgs{pattern: tc.pattern, multiln: tc.multiline})
		if err != nil {
			t.Fatalf("%s%s: %v", flags, tc.pattern, err)
		}
		q := &query{re: re, perLine: perLine, multiline: tc.multiline}
		var got []string
		matchStarts(q, []byte(tc.text), func(ls, le, col int) bool {
			got = append(got, fmt.Sprintf("%d:%d", ls, col))
			return true
		})
		if s := strings.Join(got, " "); s != tc.want {
			t.Errorf("%q in %q (multiline %v): %q, want %q", tc.pattern, tc.text, tc.multiline, s, tc.want)
		}
	}
}
