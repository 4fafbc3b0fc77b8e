package fs

import (
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/dsh-dev/dsh/internal/tool"
)

//go:embed write.md
var writeDescription string

// newFilePerm is the mode of files the tools create. The process umask is
// not applied: reading it is racy, and 0644 is what editors create.
const newFilePerm = 0o644

// NewWrite returns the write tool: a whole-file atomic write that
// refuses to overwrite a file the session has not freshly read.
func NewWrite(opts Options) tool.Definition {
	opts = opts.withDefaults()
	return tool.Definition{
		Name:        NameWrite,
		Description: strings.TrimSpace(writeDescription),
		Parameters: json.RawMessage(`{"type":"object","properties":{` +
			`"file_path":{"type":"string","description":"The file to write: absolute, or relative to the session working directory."},` +
			`"content":{"type":"string","description":"The complete content to write to the file."}` +
			`},"required":["file_path","content"],"additionalProperties":false}`),
		Execute: func(_ context.Context, c *tool.Call) (tool.Result, error) {
			return write(opts, c)
		},
	}
}

// writeMeta is the logged side of a write result.
type writeMeta struct {
	Path    string `json:"path"`
	Created bool   `json:"created"`
	Bytes   int    `json:"bytes"`
}

func write(o Options, c *tool.Call) (tool.Result, error) {
	a, err := ParseArgs(NameWrite, c.Arguments)
	if err != nil {
		return tool.Result{}, err
	}
	p, err := a.RequiredString("file_path")
	if err != nil {
		return tool.Result{}, err
	}
	content, err := a.RequiredString("content")
	if err != nil {
		return tool.Result{}, err
	}
	path, err := resolvePath(c, p)
	if err != nil {
		return tool.Result{}, err
	}
	fc := o.FenceFor(c)
	unlock := o.Tracker.Lock(path)
	defer unlock()
	switch fi, err := os.Stat(path); {
	case err == nil:
		if err := CheckRegular(path, fi); err != nil {
			return tool.Result{}, err
		}
		cur, err := fc.HashFile(path)
		if err != nil {
			return tool.Result{}, err
		}
		if err := o.Tracker.Check(c.SessionID, path, cur, "write"); err != nil {
			return tool.Result{}, err
		}
	case !os.IsNotExist(err):
		return tool.Result{}, statError(path, err)
	}
	data := []byte(content)
	fi, created, err := fc.WriteFileAtomic(path, data, newFilePerm)
	if err != nil {
		return tool.Result{}, err
	}
	// The model knows exactly what the file now holds, so a following
	// edit needs no re-read.
	o.Tracker.Record(c.SessionID, path, StateOf(fi, data))
	verb := "Updated"
	if created {
		verb = "Created"
	}
	res := tool.Text(fmt.Sprintf("%s %s (%d bytes, %d lines).", verb, path, len(data), LineCount(content)))
	res.Meta, _ = json.Marshal(writeMeta{Path: path, Created: created, Bytes: len(data)})
	return res, nil
}
