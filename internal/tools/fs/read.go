package fs

import (
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/dsh-dev/dsh/internal/tool"
)

//go:embed read.md
var readDescription string

// NewRead returns the read tool: a line-numbered, bounded view of a text
// file that records the read in opts.Tracker. Reads never change
// anything, so calls may run concurrently.
func NewRead(opts Options) tool.Definition {
	opts = opts.withDefaults()
	return tool.Definition{
		Name: NameRead,
		Description: strings.NewReplacer(
			"{{MAX_LINES}}", strconv.Itoa(opts.MaxLines),
			"{{MAX_LINE_CHARS}}", strconv.Itoa(opts.MaxLineChars),
			"{{MAX_BYTES}}", strconv.Itoa(opts.MaxReadBytes),
		).Replace(strings.TrimSpace(readDescription)),
		Parameters: json.RawMessage(fmt.Sprintf(`{"type":"object","properties":{`+
			`"file_path":{"type":"string","description":"The file to read: absolute, or relative to the session working directory."},`+
			`"offset":{"type":"integer","minimum":1,"description":"The 1-based line number to start reading from (default 1)."},`+
			`"limit":{"type":"integer","minimum":1,"maximum":%d,"description":"The number of lines to read (default and maximum %d)."}`+
			`},"required":["file_path"],"additionalProperties":false}`, opts.MaxLines, opts.MaxLines)),
		ConcurrencySafe: func(json.RawMessage) bool { return true },
		Execute: func(_ context.Context, c *tool.Call) (tool.Result, error) {
			return read(opts, c)
		},
	}
}

// readMeta is the logged side of a read result.
type readMeta struct {
	Path       string `json:"path"`
	FirstLine  int    `json:"firstLine"`
	LastLine   int    `json:"lastLine"`
	TotalLines int    `json:"totalLines"`
	Truncated  bool   `json:"truncated,omitempty"`
}

func read(o Options, c *tool.Call) (tool.Result, error) {
	a, err := ParseArgs(NameRead, c.Arguments)
	if err != nil {
		return tool.Result{}, err
	}
	p, err := a.RequiredString("file_path")
	if err != nil {
		return tool.Result{}, err
	}
	offset, _, err := a.Int("offset")
	if err != nil {
		return tool.Result{}, err
	}
	if offset < 0 {
		return tool.Result{}, a.Invalid("offset must be a line number of at least 1")
	}
	// offset 0 is taken as 1: models mix up 0- and 1-based lines, and
	// refusing would only cost a retry.
	offset = max(offset, 1)
	limit, hasLimit, err := a.Int("limit")
	if err != nil {
		return tool.Result{}, err
	}
	var notes []string
	switch {
	case !hasLimit:
		limit = o.MaxLines
	case limit < 1:
		return tool.Result{}, a.Invalid("limit must be at least 1")
	case limit > o.MaxLines:
		notes = append(notes, fmt.Sprintf("[limit %d is over the maximum of %d; used %d.]", limit, o.MaxLines, o.MaxLines))
		limit = o.MaxLines
	}
	path, err := resolvePath(c, p)
	if err != nil {
		return tool.Result{}, err
	}
	v, err := ViewFile(path, ViewOptions{Offset: offset, Limit: limit, MaxBytes: o.MaxReadBytes, MaxLineChars: o.MaxLineChars, Fence: o.FenceFor(c)})
	if err != nil {
		return tool.Result{}, err
	}
	// Any read, even of a part or past the end, counts: the model has
	// seen the file as it is now and chose what to look at.
	o.Tracker.Record(c.SessionID, path, v.State)

	var b strings.Builder
	switch {
	case v.TotalLines == 0:
		fmt.Fprintf(&b, "[The file %s is empty.]\n", path)
	case v.Last < v.First:
		fmt.Fprintf(&b, "[The file has %d lines; offset %d is past its end. Use an offset from 1 to %d.]\n", v.TotalLines, offset, v.TotalLines)
	default:
		b.WriteString(v.Text)
	}
	truncated := v.Last >= v.First && v.Last < v.TotalLines
	switch {
	case truncated && v.ByteCapped:
		fmt.Fprintf(&b, "[Output limit of %d bytes reached: showing lines %d-%d of %d. To read more, call read with offset=%d.]\n",
			o.MaxReadBytes, v.First, v.Last, v.TotalLines, v.Last+1)
	case truncated:
		fmt.Fprintf(&b, "[Showing lines %d-%d of %d. To read more, call read with offset=%d.]\n", v.First, v.Last, v.TotalLines, v.Last+1)
	case v.ByteCapped:
		// The only line shown did not fit whole.
		fmt.Fprintf(&b, "[Output limit of %d bytes reached inside line %d.]\n", o.MaxReadBytes, v.Last)
	}
	if v.LongLines > 0 {
		fmt.Fprintf(&b, "[%d line(s) longer than %d characters were truncated; use bash (for example `cut -c`) to see all of a long line.]\n", v.LongLines, o.MaxLineChars)
	}
	if v.InvalidUTF8 {
		b.WriteString("[The file is not valid UTF-8: invalid bytes are shown as \uFFFD.]\n")
	}
	for _, n := range notes {
		b.WriteString(n + "\n")
	}
	res := tool.Text(strings.TrimSuffix(b.String(), "\n"))
	res.Meta, _ = json.Marshal(readMeta{Path: path, FirstLine: v.First, LastLine: v.Last, TotalLines: v.TotalLines, Truncated: truncated || v.ByteCapped})
	return res, nil
}
