// Package strreplace is str_replace_based_edit_tool, the Anthropic-style
// file editor many models are trained on: one tool whose command
// argument selects view, create, str_replace or insert.
//
// Like the fs package's edit and write, it changes only what the session
// has seen: str_replace and insert refuse a file the session has not
// viewed (NOT_READ) or that changed since (STALE_READ), and create never
// overwrites. With a shared [fs.Tracker] its views and edits are recorded
// there, so a read with the fs read tool counts as a view and the fs
// tools accept files this tool showed or wrote.
package strreplace

import (
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"

	fstools "github.com/dsh-dev/dsh/internal/tools/fs"

	"github.com/dsh-dev/dsh/internal/sandbox"
	"github.com/dsh-dev/dsh/internal/tool"
)

// Name is the tool's model-facing name.
const Name = "str_replace_based_edit_tool"

// DefaultMaxOutputChars bounds the output of one call when
// Options.MaxOutputChars is zero.
const DefaultMaxOutputChars = 16000

// CodeFileExists is the error code of create on an existing path.
const CodeFileExists = "FILE_EXISTS"

// Bounds that keep a directory view and an edit cheap.
const (
	maxListed       = 2000
	snippetContext  = 4
	maxSnippetLines = 40
	newFilePerm     = 0o644
)

// clippedNote ends output cut at the limit; `<response clipped>` is the
// marker the tool's description promises.
const clippedNote = "<response clipped><NOTE>Only part of the output is shown, to save context. " +
	"Search the file with `grep -n` to find the line numbers you need, then view them with `view_range`.</NOTE>"

//go:embed strreplace.md
var description string

// Options configures the tool.
type Options struct {
	// MaxOutputChars bounds the output of one call; 0 means
	// DefaultMaxOutputChars.
	MaxOutputChars int `yaml:"max_output_chars,omitempty"`
	// MaxEditBytes is the largest file str_replace and insert load; 0
	// means fs.DefaultMaxEditBytes.
	MaxEditBytes int `yaml:"max_edit_bytes,omitempty"`
	// Tracker records the state of every file this tool views or writes,
	// which str_replace and insert check. Shared with the fs tools, a read
	// counts as a view and the other way round. Nil means a tracker of
	// this tool's own.
	Tracker *fstools.Tracker `yaml:"-"`
	// Policy returns a call's sandbox policy, which the tool applies
	// while it works (fs.Fence): views check the file they opened,
	// writes go through a directory opened beneath a writable root. Nil
	// leaves the tool unfenced.
	Policy func(c *tool.Call) sandbox.Policy `yaml:"-"`
}

// New returns the tool definition. A view changes nothing, so view calls
// are concurrency-safe; the other commands are not.
func New(opts Options) tool.Definition {
	if opts.MaxOutputChars <= 0 {
		opts.MaxOutputChars = DefaultMaxOutputChars
	}
	if opts.MaxEditBytes <= 0 {
		opts.MaxEditBytes = fstools.DefaultMaxEditBytes
	}
	if opts.Tracker == nil {
		opts.Tracker = fstools.NewTracker()
	}
	return tool.Definition{
		Name:        Name,
		Description: strings.TrimSpace(description),
		Parameters:  json.RawMessage(parameters),
		ConcurrencySafe: func(raw json.RawMessage) bool {
			var a struct {
				Command string `json:"command"`
			}
			return json.Unmarshal(raw, &a) == nil && a.Command == "view"
		},
		Execute: func(_ context.Context, c *tool.Call) (tool.Result, error) {
			return execute(opts, c)
		},
	}
}

// parameters is the catalog's schema. Every parameter but command and
// path also admits null, which models send as a placeholder for the
// parameters of other commands.
const parameters = `{"type":"object","properties":{` +
	`"command":{"type":"string","enum":["view","create","str_replace","insert"],"description":"The commands to run. Allowed options are: ` + "`view`, `create`, `str_replace`, `insert`" + `."},` +
	`"path":{"type":"string","description":"Absolute path to file or directory, e.g. ` + "`/repo/file.py` or `/repo`" + `."},` +
	`"file_text":{"oneOf":[{"type":"string"},{"type":"null"}],"description":"Required string parameter of ` + "`create`" + ` command, with the content of the file to be created. A null placeholder is treated as omitted by commands that do not use this parameter."},` +
	`"insert_line":{"oneOf":[{"type":"integer"},{"type":"null"}],"description":"Required integer parameter of ` + "`insert`" + ` command. The ` + "`new_str`" + ` will be inserted AFTER the line ` + "`insert_line` of `path`" + `. A null placeholder is treated as omitted by commands that do not use this parameter."},` +
	`"new_str":{"oneOf":[{"type":"string"},{"type":"null"}],"description":"Optional string parameter of ` + "`str_replace`" + ` command containing the new string (if omitted, no string will be added). Required string parameter of ` + "`insert`" + ` command containing the string to insert. A null placeholder is accepted only by commands that do not use this parameter."},` +
	`"old_str":{"oneOf":[{"type":"string"},{"type":"null"}],"description":"Required string parameter of ` + "`str_replace` command containing the string in `path`" + ` to replace. A null placeholder is treated as omitted by commands that do not use this parameter."},` +
	`"view_range":{"oneOf":[{"type":"array","items":{"type":"integer"}},{"type":"null"}],"description":"Optional parameter of ` + "`view` command when `path`" + ` points to a file. If omitted or null, the full file is shown. If provided, the file will be shown in the indicated line number range, e.g. [11, 12] will show lines 11 and 12. Indexing at 1 to start. Setting ` + "`[start_line, -1]`" + ` shows all lines from ` + "`start_line`" + ` to the end of the file."}` +
	`},"required":["command","path"]}`

// meta is the logged side of a result.
type meta struct {
	Command string `json:"command"`
	Path    string `json:"path"`
	Diff    string `json:"diff,omitempty"`
}

func execute(o Options, c *tool.Call) (tool.Result, error) {
	a, err := fstools.ParseArgs(Name, c.Arguments)
	if err != nil {
		return tool.Result{}, err
	}
	cmd, err := a.RequiredString("command")
	if err != nil {
		return tool.Result{}, err
	}
	p, err := a.RequiredString("path")
	if err != nil {
		return tool.Result{}, err
	}
	path, err := fstools.ResolvePath(c, p)
	if err != nil {
		return tool.Result{}, err
	}
	fc := fstools.NewFence(o.Policy, c)
	var text, diff string
	switch cmd {
	case "view":
		text, err = view(o, fc, c, a, path)
	case "create":
		text, diff, err = create(o, fc, c, a, path)
	case "str_replace":
		text, diff, err = strReplace(o, fc, c, a, path)
	case "insert":
		text, diff, err = insert(o, fc, c, a, path)
	default:
		err = a.Invalid("unknown command %q; allowed options are: view, create, str_replace, insert", cmd)
	}
	if err != nil {
		return tool.Result{}, err
	}
	res := tool.Text(text)
	res.Meta, _ = json.Marshal(meta{Command: cmd, Path: path, Diff: diff})
	return res, nil
}

// required returns a string parameter the command needs: a null counts as
// missing.
func required(a fstools.Args, name, cmd string) (string, error) {
	s, ok, err := a.String(name)
	if err == nil && !ok {
		err = a.Invalid("parameter `%s` is required for command: %s", name, cmd)
	}
	return s, err
}

func view(o Options, fc fstools.Fence, c *tool.Call, a fstools.Args, path string) (string, error) {
	rng, hasRange, err := a.Ints("view_range")
	if err != nil {
		return "", err
	}
	if err := fc.CheckRead(path); err != nil {
		return "", err
	}
	fi, err := os.Stat(path)
	if err == nil && fi.IsDir() {
		if hasRange {
			return "", a.Invalid("the `view_range` parameter is not allowed when `path` points to a directory")
		}
		return listDir(o, fc, path)
	}
	vo := fstools.ViewOptions{Offset: 1, MaxBytes: o.MaxOutputChars, Fence: fc}
	if hasRange {
		if len(rng) != 2 {
			return "", a.Invalid("`view_range` must be a list of two integers, [start_line, end_line]")
		}
		start, end := rng[0], rng[1]
		if start < 1 || (end != -1 && end < start) {
			return "", a.Invalid("invalid `view_range` %v: the start must be at least 1 and the end at least the start, or -1 for the end of the file", rng)
		}
		vo.Offset = start
		if end != -1 {
			vo.Limit = end - start + 1
		}
	}
	v, err := fstools.ViewFile(path, vo)
	if err != nil {
		return "", err
	}
	o.Tracker.Record(c.SessionID, path, v.State)
	if hasRange && v.TotalLines > 0 && vo.Offset > v.TotalLines {
		return "", a.Invalid("invalid `view_range` %v: the file has only %d lines", rng, v.TotalLines)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Here's the result of running `cat -n` on %s:\n", path)
	if v.TotalLines == 0 {
		b.WriteString("(the file is empty)\n")
	}
	b.WriteString(v.Text)
	if v.ByteCapped {
		b.WriteString(clippedNote)
	}
	return strings.TrimSuffix(b.String(), "\n"), nil
}

func create(o Options, fc fstools.Fence, c *tool.Call, a fstools.Args, path string) (string, string, error) {
	content, err := required(a, "file_text", "create")
	if err != nil {
		return "", "", err
	}
	unlock := o.Tracker.Lock(path)
	defer unlock()
	if _, err := os.Lstat(path); err == nil {
		return "", "", tool.Errorf(CodeFileExists,
			"file already exists at: %s. Cannot overwrite files using command `create`; use `str_replace` or `insert` to change it", path)
	}
	r := fstools.NewReplacement("", "", content, []int{0})
	if err := commit(o, fc, c, path, r.After); err != nil {
		return "", "", err
	}
	return fmt.Sprintf("File created successfully at: %s", path), r.Diff(path), nil
}

func strReplace(o Options, fc fstools.Fence, c *tool.Call, a fstools.Args, path string) (string, string, error) {
	old, err := required(a, "old_str", "str_replace")
	if err != nil {
		return "", "", err
	}
	if old == "" {
		return "", "", a.Invalid("parameter `old_str` must not be empty for command: str_replace")
	}
	// new_str may be omitted (delete the match) but, unlike the
	// parameters of other commands, not null: the catalog reserves null
	// placeholders for parameters a command does not use.
	if a.IsNull("new_str") {
		return "", "", a.Invalid("parameter `new_str` is null; omit it to delete the match, or give a string")
	}
	repl, _, err := a.String("new_str")
	if err != nil {
		return "", "", err
	}
	unlock := o.Tracker.Lock(path)
	defer unlock()
	content, cur, err := fc.ReadText(path, o.MaxEditBytes)
	if err != nil {
		return "", "", err
	}
	if err := fresh(o, c, path, cur, "str_replace"); err != nil {
		return "", "", err
	}
	o2, r2 := fstools.AdaptLineEndings(content, old), fstools.AdaptLineEndings(content, repl)
	offs := fstools.FindAll(content, o2)
	if len(offs) == 0 && o2 != old {
		// Mixed line endings: try the strings as given.
		o2, r2 = old, repl
		offs = fstools.FindAll(content, o2)
	}
	switch {
	case len(offs) == 0:
		return "", "", tool.Errorf(fstools.CodeNoMatch,
			"no replacement was performed: old_str `%s` did not appear verbatim in %s", old, path)
	case len(offs) > 1:
		lines := make([]string, 0, len(offs))
		for _, off := range offs {
			lines = append(lines, strconv.Itoa(fstools.LineOf(content, off)))
		}
		return "", "", tool.Errorf(fstools.CodeNotUnique,
			"no replacement was performed: multiple occurrences of old_str `%s` in lines %s. Include more context in old_str to make it unique", old, strings.Join(lines, ", "))
	}
	r := fstools.NewReplacement(content, o2, r2, offs)
	if err := commit(o, fc, c, path, r.After); err != nil {
		return "", "", err
	}
	ch := r.Changes[0]
	return edited(path, r.After, ch.NewStart+1, ch.NewEnd), r.Diff(path), nil
}

func insert(o Options, fc fstools.Fence, c *tool.Call, a fstools.Args, path string) (string, string, error) {
	line, ok, err := a.Int("insert_line")
	if err != nil {
		return "", "", err
	}
	if !ok {
		return "", "", a.Invalid("parameter `insert_line` is required for command: insert")
	}
	text, ok, err := a.String("new_str")
	if err == nil && !ok {
		// insert_text is the name newer versions of this tool use; models
		// trained on them send it.
		text, ok, err = a.String("insert_text")
	}
	if err != nil {
		return "", "", err
	}
	if !ok {
		return "", "", a.Invalid("parameter `new_str` is required for command: insert")
	}
	unlock := o.Tracker.Lock(path)
	defer unlock()
	content, cur, err := fc.ReadText(path, o.MaxEditBytes)
	if err != nil {
		return "", "", err
	}
	if err := fresh(o, c, path, cur, "insert"); err != nil {
		return "", "", err
	}
	n := fstools.LineCount(content)
	terminated := strings.HasSuffix(content, "\n")
	// The reference implementation splits the file on "\n", so a file
	// ending in a newline has an empty line after its last one, and
	// insert_line may name it: n+1 inserts at the end, as n does.
	last := n
	if terminated {
		last = n + 1
	}
	if line < 0 || line > last {
		return "", "", a.Invalid("invalid `insert_line` parameter: %d. It should be within the range of lines of the file: [0, %d]", line, last)
	}
	line = min(line, n)
	eol := fstools.LineEnding(content)
	text = fstools.AdaptLineEndings(content, text)
	if !strings.HasSuffix(text, "\n") {
		text += eol
	}
	off := fstools.LineOffset(content, line)
	if line == n && content != "" && !terminated {
		// After an unterminated last line: end that line, and leave the
		// new last line unterminated, as the file's was.
		off, text = len(content), eol+trimEOL(text)
	}
	r := fstools.NewReplacement(content, "", text, []int{off})
	if err := commit(o, fc, c, path, r.After); err != nil {
		return "", "", err
	}
	return edited(path, r.After, line+1, line+fstools.LineCount(strings.TrimPrefix(text, eol))), r.Diff(path), nil
}

// trimEOL removes one trailing line ending.
func trimEOL(s string) string {
	if t, ok := strings.CutSuffix(s, "\r\n"); ok {
		return t
	}
	return strings.TrimSuffix(s, "\n")
}

// fresh refuses to change a file the session has not viewed (with view,
// or the fs read tool sharing the tracker) or that changed since: the
// rule, and the error codes, of the fs edit and write tools.
func fresh(o Options, c *tool.Call, path string, cur fstools.FileState, cmd string) error {
	seen, ok := o.Tracker.Lookup(c.SessionID, path)
	switch {
	case !ok:
		return tool.Errorf(fstools.CodeNotRead,
			"%s refused: %s has not been viewed in this session. View it first with `view` (a `view_range` around the lines to change is enough), then retry",
			cmd, path)
	case seen.Hash != cur.Hash:
		return tool.Errorf(fstools.CodeStaleRead,
			"%s refused: %s has changed since it was last viewed (it may have been edited by the user, a command or another agent). View it again to see the current content, then retry",
			cmd, path)
	}
	return nil
}

// commit writes content to path atomically and records the new state.
func commit(o Options, fc fstools.Fence, c *tool.Call, path, content string) error {
	data := []byte(content)
	fi, _, err := fc.WriteFileAtomic(path, data, newFilePerm)
	if err != nil {
		return err
	}
	o.Tracker.Record(c.SessionID, path, fstools.StateOf(fi, data))
	return nil
}

// edited is the result of a change: a numbered snippet of lines
// first..last of the new content with context.
func edited(path, content string, first, last int) string {
	return fmt.Sprintf("The file %s has been edited. Here's the result of running `cat -n` on a snippet of %s:\n%s"+
		"Review the changes and make sure they are as expected. Edit the file again if necessary.",
		path, path, fstools.Snippet(content, first, last, snippetContext, maxSnippetLines))
}
