package search

import (
	"container/heap"
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/bmatcuk/doublestar/v4"

	"github.com/dsh-dev/dsh/internal/tool"
	fstools "github.com/dsh-dev/dsh/internal/tools/fs"
)

//go:embed glob.md
var globDescription string

// NewGlob returns the glob tool definition: doublestar patterns relative
// to a directory, matching files listed newest first, at most
// Options.GlobLimit of them.
func NewGlob(opts Options) tool.Definition {
	opts = opts.withDefaults()
	return tool.Definition{
		Name:        GlobName,
		Description: strings.ReplaceAll(strings.TrimSpace(globDescription), "{{LIMIT}}", strconv.Itoa(opts.GlobLimit)),
		Parameters: json.RawMessage(`{"type":"object","properties":{` +
			`"pattern":{"type":"string","description":"Glob pattern to match file paths against, e.g. \"**/*.go\" or \"src/**/*.{ts,tsx}\"."},` +
			`"path":{"type":"string","description":"Directory to search in; relative paths resolve against the session working directory (the default)."}` +
			`},"required":["pattern"],"additionalProperties":false}`),
		ConcurrencySafe: alwaysSafe,
		Timeout:         opts.Timeout,
		Execute: func(ctx context.Context, c *tool.Call) (tool.Result, error) {
			return globExecute(ctx, opts, c)
		},
	}
}

// globMeta is the structured, logged side of a glob result.
type globMeta struct {
	Root    string `json:"root"`
	Pattern string `json:"pattern"`
	Total   int    `json:"total"`
	Shown   int    `json:"shown"`
}

func globExecute(ctx context.Context, o Options, c *tool.Call) (tool.Result, error) {
	f, err := parseFields(GlobName, c.Arguments)
	if err != nil {
		return tool.Result{}, err
	}
	pattern, _, err := f.str("pattern")
	if err != nil {
		return tool.Result{}, err
	}
	if strings.TrimSpace(pattern) == "" {
		return tool.Result{}, f.invalid("pattern is required and must be a non-empty string")
	}
	pathArg, _, err := f.str("path")
	if err != nil {
		return tool.Result{}, err
	}
	fc := fstools.NewFence(o.Policy, c)
	dir, fi, err := resolvePath(f, c.Cwd, pathArg, fc)
	if err != nil {
		return tool.Result{}, err
	}
	if !fi.IsDir() {
		return tool.Result{}, f.invalid("path %s is not a directory", dir)
	}
	var denied []string
	q, err := newGlobQuery(f, dir, pattern)
	if err != nil {
		return tool.Result{}, err
	}
	top := &newest{limit: o.GlobLimit}
	if st, err := os.Stat(q.root); err == nil && st.IsDir() {
		err = walk(ctx, &walkSpec{
			root:    q.root,
			fence:   fc,
			denied:  &denied,
			hidden:  q.hidden,
			descend: q.descend,
			visit: func(fr fileRef) error {
				if !doublestar.MatchUnvalidated(q.pattern, fr.rel) {
					return nil
				}
				info, err := fr.entry.Info()
				if err != nil {
					return nil // removed while we walked
				}
				top.add(pathTime{fr.abs, info.ModTime().UnixNano()})
				return nil
			},
		})
		if err != nil {
			return tool.Result{}, err
		}
	}
	files := top.sorted()
	var b strings.Builder
	for _, p := range files {
		b.WriteString(p.path)
		b.WriteByte('\n')
	}
	if len(files) == 0 {
		b.WriteString("No files found\n")
	}
	if more := top.total - len(files); more > 0 {
		fmt.Fprintf(&b, "\n[%d more not shown: listed the %d most recently modified of %d matching files; narrow the pattern or the path to see the rest]\n",
			more, len(files), top.total)
	}
	res := tool.Text(strings.TrimRight(b.String(), "\n") + deniedNote(denied))
	res.Meta, _ = json.Marshal(globMeta{Root: q.root, Pattern: q.pattern, Total: top.total, Shown: len(files)})
	return res, nil
}

// globQuery is a pattern split into the literal directory it starts in
// and the rest, with what the walk needs to prune.
type globQuery struct {
	root    string // where the walk starts: the path joined with the pattern's literal prefix
	pattern string // relative to root
	segs    []string
	// prune is false when segs cannot be trusted segment by segment (a
	// {} group containing "/").
	prune bool
	// dotSegs are the segments that name hidden entries.
	dotSegs []string
}

func newGlobQuery(f fields, dir, pattern string) (*globQuery, error) {
	pattern = filepath.ToSlash(pattern)
	for strings.HasPrefix(pattern, "./") {
		pattern = strings.TrimLeft(pattern[2:], "/")
	}
	if !doublestar.ValidatePattern(pattern) {
		return nil, f.invalid("pattern %q is not a valid glob", pattern)
	}
	// The literal prefix ("src/internal" in "src/internal/**/*.go", or
	// an absolute directory) becomes the walk root, so that only that
	// subtree is read.
	base, rest := doublestar.SplitPattern(pattern)
	q := &globQuery{root: dir, pattern: rest}
	if filepath.IsAbs(base) {
		q.root = filepath.Clean(base)
	} else if base != "." {
		q.root = filepath.Join(dir, base)
	}
	if q.pattern == "" { // "src/": everything below
		q.pattern = "**"
	}
	q.segs = strings.Split(q.pattern, "/")
	q.prune = !braceHasSlash(q.pattern)
	for _, s := range q.segs {
		if strings.HasPrefix(s, ".") || strings.Contains(s, "{.") || strings.Contains(s, ",.") {
			q.dotSegs = append(q.dotSegs, s)
		}
	}
	return q, nil
}

// hidden reports whether the pattern names a hidden entry: some segment
// that itself starts with a dot matches the name.
func (q *globQuery) hidden(name string) bool {
	for _, s := range q.dotSegs {
		if doublestar.MatchUnvalidated(s, name) {
			return true
		}
	}
	return false
}

// descend reports whether a directory can hold matches: its path must
// match the pattern's segments before the first "**", and without "**" it
// must be shallower than the pattern.
func (q *globQuery) descend(rel []string) bool {
	if !q.prune {
		return true
	}
	star := slices.Index(q.segs, "**")
	if star < 0 && len(rel) >= len(q.segs) {
		return false
	}
	n := len(rel)
	if star >= 0 {
		n = min(n, star)
	}
	for i := 0; i < n; i++ {
		if !doublestar.MatchUnvalidated(q.segs[i], rel[i]) {
			return false
		}
	}
	return true
}

// braceHasSlash reports whether a {} group in p contains a "/".
func braceHasSlash(p string) bool {
	depth := 0
	for i := 0; i < len(p); i++ {
		switch p[i] {
		case '\\':
			i++
		case '{':
			depth++
		case '}':
			depth = max(depth-1, 0)
		case '/':
			if depth > 0 {
				return true
			}
		}
	}
	return false
}

// pathTime is a file and its modification time.
type pathTime struct {
	path  string
	mtime int64
}

// newer orders newest first, then by path, so that results are
// deterministic when times tie.
func newer(a, b pathTime) bool {
	if a.mtime != b.mtime {
		return a.mtime > b.mtime
	}
	return comparePaths(a.path, b.path) < 0
}

// newest keeps the limit newest of the files added, in a heap whose top
// is the oldest kept, and counts all of them. A glob over a huge tree
// holds at most limit paths.
type newest struct {
	limit int
	total int
	h     []pathTime
}

func (n *newest) Len() int           { return len(n.h) }
func (n *newest) Less(i, j int) bool { return newer(n.h[j], n.h[i]) }
func (n *newest) Swap(i, j int)      { n.h[i], n.h[j] = n.h[j], n.h[i] }
func (n *newest) Push(x any)         { n.h = append(n.h, x.(pathTime)) }
func (n *newest) Pop() any {
	x := n.h[len(n.h)-1]
	n.h = n.h[:len(n.h)-1]
	return x
}

func (n *newest) add(p pathTime) {
	n.total++
	if len(n.h) < n.limit {
		heap.Push(n, p)
		return
	}
	if newer(p, n.h[0]) {
		n.h[0] = p
		heap.Fix(n, 0)
	}
}

// sorted returns the kept files, newest first.
func (n *newest) sorted() []pathTime {
	out := slices.Clone(n.h)
	slices.SortFunc(out, func(a, b pathTime) int {
		if newer(a, b) {
			return -1
		}
		if newer(b, a) {
			return 1
		}
		return 0
	})
	return out
}
