package search

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"regexp/syntax"
	"slices"
	"strconv"
	"strings"

	"github.com/dsh-dev/dsh/internal/tool"
	fstools "github.com/dsh-dev/dsh/internal/tools/fs"
)

//go:embed grep.md
var grepDescription string

// Output modes.
const (
	modeFiles   = "files_with_matches"
	modeContent = "content"
	modeCount   = "count"
)

// binarySniff is how much of a file is checked for a NUL byte, git's
// heuristic for "binary".
const binarySniff = 8 << 10

// NewGrep returns the grep tool definition. It searches with the rg at
// Options.Ripgrep (looked up on PATH when empty) and with a pure-Go
// walker when there is none or Options.NoRipgrep is set; both give the
// same results, in the same order.
func NewGrep(opts Options) tool.Definition {
	opts = opts.withDefaults()
	return tool.Definition{
		Name:            GrepName,
		Description:     grepDescribe(opts),
		Parameters:      grepParameters(opts),
		ConcurrencySafe: alwaysSafe,
		Timeout:         opts.Timeout,
		Execute: func(ctx context.Context, c *tool.Call) (tool.Result, error) {
			return grepExecute(ctx, opts, c)
		},
	}
}

func grepDescribe(o Options) string {
	return strings.NewReplacer(
		"{{LINE_LIMIT}}", strconv.Itoa(o.LineLimit),
		"{{FILE_LIMIT}}", strconv.Itoa(o.FileLimit),
		"{{MAX_HEAD_LIMIT}}", strconv.Itoa(o.MaxHeadLimit),
		"{{MAX_CONTEXT}}", strconv.Itoa(maxContext),
		"{{MAX_LINE}}", strconv.Itoa(o.MaxLineLength),
		"{{MAX_FILE_SIZE}}", humanSize(o.MaxFileSize),
		"{{MAX_OUTPUT}}", humanSize(int64(o.MaxOutputBytes)),
	).Replace(strings.TrimSpace(grepDescription))
}

func grepParameters(o Options) json.RawMessage {
	// Written out rather than marshalled from a map so the property order
	// reads naturally for the model.
	ctxProp := func(what string) string {
		return fmt.Sprintf(`{"type":"integer","minimum":0,"maximum":%d,"description":"Lines of context to show %s each match (content mode)."}`, maxContext, what)
	}
	return json.RawMessage(`{"type":"object","properties":{` +
		`"pattern":{"type":"string","description":"Regular expression to search for (ripgrep/RE2 syntax)."},` +
		`"path":{"type":"string","description":"File or directory to search; relative paths resolve against the session working directory (the default)."},` +
		`"include":{"type":"string","description":"Only search files matching this glob, e.g. \"*.go\" or \"*.{ts,tsx}\"."},` +
		`"output_mode":{"type":"string","enum":["files_with_matches","content","count"],"description":"files_with_matches (default): matching files; content: matching lines; count: matching lines per file."},` +
		`"-i":{"type":"boolean","description":"Case-insensitive search."},` +
		`"-n":{"type":"boolean","description":"Show line numbers (content mode; default true)."},` +
		`"-A":` + ctxProp("after") + `,` +
		`"-B":` + ctxProp("before") + `,` +
		`"-C":` + ctxProp("before and after") + `,` +
		`"multiline":{"type":"boolean","description":"Allow matches across lines; . also matches newlines."},` +
		fmt.Sprintf(`"head_limit":{"type":"integer","minimum":1,"maximum":%d,"description":"Show at most this many results: matching lines in content mode (default %d), files otherwise (default %d)."}`,
			o.MaxHeadLimit, o.LineLimit, o.FileLimit) +
		`},"required":["pattern"],"additionalProperties":false}`)
}

// grepArgs are the validated call arguments.
type grepArgs struct {
	pattern, path, include, mode  string
	ignoreCase, lineNums, multiln bool
	before, after, limit          int
}

func parseGrepArgs(o Options, raw json.RawMessage) (grepArgs, fields, error) {
	a := grepArgs{mode: modeFiles}
	f, err := parseFields(GrepName, raw)
	if err != nil {
		return a, f, err
	}
	var ok bool
	if a.pattern, ok, err = f.str("pattern"); err != nil {
		return a, f, err
	}
	if !ok || a.pattern == "" {
		return a, f, f.invalid("pattern is required and must be a non-empty string")
	}
	if a.path, _, err = f.str("path"); err != nil {
		return a, f, err
	}
	if a.include, _, err = f.str("include"); err != nil {
		return a, f, err
	}
	if a.include == "" {
		// "glob" is what other harnesses call this argument; models
		// trained on them send it.
		if a.include, _, err = f.str("glob"); err != nil {
			return a, f, err
		}
	}
	if m, ok, err := f.str("output_mode"); err != nil {
		return a, f, err
	} else if ok {
		if m != modeFiles && m != modeContent && m != modeCount {
			return a, f, f.invalid("output_mode must be one of files_with_matches, content, count")
		}
		a.mode = m
	}
	if a.ignoreCase, err = f.boolean("-i", false); err != nil {
		return a, f, err
	}
	if a.lineNums, err = f.boolean("-n", true); err != nil {
		return a, f, err
	}
	if a.multiln, err = f.boolean("multiline", false); err != nil {
		return a, f, err
	}
	c, _, err := f.integer("-C", 0, maxContext)
	if err != nil {
		return a, f, err
	}
	a.before, a.after = c, c
	if n, ok, err := f.integer("-B", 0, maxContext); err != nil {
		return a, f, err
	} else if ok {
		a.before = n
	}
	if n, ok, err := f.integer("-A", 0, maxContext); err != nil {
		return a, f, err
	} else if ok {
		a.after = n
	}
	a.limit = o.FileLimit
	if a.mode == modeContent {
		a.limit = o.LineLimit
	}
	if n, ok, err := f.integer("head_limit", 1, o.MaxHeadLimit); err != nil {
		return a, f, err
	} else if ok {
		a.limit = n
	}
	return a, f, nil
}

// query is one validated search, shared by both backends.
type query struct {
	root        string // absolute; a directory, or a file when isFile
	isFile      bool
	pattern     string // as given, for rg
	ignoreCase  bool
	multiline   bool
	re          *regexp.Regexp // the Go form of pattern, flags applied
	perLine     bool           // \A or \z in the pattern: match each line on its own
	include     string
	overrides   *overrides
	before      int
	after       int
	maxFileSize int64
	inRepo      bool
	// clipped is set by a backend whose output was cut short.
	clipped bool
	// fence is the call's read fence; denied lists the directories the
	// walk skipped because of it.
	fence  fstools.Fence
	denied *[]string
}

// fileCount is a file with matches and how many lines a match starts on.
type fileCount struct {
	path  string
	count int
}

// outLine is one line of content output.
type outLine struct {
	num   int
	text  string // without the line terminator
	match bool   // part of a match
	start bool   // a match starts on this line; only these count toward limits
	col   int    // byte offset of the first match starting here, or -1
}

// fileLines is the content output for one file.
type fileLines struct {
	path  string
	lines []outLine // by line number, no duplicates
}

// backend is one way of running a query. Every method is called from one
// goroutine per call; paths come back absolute, in any order.
type backend interface {
	name() string
	// files lists the files with at least one match.
	files(ctx context.Context, q *query) ([]string, error)
	// counts lists the files with matches and their counts.
	counts(ctx context.Context, q *query) ([]fileCount, error)
	// lines returns the matching lines, with context, of the given files,
	// stopping in each file after limit lines on which a match starts.
	lines(ctx context.Context, q *query, files []string, limit int) ([]fileLines, error)
}

// grepMeta is the structured, logged side of a grep result.
type grepMeta struct {
	Backend string `json:"backend"`
	Root    string `json:"root"`
	Mode    string `json:"mode"`
	Files   int    `json:"files"`
	Lines   int    `json:"lines,omitempty"`
	Shown   int    `json:"shown"`
	Clipped bool   `json:"clipped,omitempty"`
}

func grepExecute(ctx context.Context, o Options, c *tool.Call) (tool.Result, error) {
	a, f, err := parseGrepArgs(o, c.Arguments)
	if err != nil {
		return tool.Result{}, err
	}
	fc := fstools.NewFence(o.Policy, c)
	root, fi, err := resolvePath(f, c.Cwd, a.path, fc)
	if err != nil {
		return tool.Result{}, err
	}
	var denied []string
	q := &query{fence: fc, denied: &denied,
		root: root, isFile: !fi.IsDir(), pattern: a.pattern,
		ignoreCase: a.ignoreCase, multiline: a.multiln, include: a.include,
		before: a.before, after: a.after, maxFileSize: o.MaxFileSize,
	}
	if q.re, q.perLine, err = compilePattern(f, a); err != nil {
		return tool.Result{}, err
	}
	if a.include != "" {
		var msg string
		if q.overrides, msg = parseInclude(a.include); msg != "" {
			return tool.Result{}, f.invalid("include %q: %s", a.include, msg)
		}
	}
	var be backend = goBackend{workers: o.Workers}
	if o.Ripgrep != "" && !fc.LimitsReads() {
		// rg opens what it walks by name; under a read fence the Go
		// backend checks every opened directory and file instead.
		be = &rgBackend{path: o.Ripgrep}
	}
	meta := grepMeta{Backend: be.name(), Root: root, Mode: a.mode}
	if q.isFile {
		// A named FIFO would block both backends (rg opens what it is
		// given); a device is no text to search.
		if err := fstools.CheckRegular(root, fi); err != nil {
			return tool.Result{}, err
		}
	}
	if q.isFile {
		// Both backends would treat a named file differently from one
		// found by walking (rg searches named binary files); checking it
		// here keeps them alike.
		if msg := skipReason(root, fi, o.MaxFileSize); msg != "" {
			res := tool.Text(msg)
			res.Meta, _ = json.Marshal(meta)
			return res, nil
		}
	} else {
		q.inRepo = findRepo(root) != ""
	}

	output := func(be backend) (string, error) {
		meta.Backend = be.name()
		switch a.mode {
		case modeFiles:
			return filesOutput(ctx, be, q, a, &meta)
		case modeCount:
			return countOutput(ctx, be, q, a, &meta)
		}
		return contentOutput(ctx, be, q, a, o, &meta)
	}
	text, err := output(be)
	if errors.Is(err, errRgUnavailable) {
		q.clipped = false
		text, err = output(goBackend{workers: o.Workers})
	}
	if err != nil {
		return tool.Result{}, err
	}
	text += deniedNote(denied)
	if q.clipped {
		meta.Clipped = true
		text += "\n[the search produced more output than could be read; results are incomplete — narrow the search]"
	}
	res := tool.Text(text)
	res.Meta, _ = json.Marshal(meta)
	return res, nil
}

// compilePattern compiles the Go form of the pattern. The pattern is
// compiled on its own first so that the error names the pattern as the
// model wrote it.
func compilePattern(f fields, a grepArgs) (*regexp.Regexp, bool, error) {
	if _, err := regexp.Compile(a.pattern); err != nil {
		return nil, false, f.invalid("pattern is not a valid regular expression: %v", err)
	}
	flags := "(?m"
	if a.multiln {
		flags += "s"
	}
	if a.ignoreCase {
		flags += "i"
	}
	full := flags + ")" + a.pattern
	re, err := regexp.Compile(full)
	if err != nil {
		return nil, false, f.invalid("pattern is not a valid regular expression: %v", err)
	}
	tree, err := syntax.Parse(full, syntax.Perl)
	if err != nil {
		return nil, false, f.invalid("pattern is not a valid regular expression: %v", err)
	}
	var newline, textAnchor bool
	walkRegexp(tree, func(r *syntax.Regexp) {
		switch r.Op {
		case syntax.OpLiteral:
			newline = newline || slices.Contains(r.Rune, '\n')
		case syntax.OpBeginText, syntax.OpEndText:
			textAnchor = true
		}
	})
	if newline && !a.multiln {
		// Lines are matched one at a time, so such a pattern could never
		// match; rg refuses it the same way.
		return nil, false, f.invalid("pattern contains a literal newline; set multiline to true to match across lines")
	}
	return re, textAnchor, nil
}

func walkRegexp(r *syntax.Regexp, fn func(*syntax.Regexp)) {
	fn(r)
	for _, s := range r.Sub {
		walkRegexp(s, fn)
	}
}

// skipReason says why a named file is not searched, or "".
func skipReason(path string, fi os.FileInfo, maxSize int64) string {
	if fi.Size() > maxSize {
		return fmt.Sprintf("No matches: %s is larger than the %s search limit and was skipped; search it with bash (grep or rg) instead.", path, humanSize(maxSize))
	}
	f, _, err := openRegular(path)
	if err != nil {
		return fmt.Sprintf("No matches: %s could not be read: %v", path, err)
	}
	defer f.Close()
	buf := make([]byte, binarySniff)
	n, _ := io.ReadFull(f, buf)
	if bytes.IndexByte(buf[:n], 0) >= 0 {
		return fmt.Sprintf("No matches: %s is a binary file and was skipped.", path)
	}
	return ""
}
