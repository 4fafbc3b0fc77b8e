package search

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/dsh-dev/dsh/internal/proc"
	"github.com/dsh-dev/dsh/internal/tool"
)

// rgOutputLimit bounds what one rg run may print. The listing and
// counting runs print a line per file and the content run at most
// limit×limit matches, so only pathological trees reach it; then the
// result is marked incomplete rather than failing.
const rgOutputLimit = 64 << 20

// elisionMark is in the marker line proc.Run puts where it dropped
// output; records containing it are cut and are skipped.
const elisionMark = " bytes elided …]"

// errRgUnavailable means rg could not be started (removed or broken
// since the tool was built); the call then falls back to the Go search.
var errRgUnavailable = errors.New("rg could not be started")

// rgBackend searches with ripgrep. Its flags make rg follow the same
// rules as the Go walker: .gitignore files apply even outside a git
// repository (--no-require-git), but those above the search root only
// inside one (--no-ignore-parent otherwise); no global gitignore, .ignore
// or .rgignore files and no rg config file; hidden files searched, .git
// skipped; no BOM sniffing or transcoding, so UTF-16 files are binary for
// both; the same size cap.
type rgBackend struct{ path string }

func (*rgBackend) name() string { return "rg" }

func (r *rgBackend) args(q *query, mode ...string) []string {
	a := []string{r.path, "--no-config", "--no-messages", "--hidden", "--no-require-git",
		"--no-ignore-global", "--no-ignore-dot", "--encoding", "none",
		"--max-filesize", strconv.FormatInt(q.maxFileSize, 10)}
	if !q.inRepo {
		a = append(a, "--no-ignore-parent")
	}
	if q.ignoreCase {
		a = append(a, "--ignore-case")
	}
	if q.multiline {
		a = append(a, "--multiline", "--multiline-dotall")
	}
	if q.include != "" {
		a = append(a, "--glob", q.include)
	}
	a = append(a, "--glob", "!.git")
	a = append(a, mode...)
	// --regexp so that a pattern starting with "-" is not taken for a
	// flag; the paths to search follow the "--".
	return append(a, "--regexp", q.pattern, "--")
}

// run runs rg. rg exits 0 with matches, 1 without and 2 after an error;
// with --no-messages the errors about single files are silent and the
// results are still good, so 2 is only a failure when parse found
// nothing in the output, which then is rg's error message.
func (r *rgBackend) run(ctx context.Context, q *query, argv []string, parse func(out []byte) int) error {
	dir := q.root
	if q.isFile {
		dir = filepath.Dir(q.root)
	}
	// Dir is the search root because rg matches --glob relative to its
	// working directory.
	out, err := proc.Run(ctx, proc.Spec{Argv: argv, Dir: dir, OutputLimit: rgOutputLimit})
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("%w: %v", errRgUnavailable, err)
	}
	if out.TimedOut || out.Cancelled {
		return ctx.Err()
	}
	if out.Elided > 0 {
		q.clipped = true
	}
	n := parse(out.Output)
	switch {
	case out.ExitCode == 0 || out.ExitCode == 1:
		return nil
	case out.ExitCode == 2 && (n > 0 || len(bytes.TrimSpace(out.Output)) == 0):
		return nil
	}
	msg := strings.TrimSpace(strings.ToValidUTF8(string(out.Output), "\uFFFD"))
	if strings.Contains(msg, "regex parse error") || strings.Contains(msg, "error parsing") {
		return tool.Errorf(tool.CodeInvalidArgs, "invalid arguments for grep: pattern is not valid for rg: %s", msg)
	}
	if strings.Contains(msg, "glob") {
		return tool.Errorf(tool.CodeInvalidArgs, "invalid arguments for grep: include is not valid for rg: %s", msg)
	}
	return tool.Errorf(tool.CodeFailed, "rg failed (exit code %d): %s", out.ExitCode, msg)
}

// underRoot reports whether p is a path rg can have printed for the
// query, which tells a result from stray text.
func underRoot(q *query, p string) bool {
	if q.isFile {
		return p == q.root
	}
	prefix := q.root
	if !strings.HasSuffix(prefix, "/") {
		prefix += "/"
	}
	return strings.HasPrefix(p, prefix)
}

// cleanRecord returns p, or the part after its last newline when only
// that part is a path (text printed before it), and whether the result is
// a usable path. A path holding the elision marker was cut.
func cleanRecord(q *query, p string) (string, bool) {
	if underRoot(q, p) && !strings.Contains(p, elisionMark) {
		return p, true
	}
	if i := strings.LastIndexByte(p, '\n'); i >= 0 {
		if tail := p[i+1:]; underRoot(q, tail) && !strings.Contains(tail, elisionMark) {
			return tail, true
		}
	}
	return "", false
}

func (r *rgBackend) files(ctx context.Context, q *query) ([]string, error) {
	var paths []string
	err := r.run(ctx, q, append(r.args(q, "--files-with-matches", "--null"), q.root), func(out []byte) int {
		paths = parseFileList(q, out)
		return len(paths)
	})
	return paths, err
}

func (r *rgBackend) counts(ctx context.Context, q *query) ([]fileCount, error) {
	var counts []fileCount
	err := r.run(ctx, q, append(r.args(q, "--count", "--null", "--with-filename"), q.root), func(out []byte) int {
		counts = parseCounts(q, out)
		return len(counts)
	})
	return counts, err
}

// parseFileList parses rg --files-with-matches --null output: paths
// ended by NUL. Records that are not paths under the root are dropped.
func parseFileList(q *query, out []byte) []string {
	var paths []string
	for _, rec := range strings.Split(string(out), "\x00") {
		// The marker has no NUL, so the record holding it holds both
		// partial paths around the cut.
		if strings.Contains(rec, elisionMark) {
			continue
		}
		if p, ok := cleanRecord(q, rec); ok {
			paths = append(paths, p)
		}
	}
	return paths
}

// parseCounts parses rg --count --null --with-filename output: records
// "path\x00N\n". Paths may hold newlines, so the NUL is found first.
func parseCounts(q *query, out []byte) []fileCount {
	var counts []fileCount
	for len(out) > 0 {
		i := bytes.IndexByte(out, 0)
		if i < 0 {
			break
		}
		path, rest := string(out[:i]), out[i+1:]
		j := bytes.IndexByte(rest, '\n')
		if j < 0 {
			j = len(rest)
		}
		num := string(rest[:j])
		out = rest[min(j+1, len(rest)):]
		n, err := strconv.Atoi(num)
		if p, ok := cleanRecord(q, path); ok && err == nil && n > 0 {
			counts = append(counts, fileCount{p, n})
		}
	}
	return counts
}

// rgMessage is one line of rg --json output; only the fields used here.
type rgMessage struct {
	Type string `json:"type"`
	Data struct {
		Path       rgData `json:"path"`
		Lines      rgData `json:"lines"`
		LineNumber int    `json:"line_number"`
		Submatches []struct {
			Start int `json:"start"`
		} `json:"submatches"`
	} `json:"data"`
}

// rgData is rg's encoding of bytes: text when valid UTF-8, else base64.
type rgData struct {
	Text  *string `json:"text"`
	Bytes *string `json:"bytes"`
}

func (d rgData) value() (string, bool) {
	switch {
	case d.Text != nil:
		return *d.Text, true
	case d.Bytes != nil:
		b, err := base64.StdEncoding.DecodeString(*d.Bytes)
		return string(b), err == nil
	}
	return "", false
}

func (r *rgBackend) lines(ctx context.Context, q *query, files []string, limit int) ([]fileLines, error) {
	if len(files) == 0 {
		return nil, nil
	}
	mode := []string{"--json", "--max-count", strconv.Itoa(limit),
		"--after-context", strconv.Itoa(q.after), "--before-context", strconv.Itoa(q.before)}
	var out []fileLines
	err := r.run(ctx, q, append(r.args(q, mode...), files...), func(b []byte) int {
		out = parseJSON(b)
		return len(out)
	})
	return out, err
}

// parseJSON parses rg --json output into lines per file, in the order
// the files come. Lines that are not JSON messages (a cut record, stray
// text) are skipped.
func parseJSON(out []byte) []fileLines {
	byPath := map[string]*fileLines{}
	var order []string
	for _, line := range bytes.Split(out, []byte("\n")) {
		if len(line) == 0 || line[0] != '{' {
			continue
		}
		var m rgMessage
		if json.Unmarshal(line, &m) != nil || (m.Type != "match" && m.Type != "context") {
			continue
		}
		path, ok1 := m.Data.Path.value()
		text, ok2 := m.Data.Lines.value()
		if !ok1 || !ok2 || m.Data.LineNumber < 1 {
			continue
		}
		fl := byPath[path]
		if fl == nil {
			fl = &fileLines{path: path}
			byPath[path] = fl
			order = append(order, path)
		}
		fl.lines = append(fl.lines, splitMessage(&m, text)...)
	}
	res := make([]fileLines, 0, len(order))
	for _, p := range order {
		fl := byPath[p]
		// rg prints each file's messages together and in order; sorting
		// and dropping repeats only guards the renderer's assumptions.
		slices.SortStableFunc(fl.lines, func(a, b outLine) int { return a.num - b.num })
		fl.lines = slices.CompactFunc(fl.lines, func(a, b outLine) bool { return a.num == b.num })
		res = append(res, *fl)
	}
	return res
}

// splitMessage turns one match or context message, which spans several
// lines for a multiline match, into output lines. A line is where a match
// starts when a submatch begins in it (its newline included). rg reports
// no submatches when its second, in-buffer pass misses what the line
// search found (\A, or $ on a last line without a newline), so without
// them the message's first line is where its match starts.
func splitMessage(m *rgMessage, text string) []outLine {
	text = strings.TrimSuffix(text, "\n")
	isMatch := m.Type == "match"
	var out []outLine
	off := 0
	for i, part := range strings.Split(text, "\n") {
		ln := outLine{num: m.Data.LineNumber + i, text: strings.TrimSuffix(part, "\r"), col: -1, match: isMatch}
		for _, s := range m.Data.Submatches {
			if s.Start >= off && s.Start <= off+len(part) {
				ln.start, ln.col = true, s.Start-off
				break
			}
		}
		if isMatch && i == 0 && len(m.Data.Submatches) == 0 {
			ln.start = true
		}
		out = append(out, ln)
		off += len(part) + 1
	}
	return out
}
