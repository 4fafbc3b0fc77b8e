// Package search holds the model-facing file search tools: glob, which
// lists files matching a doublestar pattern newest first, and grep, which
// searches file contents for a regular expression with rg when it is
// installed and a pure-Go parallel walker otherwise. Both honour
// .gitignore (see walk.go and gitignore.go), bound their output and are
// concurrency-safe: they only read the workspace.
//
// The two grep backends give the same output, in the same order, for the
// same tree, with two known exceptions. The regex engines differ: rg's
// \w, \d, \s and \b are Unicode-aware where Go's are ASCII, and rg's .
// does not match a byte of invalid UTF-8. And binary detection differs: a
// file whose first NUL byte comes after the first 8 KiB is searched by Go
// but cut short or skipped by rg.
package search

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/dsh-dev/dsh/internal/sandbox"
	"github.com/dsh-dev/dsh/internal/tool"
	fstools "github.com/dsh-dev/dsh/internal/tools/fs"
)

// Model-facing tool names.
const (
	GlobName = "glob"
	GrepName = "grep"
)

// Defaults for zero Options fields.
const (
	DefaultGlobLimit     = 100
	DefaultLineLimit     = 250
	DefaultFileLimit     = 100
	DefaultMaxHeadLimit  = 1000
	DefaultMaxLineLength = 500
	DefaultMaxFileSize   = 10 << 20
	DefaultMaxOutput     = 100_000
	DefaultTimeout       = 60 * time.Second
)

// maxContext bounds -A, -B and -C: more context than this is a file read,
// not a search.
const maxContext = 100

// Options configures the tools. The zero value is ready to use.
type Options struct {
	// Ripgrep is the rg executable grep runs; "" looks "rg" up on PATH
	// when the tool is built.
	Ripgrep string
	// NoRipgrep makes grep use the pure-Go search even when rg exists.
	NoRipgrep bool
	// GlobLimit is how many paths glob lists; 0 means DefaultGlobLimit.
	GlobLimit int
	// LineLimit is how many matching lines grep shows in content mode
	// when the call gives no head_limit; 0 means DefaultLineLimit.
	LineLimit int
	// FileLimit is how many files grep lists in files_with_matches and
	// count modes when the call gives no head_limit; 0 means
	// DefaultFileLimit.
	FileLimit int
	// MaxHeadLimit is the largest head_limit a call may give; 0 means
	// DefaultMaxHeadLimit.
	MaxHeadLimit int
	// MaxLineLength is how many characters of a line grep shows; longer
	// lines are clipped around the match. 0 means DefaultMaxLineLength.
	MaxLineLength int
	// MaxFileSize is the size above which grep skips a file; 0 means
	// DefaultMaxFileSize.
	MaxFileSize int64
	// MaxOutputBytes bounds grep's content output, whatever the line
	// limit and context ask for; 0 means DefaultMaxOutput.
	MaxOutputBytes int
	// Policy returns a call's sandbox policy, whose read rules (the
	// deny-read list, read confinement) the tools apply while they walk:
	// a denied root is an error, a denied subdirectory is skipped and
	// reported, and every directory and file is checked after it is
	// opened (the descriptor's real name), so a symlink swapped in
	// during the walk cannot lead into a denied place. Under an active
	// policy grep searches with the Go backend, which makes those checks
	// (rg opens files by name) whenever the policy can refuse a read.
	// Nil leaves the tools unfenced.
	Policy func(c *tool.Call) sandbox.Policy
	// Timeout bounds one call (Definition.Timeout); 0 means
	// DefaultTimeout.
	Timeout time.Duration
	// Workers bounds the pure-Go search's parallelism; 0 means one
	// worker per CPU.
	Workers int
}

func (o Options) withDefaults() Options {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&o.GlobLimit, DefaultGlobLimit)
	def(&o.LineLimit, DefaultLineLimit)
	def(&o.FileLimit, DefaultFileLimit)
	def(&o.MaxHeadLimit, DefaultMaxHeadLimit)
	def(&o.MaxLineLength, DefaultMaxLineLength)
	def(&o.MaxOutputBytes, DefaultMaxOutput)
	if o.MaxFileSize <= 0 {
		o.MaxFileSize = DefaultMaxFileSize
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.NoRipgrep {
		o.Ripgrep = ""
	} else if o.Ripgrep == "" {
		// Looked up once, at construction: a PATH search per call would
		// cost more than many searches.
		o.Ripgrep, _ = exec.LookPath("rg")
	}
	return o
}

// alwaysSafe is ConcurrencySafe for tools that only read.
func alwaysSafe(json.RawMessage) bool { return true }

// fields reads a call's arguments field by field (see tool.Fields).
type fields struct{ tool.Fields }

func parseFields(toolName string, raw json.RawMessage) (fields, error) {
	f, err := tool.ParseFields(toolName, raw)
	return fields{f}, err
}

func (f fields) invalid(format string, v ...any) error { return f.Invalid(format, v...) }

func (f fields) get(name string) (json.RawMessage, bool) { return f.Get(name) }

func (f fields) str(name string) (string, bool, error) {
	v, ok := f.get(name)
	if !ok {
		return "", false, nil
	}
	var s string
	if err := json.Unmarshal(v, &s); err != nil {
		return "", false, f.invalid("%s must be a string", name)
	}
	return s, true, nil
}

func (f fields) boolean(name string, def bool) (bool, error) {
	v, ok := f.get(name)
	if !ok {
		return def, nil
	}
	var b bool
	if err := json.Unmarshal(v, &b); err != nil {
		return false, f.invalid("%s must be true or false", name)
	}
	return b, nil
}

// integer reads an optional integer in [lo, hi] (see tool.Fields.Integer).
func (f fields) integer(name string, lo, hi int) (int, bool, error) { return f.Integer(name, lo, hi) }

// resolvePath resolves a path argument against the session cwd (relative
// paths, ~) and checks that it exists. An empty arg is the cwd itself.
// The read fence is checked first, so a denied path is refused whether
// it exists or not.
func resolvePath(t fields, cwd, arg string, fc fstools.Fence) (string, os.FileInfo, error) {
	base := cwd
	if base == "" {
		var err error
		if base, err = os.Getwd(); err != nil {
			return "", nil, tool.Errorf(tool.CodeFailed, "cannot determine the working directory: %v", err)
		}
	}
	p := base
	if arg != "" {
		p = arg
		if p == "~" || strings.HasPrefix(p, "~/") {
			if home, err := os.UserHomeDir(); err == nil {
				p = filepath.Join(home, p[1:])
			}
		}
		if !filepath.IsAbs(p) {
			p = filepath.Join(base, p)
		}
	}
	p = filepath.Clean(p)
	if err := fc.CheckRead(p); err != nil {
		return "", nil, err
	}
	fi, err := os.Stat(p)
	if err != nil {
		if arg == "" { // a broken session cwd is not the model's fault
			return "", nil, tool.Errorf(tool.CodeFailed, "working directory %s: %v", p, err)
		}
		return "", nil, t.invalid("path %s does not exist", p)
	}
	return p, fi, nil
}

// comparePaths orders paths component by component, the order of a
// sorted depth-first walk ("a/b" before "a.txt"): it is a byte comparison
// in which "/" sorts before every other byte.
func comparePaths(a, b string) int {
	n := min(len(a), len(b))
	for i := 0; i < n; i++ {
		ca, cb := a[i], b[i]
		if ca == cb {
			continue
		}
		if ca == '/' {
			return -1
		}
		if cb == '/' {
			return 1
		}
		if ca < cb {
			return -1
		}
		return 1
	}
	return len(a) - len(b)
}

// clipLine shortens a line to at most limit characters, keeping a window
// that starts a little before col (the byte offset of the first match, or
// -1) so that the match stays visible in long minified lines. The result
// is valid UTF-8.
func clipLine(s string, col, limit int) string {
	total := utf8.RuneCountInString(s)
	if total <= limit {
		return strings.ToValidUTF8(s, "\uFFFD")
	}
	first := 0
	if col > 0 && col <= len(s) {
		// Some lead-in before the match, but not so much that a long
		// match is cut; and never a short window at the end of the line.
		first = utf8.RuneCountInString(s[:col]) - limit/5
		first = min(max(first, 0), total-limit)
	}
	start := runeOffset(s, first)
	end := start + runeOffset(s[start:], limit)
	var b strings.Builder
	if start > 0 {
		b.WriteString("…")
	}
	b.WriteString(strings.ToValidUTF8(s[start:end], "\uFFFD"))
	if end < len(s) {
		b.WriteString("…")
	}
	fmt.Fprintf(&b, " [%d characters clipped]", total-limit)
	return b.String()
}

// runeOffset returns the byte offset just after the first n characters of
// s (len(s) when s is shorter). Invalid bytes count as one character each,
// as utf8.RuneCountInString counts them.
func runeOffset(s string, n int) int {
	for i := range s {
		if n == 0 {
			return i
		}
		n--
	}
	return len(s)
}
