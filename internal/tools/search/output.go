package search

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
)

// This file turns backend results into the model-facing text of grep's
// three output modes.

func filesOutput(ctx context.Context, be backend, q *query, a grepArgs, meta *grepMeta) (string, error) {
	paths, err := be.files(ctx, q)
	if err != nil {
		return "", err
	}
	top := &newest{limit: a.limit}
	for _, p := range paths {
		var mtime int64
		if info, err := os.Lstat(p); err == nil {
			mtime = info.ModTime().UnixNano()
		}
		top.add(pathTime{p, mtime})
	}
	files := top.sorted()
	meta.Files, meta.Shown = len(paths), len(files)
	if len(files) == 0 {
		return "No matches found", nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Found %d %s\n", len(paths), plural(len(paths), "file", "files"))
	for _, p := range files {
		b.WriteString(p.path + "\n")
	}
	if more := len(paths) - len(files); more > 0 {
		fmt.Fprintf(&b, "\n[%d more not shown: listed the %d most recently modified; narrow the search or raise head_limit]\n", more, len(files))
	}
	return strings.TrimRight(b.String(), "\n"), nil
}

func sortedCounts(ctx context.Context, be backend, q *query, meta *grepMeta) ([]fileCount, int, error) {
	counts, err := be.counts(ctx, q)
	if err != nil {
		return nil, 0, err
	}
	slices.SortFunc(counts, func(x, y fileCount) int { return comparePaths(x.path, y.path) })
	total := 0
	for _, c := range counts {
		total += c.count
	}
	meta.Files, meta.Lines = len(counts), total
	return counts, total, nil
}

func countOutput(ctx context.Context, be backend, q *query, a grepArgs, meta *grepMeta) (string, error) {
	counts, total, err := sortedCounts(ctx, be, q, meta)
	if err != nil {
		return "", err
	}
	if len(counts) == 0 {
		return "No matches found", nil
	}
	shown := counts[:min(len(counts), a.limit)]
	meta.Shown = len(shown)
	var b strings.Builder
	for _, c := range shown {
		fmt.Fprintf(&b, "%s:%d\n", c.path, c.count)
	}
	fmt.Fprintf(&b, "\nFound %d matching %s in %d %s\n", total, plural(total, "line", "lines"), len(counts), plural(len(counts), "file", "files"))
	if more := len(counts) - len(shown); more > 0 {
		fmt.Fprintf(&b, "[%d more not shown; narrow the search or raise head_limit]\n", more)
	}
	return strings.TrimRight(b.String(), "\n"), nil
}

// contentOutput counts first and then reads lines from only as many files,
// in path order, as the limit needs: output stays bounded however many
// files match, and the total is still exact.
func contentOutput(ctx context.Context, be backend, q *query, a grepArgs, o Options, meta *grepMeta) (string, error) {
	counts, total, err := sortedCounts(ctx, be, q, meta)
	if err != nil {
		return "", err
	}
	if len(counts) == 0 {
		return "No matches found", nil
	}
	var sel []string
	for need := a.limit; need > 0 && len(sel) < len(counts); {
		c := counts[len(sel)]
		sel = append(sel, c.path)
		need -= c.count
	}
	got, err := be.lines(ctx, q, sel, a.limit)
	if err != nil {
		return "", err
	}
	byPath := make(map[string][]outLine, len(got))
	for _, fl := range got {
		byPath[fl.path] = fl.lines
	}
	r := contentRenderer{limit: a.limit, after: a.after, nums: a.lineNums, width: o.MaxLineLength, maxBytes: o.MaxOutputBytes}
	for _, p := range sel {
		if r.render(p, byPath[p]) {
			break
		}
	}
	meta.Shown = r.shown
	if r.files == 0 {
		return "No matches found", nil // every file changed between the two passes
	}
	switch more := total - r.shown; {
	case r.cut:
		fmt.Fprintf(&r.b, "\n\n[output cut at %s: showed %d of %d matching lines, from %d of %d files; narrow the search or ask for less context]",
			humanSize(int64(o.MaxOutputBytes)), r.shown, total, r.files, len(counts))
	case more > 0:
		fmt.Fprintf(&r.b, "\n\n[%d more not shown: showed %d of %d matching lines, from %d of %d files; narrow the search or raise head_limit]",
			more, r.shown, total, r.files, len(counts))
	}
	return r.b.String(), nil
}

// contentRenderer writes content output in rg's heading style and stops at
// the limit of lines on which a match starts, or when the text reaches
// maxBytes (a multiline match can span a whole file).
type contentRenderer struct {
	b        strings.Builder
	limit    int
	after    int
	nums     bool
	width    int
	maxBytes int
	shown    int // lines on which a match starts, shown so far
	files    int
	doneAt   int // after the limit: line number the trailing context runs to
	done     bool
	inTail   bool // showing the trailing context after the limit
	cut      bool // stopped at maxBytes
}

// render writes one file's lines and reports whether the limit is reached.
func (r *contentRenderer) render(path string, lines []outLine) bool {
	if len(lines) == 0 {
		return false
	}
	if r.files > 0 {
		r.b.WriteString("\n\n")
	}
	r.files++
	r.b.WriteString(path)
	prev := -1
	for _, ln := range lines {
		if r.b.Len() >= r.maxBytes {
			r.cut, r.done = true, true
			break
		}
		if r.done {
			// Past the limit only the rest of the last match and its
			// trailing context are shown, the context as context even
			// where it matches: rg's --max-count output looks the same.
			if ln.num != prev+1 {
				break
			}
			if ln.match && !ln.start && !r.inTail {
				r.doneAt = ln.num + r.after // a multiline match continues
			} else if ln.num > r.doneAt {
				break
			} else {
				r.inTail = true
				ln.match, ln.start = false, false
			}
		}
		if prev >= 0 && ln.num != prev+1 {
			r.b.WriteString("\n--")
		}
		prev = ln.num
		r.b.WriteByte('\n')
		if r.nums {
			sep := "-"
			if ln.match {
				sep = ":"
			}
			r.b.WriteString(strconv.Itoa(ln.num) + sep)
		}
		r.b.WriteString(clipLine(ln.text, ln.col, r.width))
		if ln.start && !r.done {
			r.shown++
			if r.shown == r.limit {
				r.done = true
				r.doneAt = ln.num + r.after
			}
		}
	}
	return r.done
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// humanSize formats a byte count as the largest whole binary unit ("10
// MiB"), or as decimal kilobytes when it is a round number of them ("100
// kB").
func humanSize(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	case n >= 1000 && n%1000 == 0:
		return fmt.Sprintf("%d kB", n/1000)
	}
	return fmt.Sprintf("%d bytes", n)
}
