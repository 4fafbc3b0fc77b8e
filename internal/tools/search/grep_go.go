package search

import (
	"bytes"
	"context"
	"io"
	"runtime"
	"slices"
	"sort"
	"sync"
	"sync/atomic"

	fstools "github.com/dsh-dev/dsh/internal/tools/fs"
)

// goBackend searches with the standard library: one goroutine walks the
// tree (see walk) and a bounded pool of workers reads and matches files,
// each reusing its own buffer. It follows rg's rules: .gitignore honoured,
// hidden files searched, .git skipped, binary files (a NUL in the first
// 8 KiB) and files over the size cap skipped, and a match is per line
// unless multiline is set.
type goBackend struct{ workers int }

func (goBackend) name() string { return "go" }

func (b goBackend) poolSize() int {
	if b.workers > 0 {
		return b.workers
	}
	return runtime.GOMAXPROCS(0)
}

// each calls fn with the contents of every searchable file, from the
// worker goroutines; fn must not keep data.
func (b goBackend) each(ctx context.Context, q *query, fn func(path string, data []byte)) error {
	if q.isFile {
		if data, ok := readCandidate(q.fence, q.root, q.maxFileSize, nil); ok {
			fn(q.root, data)
		}
		return ctx.Err()
	}
	paths := make(chan string, 256)
	var wg sync.WaitGroup
	for range b.poolSize() {
		wg.Go(func() {
			var buf []byte
			for p := range paths {
				if ctx.Err() != nil {
					continue // drain, so the walker never blocks on a full channel
				}
				data, ok := readCandidate(q.fence, p, q.maxFileSize, buf)
				if ok {
					fn(p, data)
				}
				buf = data[:0]
			}
		})
	}
	err := walk(ctx, &walkSpec{root: q.root, include: q.overrides, fence: q.fence, denied: q.denied, visit: func(f fileRef) error {
		select {
		case paths <- f.abs:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}})
	close(paths)
	wg.Wait()
	if err == nil {
		err = ctx.Err()
	}
	return err
}

func (b goBackend) files(ctx context.Context, q *query) ([]string, error) {
	var mu sync.Mutex
	var out []string
	err := b.each(ctx, q, func(path string, data []byte) {
		found := false
		matchStarts(q, data, func(int, int, int) bool {
			found = true
			return false
		})
		if found {
			mu.Lock()
			out = append(out, path)
			mu.Unlock()
		}
	})
	return out, err
}

func (b goBackend) counts(ctx context.Context, q *query) ([]fileCount, error) {
	var mu sync.Mutex
	var out []fileCount
	err := b.each(ctx, q, func(path string, data []byte) {
		n := 0
		matchStarts(q, data, func(int, int, int) bool {
			n++
			return true
		})
		if n > 0 {
			mu.Lock()
			out = append(out, fileCount{path, n})
			mu.Unlock()
		}
	})
	return out, err
}

func (b goBackend) lines(ctx context.Context, q *query, files []string, limit int) ([]fileLines, error) {
	out := make([]fileLines, len(files))
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(b.poolSize(), len(files)) {
		wg.Go(func() {
			var buf []byte
			for {
				i := int(next.Add(1)) - 1
				if i >= len(files) || ctx.Err() != nil {
					return
				}
				data, ok := readCandidate(q.fence, files[i], q.maxFileSize, buf)
				if ok {
					out[i] = fileLines{path: files[i], lines: contentLines(q, data, limit)}
				}
				buf = data[:0]
			}
		})
	}
	wg.Wait()
	return out, ctx.Err()
}

// readCandidate reads a file into buf (grown as needed) unless it is not
// a regular file, is larger than maxSize or looks binary; ok reports whether
// it should be searched. The returned slice is for reuse either way.
// A file the read fence refuses once opened (a symlink swapped in since
// the walk listed it) is skipped.
func readCandidate(fc fstools.Fence, path string, maxSize int64, buf []byte) (data []byte, ok bool) {
	// The walk lists only regular files, but one may have been replaced
	// by a FIFO since; openRegular neither blocks nor accepts it.
	f, fi, err := openRegular(path)
	if err != nil {
		return buf, false
	}
	defer f.Close()
	if fc.CheckOpened(path, f) != nil {
		return buf, false
	}
	if fi.Size() > maxSize {
		return buf, false
	}
	// One byte more than the size, so that the read that sees EOF does
	// not have to grow the buffer.
	buf = slices.Grow(buf[:0], int(fi.Size())+1)
	for {
		if len(buf) == cap(buf) {
			buf = slices.Grow(buf, 32<<10)
		}
		n, err := f.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if int64(len(buf)) > maxSize {
			return buf, false // grew while we read it
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return buf, false
		}
	}
	if bytes.IndexByte(buf[:min(len(buf), binarySniff)], 0) >= 0 {
		return buf, false
	}
	return buf, true
}

// matchStarts calls fn for each line on which a match starts, in order,
// with the line's bounds [ls, le) (le is at the newline) and the offset in
// the line of the first match; it stops when fn returns false.
//
// Without multiline a match must lie within one line. Rather than run the
// expression on every line, it runs on the rest of the buffer, which is
// much faster for the usual sparse matches: the leftmost match in the
// buffer starts no later than the first line that matches on its own. A
// candidate that runs past its line's end is checked against that line
// alone. \A and \z mean something else in a buffer than in a line, so
// patterns using them are run line by line.
func matchStarts(q *query, buf []byte, fn func(ls, le, col int) bool) {
	if q.multiline {
		multilineStarts(q, buf, fn)
		return
	}
	pos := 0
	for pos <= len(buf) {
		if pos == len(buf) && (pos == 0 || buf[pos-1] == '\n') {
			return // no line after a final newline
		}
		le := len(buf)
		if i := bytes.IndexByte(buf[pos:], '\n'); i >= 0 {
			le = pos + i
		}
		if q.perLine {
			if m := q.re.FindIndex(buf[pos:le]); m != nil && !fn(pos, le, m[0]) {
				return
			}
			pos = le + 1
			continue
		}
		loc := q.re.FindIndex(buf[pos:])
		if loc == nil {
			return
		}
		s, e := pos+loc[0], pos+loc[1]
		if s == len(buf) && (s == 0 || buf[s-1] == '\n') {
			return
		}
		ls := pos + bytes.LastIndexByte(buf[pos:s], '\n') + 1
		if ls > pos || s > le {
			le = len(buf)
			if i := bytes.IndexByte(buf[s:], '\n'); i >= 0 {
				le = s + i
			}
		}
		col := s - ls
		if e > le {
			m := q.re.FindIndex(buf[ls:le])
			if m == nil {
				pos = le + 1
				continue
			}
			col = m[0]
		}
		if !fn(ls, le, col) {
			return
		}
		pos = le + 1
	}
}

// multilineStarts is matchStarts for multiline patterns: each line on
// which at least one match starts, whatever lines the match spans. That
// is what rg -c -U counts.
func multilineStarts(q *query, buf []byte, fn func(ls, le, col int) bool) {
	last := -1
	for _, m := range q.re.FindAllIndex(buf, -1) {
		s := m[0]
		if s == len(buf) && (s == 0 || buf[s-1] == '\n') {
			break
		}
		ls := bytes.LastIndexByte(buf[:s], '\n') + 1
		if ls == last {
			continue
		}
		last = ls
		le := len(buf)
		if i := bytes.IndexByte(buf[s:], '\n'); i >= 0 {
			le = s + i
		}
		if !fn(ls, le, s-ls) {
			return
		}
	}
}

// contentLines returns a file's matching lines, and their context, up to
// and including the limit-th line on which a match starts (and that match's
// trailing context), like rg --max-count.
func contentLines(q *query, buf []byte, limit int) []outLine {
	starts := lineStarts(buf)
	lineOf := func(off int) int { // 0-based line containing off
		return sort.Search(len(starts), func(i int) bool { return starts[i] > off }) - 1
	}
	type mark struct {
		match, start bool
		col          int
	}
	marks := map[int]*mark{}
	get := func(n int) *mark {
		m := marks[n]
		if m == nil {
			m = &mark{col: -1}
			marks[n] = m
		}
		return m
	}
	nStarts := 0
	if q.multiline {
		for _, loc := range q.re.FindAllIndex(buf, -1) {
			s, e := loc[0], loc[1]
			if s == len(buf) && (s == 0 || buf[s-1] == '\n') {
				break
			}
			first, lastLine := lineOf(s), lineOf(max(s, e-1))
			m := get(first)
			if !m.start {
				if nStarts == limit {
					break
				}
				nStarts++
				m.start, m.col = true, s-starts[first]
			}
			for n := first; n <= lastLine; n++ {
				get(n).match = true
			}
		}
	} else {
		matchStarts(q, buf, func(ls, _, col int) bool {
			m := get(lineOf(ls))
			m.match, m.start, m.col = true, true, col
			nStarts++
			return nStarts < limit
		})
	}
	show := map[int]bool{}
	for n, m := range marks {
		if !m.match {
			continue
		}
		for c := max(0, n-q.before); c <= min(len(starts)-1, n+q.after); c++ {
			show[c] = true
		}
	}
	nums := make([]int, 0, len(show))
	for n := range show {
		nums = append(nums, n)
	}
	slices.Sort(nums)
	out := make([]outLine, 0, len(nums))
	for _, n := range nums {
		end := len(buf)
		if n+1 < len(starts) {
			end = starts[n+1] - 1
		} else if end > 0 && buf[end-1] == '\n' {
			end--
		}
		ln := outLine{num: n + 1, text: string(trimCR(buf[starts[n]:end])), col: -1}
		if m := marks[n]; m != nil {
			ln.match, ln.start, ln.col = m.match, m.start, m.col
		}
		out = append(out, ln)
	}
	return out
}

// lineStarts returns the offset of every line's first byte; a final
// newline does not start another line.
func lineStarts(buf []byte) []int {
	if len(buf) == 0 {
		return nil
	}
	starts := []int{0}
	for i := 0; ; {
		j := bytes.IndexByte(buf[i:], '\n')
		if j < 0 || i+j+1 == len(buf) {
			return starts
		}
		i += j + 1
		starts = append(starts, i)
	}
}

func trimCR(b []byte) []byte {
	return bytes.TrimSuffix(b, []byte("\r"))
}
