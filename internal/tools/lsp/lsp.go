// Package lsptool is the model-facing lsp tool: goToDefinition,
// findReferences, goToImplementation and hover through the session's
// language servers (internal/lsp).
package lsptool

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"unicode/utf8"

	"github.com/dsh-dev/dsh/internal/lsp"
	"github.com/dsh-dev/dsh/internal/tool"
	"github.com/dsh-dev/dsh/internal/tools/fs"
)

// Name is the tool's model-facing name.
const Name = "lsp"

// Defaults of the output bounds.
const (
	DefaultMaxResults    = 100
	DefaultMaxHoverChars = 8000
	DefaultMaxLineChars  = 200
)

//go:embed lsp.md
var description string

// Options configures the tool.
type Options struct {
	// Manager runs the session's servers. Required.
	Manager *lsp.Manager
	// MaxResults bounds the locations listed (references); the count is
	// always given.
	MaxResults int
	// MaxHoverChars bounds the hover text.
	MaxHoverChars int
	// MaxLineChars bounds each source line shown.
	MaxLineChars int
}

// New returns the lsp tool definition.
func New(o Options) tool.Definition {
	if o.MaxResults <= 0 {
		o.MaxResults = DefaultMaxResults
	}
	if o.MaxHoverChars <= 0 {
		o.MaxHoverChars = DefaultMaxHoverChars
	}
	if o.MaxLineChars <= 0 {
		o.MaxLineChars = DefaultMaxLineChars
	}
	exts := strings.Join(o.Manager.Extensions(), ", ")
	if exts == "" {
		exts = "none"
	}
	ops, _ := json.Marshal(lsp.Operations)
	start, request := o.Manager.Timeouts()
	return tool.Definition{
		Name:        Name,
		Description: strings.ReplaceAll(strings.TrimSpace(description), "{{EXTENSIONS}}", exts),
		Parameters: json.RawMessage(`{"type":"object","properties":{` +
			`"operation":{"type":"string","enum":` + string(ops) + `,"description":"What to ask about the symbol at the position."},` +
			`"file_path":{"type":"string","description":"The source file: absolute, or relative to the session working directory."},` +
			`"line":{"type":"integer","minimum":1,"description":"The 1-based line of the symbol."},` +
			`"character":{"type":"integer","minimum":1,"description":"The 1-based character of the symbol on its line, in UTF-16 code units."}` +
			`},"required":["operation","file_path","line","character"],"additionalProperties":false}`),
		ConcurrencySafe: func(json.RawMessage) bool { return true },
		// The first call may start a server and then wait for its answer;
		// the manager's own limits come first and give coded errors.
		Timeout: start + request + tool.DefaultTimeout/4,
		Execute: func(ctx context.Context, c *tool.Call) (tool.Result, error) {
			return execute(ctx, o, c)
		},
	}
}

// meta is the logged side of a result.
type meta struct {
	Operation string `json:"operation"`
	Path      string `json:"path"`
	Line      int    `json:"line"`
	Character int    `json:"character"`
	Server    string `json:"server"`
	Count     int    `json:"count"`
	Shown     int    `json:"shown,omitempty"`
}

func execute(ctx context.Context, o Options, c *tool.Call) (tool.Result, error) {
	a, err := fs.ParseArgs(Name, c.Arguments)
	if err != nil {
		return tool.Result{}, err
	}
	op, err := a.RequiredString("operation")
	if err != nil {
		return tool.Result{}, err
	}
	if !containsOp(op) {
		return tool.Result{}, a.Invalid("operation must be one of %s", strings.Join(lsp.Operations, ", "))
	}
	p, err := a.RequiredString("file_path")
	if err != nil {
		return tool.Result{}, err
	}
	line, okLine, err := a.Int("line")
	if err != nil {
		return tool.Result{}, err
	}
	char, okChar, err := a.Int("character")
	if err != nil {
		return tool.Result{}, err
	}
	if !okLine || !okChar {
		return tool.Result{}, a.Invalid("line and character are required (both count from 1)")
	}
	path, err := fs.ResolvePath(c, p)
	if err != nil {
		return tool.Result{}, err
	}
	ans, err := o.Manager.Do(ctx, lsp.Query{Op: op, Path: path, Line: line, Character: char})
	if err != nil {
		var le *lsp.Error
		if errors.As(err, &le) {
			return tool.Result{}, &tool.Error{Name: "LSPError", Code: le.Code, Message: le.Message}
		}
		return tool.Result{}, err
	}
	cwd := c.Cwd
	if real, err := filepath.EvalSymlinks(cwd); err == nil {
		cwd = real // answers carry paths with symlinks resolved
	}
	here := fmt.Sprintf("%s:%d:%d", show(cwd, ans.Path), line, char)
	m := meta{Operation: op, Path: ans.Path, Line: line, Character: char, Server: ans.Server}
	var b strings.Builder
	if op == lsp.OpHover {
		text := strings.TrimSpace(ans.Hover)
		if text == "" {
			fmt.Fprintf(&b, "No hover information at %s.", here)
		} else {
			m.Count = 1
			fmt.Fprintf(&b, "Hover at %s:\n", here)
			if n := utf8.RuneCountInString(text); n > o.MaxHoverChars {
				text = string([]rune(text)[:o.MaxHoverChars]) + fmt.Sprintf("\n[Hover text truncated at %d of %d characters.]", o.MaxHoverChars, n)
			}
			b.WriteString(text)
		}
	} else {
		m.Count = len(ans.Places)
		noun := map[string]string{lsp.OpDefinition: "definition", lsp.OpReferences: "reference", lsp.OpImplementation: "implementation"}[op]
		if m.Count == 0 {
			fmt.Fprintf(&b, "No %s found for the symbol at %s.", noun, here)
		} else {
			plural := noun
			if m.Count != 1 {
				plural += "s"
			}
			fmt.Fprintf(&b, "%d %s of the symbol at %s", m.Count, plural, here)
			if op == lsp.OpReferences {
				b.WriteString(" (its declaration included)")
			}
			b.WriteString(":")
			shown := ans.Places[:min(len(ans.Places), o.MaxResults)]
			m.Shown = len(shown)
			for _, pl := range shown {
				fmt.Fprintf(&b, "\n%s:%d:%d", show(cwd, pl.Path), pl.Line, pl.Character)
				if s := snippet(pl.Text, o.MaxLineChars); s != "" {
					b.WriteString(": " + s)
				}
			}
			if len(shown) < m.Count {
				fmt.Fprintf(&b, "\n[Showing the first %d of %d %ss; use grep to narrow them down.]", len(shown), m.Count, noun)
			}
		}
	}
	res := tool.Text(b.String())
	res.Meta, _ = json.Marshal(m)
	return res, nil
}

func containsOp(op string) bool {
	for _, o := range lsp.Operations {
		if o == op {
			return true
		}
	}
	return false
}

// show gives path relative to the working directory when it is under it.
func show(cwd, path string) string {
	if cwd == "" {
		return path
	}
	rel, err := filepath.Rel(cwd, path)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return path
	}
	return rel
}

// snippet is the source line trimmed and bounded to max characters.
func snippet(line string, max int) string {
	s := strings.TrimSpace(strings.ToValidUTF8(line, "\uFFFD"))
	if utf8.RuneCountInString(s) > max {
		s = string([]rune(s)[:max]) + "…"
	}
	return s
}
