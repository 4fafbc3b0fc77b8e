package fs

import (
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"

	"github.com/dsh-dev/dsh/internal/tool"
)

//go:embed edit.md
var editDescription string

// Bounds on what an edit result shows.
const (
	snippetContext   = 3
	maxSnippetLines  = 30
	maxListedMatches = 10
)

// NewEdit returns the edit tool: a literal, unique-by-default string
// replacement in a file the session has freshly read.
func NewEdit(opts Options) tool.Definition {
	opts = opts.withDefaults()
	return tool.Definition{
		Name:        NameEdit,
		Description: strings.TrimSpace(editDescription),
		Parameters: json.RawMessage(`{"type":"object","properties":{` +
			`"file_path":{"type":"string","description":"The file to edit: absolute, or relative to the session working directory."},` +
			`"old_string":{"type":"string","description":"The exact text to replace."},` +
			`"new_string":{"type":"string","description":"The text to replace it with (must differ from old_string)."},` +
			`"replace_all":{"type":"boolean","description":"Replace every occurrence of old_string (default false)."}` +
			`},"required":["file_path","old_string","new_string"],"additionalProperties":false}`),
		Execute: func(_ context.Context, c *tool.Call) (tool.Result, error) {
			return edit(opts, c)
		},
	}
}

// editMeta is the logged side of an edit result.
type editMeta struct {
	Path         string `json:"path"`
	Replacements int    `json:"replacements"`
	Diff         string `json:"diff"`
}

type editArgs struct {
	path, old, new string
	all            bool
}

func parseEditArgs(c *tool.Call) (editArgs, error) {
	var e editArgs
	a, err := ParseArgs(NameEdit, c.Arguments)
	if err != nil {
		return e, err
	}
	p, err := a.RequiredString("file_path")
	if err != nil {
		return e, err
	}
	if e.old, err = a.RequiredString("old_string"); err != nil {
		return e, err
	}
	if e.new, err = a.RequiredString("new_string"); err != nil {
		return e, err
	}
	if e.all, _, err = a.Bool("replace_all"); err != nil {
		return e, err
	}
	if e.old == e.new {
		return e, a.Invalid("old_string and new_string are identical, so the edit would change nothing")
	}
	e.path, err = resolvePath(c, p)
	return e, err
}

func edit(o Options, c *tool.Call) (tool.Result, error) {
	e, err := parseEditArgs(c)
	if err != nil {
		return tool.Result{}, err
	}
	unlock := o.Tracker.Lock(e.path)
	defer unlock()
	if _, err := os.Stat(e.path); os.IsNotExist(err) && e.old == "" {
		return editWrite(o, c, e.path, NewReplacement("", "", e.new, []int{0}))
	}
	content, cur, err := o.FenceFor(c).ReadText(e.path, o.MaxEditBytes)
	if err != nil {
		return tool.Result{}, err
	}
	if err := o.Tracker.Check(c.SessionID, e.path, cur, "edit"); err != nil {
		return tool.Result{}, err
	}
	if e.old == "" {
		if content != "" {
			return tool.Result{}, tool.Errorf(tool.CodeInvalidArgs,
				"invalid arguments for edit: old_string is empty but %s is not empty. Give the text to replace, or use write to replace the whole file", e.path)
		}
		return editWrite(o, c, e.path, NewReplacement("", "", e.new, []int{0}))
	}
	old, repl := AdaptLineEndings(content, e.old), AdaptLineEndings(content, e.new)
	offs := FindAll(content, old)
	if len(offs) == 0 && old != e.old {
		// A file with mixed line endings: try the strings as given.
		old, repl = e.old, e.new
		offs = FindAll(content, old)
	}
	switch {
	case len(offs) == 0:
		return tool.Result{}, noMatch(e.path, content, e.old)
	case len(offs) > 1 && !e.all:
		return tool.Result{}, tool.Errorf(CodeNotUnique,
			"old_string occurs %d times in %s (at lines %s). Include more of the surrounding lines to make it unique, or set replace_all to true to replace every occurrence",
			len(offs), e.path, matchLines(content, offs))
	}
	return editWrite(o, c, e.path, NewReplacement(content, old, repl, offs))
}

// editWrite writes r.After to path and renders the result.
func editWrite(o Options, c *tool.Call, path string, r Replacement) (tool.Result, error) {
	data := []byte(r.After)
	fi, created, err := o.FenceFor(c).WriteFileAtomic(path, data, newFilePerm)
	if err != nil {
		return tool.Result{}, err
	}
	o.Tracker.Record(c.SessionID, path, StateOf(fi, data))

	var b strings.Builder
	switch {
	case created:
		fmt.Fprintf(&b, "Created %s (%d lines).", path, LineCount(r.After))
	case len(r.Offsets) == 1:
		fmt.Fprintf(&b, "Edited %s: replaced 1 occurrence.", path)
	default:
		fmt.Fprintf(&b, "Edited %s: replaced %d occurrences.", path, len(r.Offsets))
	}
	if len(r.Changes) > 0 && r.After != "" {
		ch := r.Changes[0]
		which := ""
		if len(r.Changes) > 1 {
			which = fmt.Sprintf(" (the first of %d changed regions)", len(r.Changes))
		}
		fmt.Fprintf(&b, "\nThe edited region%s now reads:\n", which)
		b.WriteString(strings.TrimSuffix(Snippet(r.After, ch.NewStart+1, ch.NewEnd, snippetContext, maxSnippetLines), "\n"))
	}
	res := tool.Text(b.String())
	res.Meta, _ = json.Marshal(editMeta{Path: path, Replacements: len(r.Offsets), Diff: r.Diff(path)})
	return res, nil
}

// matchLines lists the line numbers of the first few offsets.
func matchLines(content string, offs []int) string {
	var parts []string
	line, at := 1, 0
	for i, off := range offs {
		if i == maxListedMatches {
			parts = append(parts, "…")
			break
		}
		line += strings.Count(content[at:off], "\n")
		at = off
		parts = append(parts, strconv.Itoa(line))
	}
	return strings.Join(parts, ", ")
}

// numberPrefix matches the `cat -n` prefix read puts before each line.
var numberPrefix = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`(?m)^ *\d+\t`) })

// noMatch explains a failed match as specifically as it can: the usual
// causes are copied line-number prefixes and differing whitespace.
func noMatch(path, content, old string) error {
	msg := fmt.Sprintf("old_string was not found in %s. It must match the file exactly, including whitespace, indentation and line breaks", path)
	lines := strings.Split(strings.ReplaceAll(old, "\r\n", "\n"), "\n")
	if numberPrefix().MatchString(old) && len(numberPrefix().FindAllString(old, -1)) == len(lines) {
		return tool.Errorf(CodeNoMatch, "%s. old_string seems to include the line-number prefixes that read shows (a number and a tab at the start of each line); leave them out", msg)
	}
	for _, l := range lines {
		want := strings.TrimSpace(l)
		if want == "" {
			continue
		}
		// Look for the first non-blank line of old_string, ignoring
		// surrounding whitespace, to point at the likely spot.
		for i, cl := range strings.Split(content, "\n") {
			if strings.TrimSpace(cl) == want {
				return tool.Errorf(CodeNoMatch, "%s. Line %d has the text of the first line of old_string but the rest differs (whitespace, indentation or other lines); read the file around line %d and copy the text exactly", msg, i+1, i+1)
			}
		}
		break
	}
	return tool.Errorf(CodeNoMatch, "%s. Read the file again and copy the text to replace exactly", msg)
}
