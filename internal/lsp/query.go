package lsp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Query is one request of the tool: Line and Character are 1-based, the
// character in UTF-16 code units.
type Query struct {
	Op        string
	Path      string // absolute
	Line      int
	Character int
}

// Place is a result location: Path absolute, Line and Character 1-based
// (UTF-16 code units), Text the source line (without its terminator) when
// the file could be read.
type Place struct {
	Path      string
	Line      int
	Character int
	Text      string
}

// Answer is the outcome of a Query.
type Answer struct {
	// Path is the queried file with symlinks resolved.
	Path string
	// Server is the command line of the server that answered.
	Server string
	// Places are the locations (definition, references, implementation),
	// sorted by path and position, without duplicates.
	Places []Place
	// Hover is the hover text (markdown or plain text).
	Hover string
}

// Do runs q against the server configured for the file's extension,
// starting it if needed. Failures are *Error with a stable code, or the
// context's error when ctx ended.
func (m *Manager) Do(ctx context.Context, q Query) (Answer, error) {
	method, ok := methods[q.Op]
	if !ok {
		return Answer{}, fmt.Errorf("lsp: unknown operation %q (want one of %s)", q.Op, strings.Join(Operations, ", "))
	}
	path, err := m.fence(q.Path)
	if err != nil {
		return Answer{}, err
	}
	ext := filepath.Ext(path)
	cfg, ok := m.opts.Servers[ext]
	if !ok {
		cfg, ok = m.opts.Servers[strings.ToLower(ext)]
	}
	if !ok {
		return Answer{}, m.unconfigured(path, ext)
	}
	cfg.ext = ext
	text, err := m.readFile(path)
	if err != nil {
		return Answer{}, err
	}
	lines := Lines(string(text))
	line, col, err := checkPosition(lines, q, path)
	if err != nil {
		return Answer{}, err
	}
	s, err := m.server(ctx, cfg, m.rootFor(cfg, path))
	if err != nil {
		return Answer{}, err
	}
	ans := Answer{Path: path, Server: cfg.describe()}
	rctx, cancel := context.WithTimeout(ctx, m.opts.RequestTimeout)
	defer cancel()
	if err := s.sync(rctx, path, cfg.languageID(ext), text, m.readFile); err != nil {
		return Answer{}, m.callFailure(ctx, s, "didOpen", err)
	}
	params := map[string]any{
		"textDocument": map[string]string{"uri": FileURI(path)},
		"position":     Pos{Line: line, Character: Convert(lines[line], col, EncodingUTF16, s.encoding)},
	}
	if q.Op == OpReferences {
		params["context"] = map[string]bool{"includeDeclaration": true}
	}
	var raw json.RawMessage
	if err := s.conn.Call(rctx, method, params, &raw); err != nil {
		return Answer{}, m.callFailure(ctx, s, method, err)
	}
	if q.Op == OpHover {
		h, err := decodeHover(raw)
		if err != nil {
			return Answer{}, errorf(CodeRequestFailed, err, err.Error())
		}
		ans.Hover = h
		return ans, nil
	}
	locs, err := decodeLocations(raw)
	if err != nil {
		return Answer{}, errorf(CodeRequestFailed, err, err.Error())
	}
	ans.Places = m.places(locs, s.encoding, path, lines)
	return ans, nil
}

// callFailure codes the failure of a request; when the caller's own
// context ended, that is the answer.
func (m *Manager) callFailure(ctx context.Context, s *server, what string, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return s.failure(what, err, m.opts.RequestTimeout)
}

// fence resolves symlinks and refuses a file outside the workspace.
func (m *Manager) fence(path string) (string, error) {
	if !filepath.IsAbs(path) {
		return "", errorf(CodeFile, nil, fmt.Sprintf("%s is not an absolute path", path))
	}
	real, err := filepath.EvalSymlinks(filepath.Clean(path))
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return "", errorf(CodeFile, err, fmt.Sprintf("%s does not exist", path))
		}
		return "", errorf(CodeFile, err, fmt.Sprintf("cannot access %s: %v", path, err))
	}
	if !within(m.workspace, real) {
		return "", errorf(CodeOutsideWorkspace, nil, fmt.Sprintf("%s is outside the workspace %s; the lsp tool only serves files under it", path, m.workspace))
	}
	return real, nil
}

func (m *Manager) unconfigured(path, ext string) error {
	have := "none"
	if exts := m.Extensions(); len(exts) > 0 {
		have = strings.Join(exts, ", ")
	}
	what := "files with extension " + ext
	if ext == "" {
		what = "files without an extension"
	}
	return errorf(CodeUnavailable, nil, fmt.Sprintf("no language server is configured for %s (%s); configured: %s. Use grep and read instead, or add a server under servers in the lsp profile row", what, filepath.Base(path), have))
}

func (m *Manager) readFile(path string) ([]byte, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, errorf(CodeFile, err, fmt.Sprintf("cannot access %s: %v", path, err))
	}
	if fi.IsDir() {
		return nil, errorf(CodeFile, nil, fmt.Sprintf("%s is a directory; give a source file", path))
	}
	if fi.Size() > m.opts.MaxFileBytes {
		return nil, errorf(CodeFile, nil, fmt.Sprintf("%s is %d bytes, over the %d-byte limit for language servers", path, fi.Size(), m.opts.MaxFileBytes))
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, errorf(CodeFile, err, fmt.Sprintf("cannot read %s: %v", path, err))
	}
	return b, nil
}

// checkPosition validates the 1-based UTF-16 position against the file and
// returns it 0-based.
func checkPosition(lines []string, q Query, path string) (line, col int, err error) {
	name := filepath.Base(path)
	if q.Line < 1 || q.Line > len(lines) {
		return 0, 0, errorf(CodeInvalidPosition, nil, fmt.Sprintf("line %d is not in %s, which has %d line(s); lines count from 1", q.Line, name, len(lines)))
	}
	text := lines[q.Line-1]
	n := UTF16Len(text)
	if q.Character < 1 || q.Character > n+1 {
		return 0, 0, errorf(CodeInvalidPosition, nil, fmt.Sprintf("character %d is not on line %d of %s, which is %d UTF-16 code unit(s) long; characters count from 1 up to %d", q.Character, q.Line, name, n, n+1))
	}
	if _, ok := ByteOffset(text, q.Character-1, EncodingUTF16); !ok {
		return 0, 0, errorf(CodeInvalidPosition, nil, fmt.Sprintf("character %d of line %d of %s falls inside a character that takes two UTF-16 code units; use %d", q.Character, q.Line, name, q.Character-1))
	}
	return q.Line - 1, q.Character - 1, nil
}

// places converts server locations to sorted, unique 1-based UTF-16 places
// with their source lines.
func (m *Manager) places(locs []Location, enc, queried string, queriedLines []string) []Place {
	files := map[string][]string{queried: queriedLines}
	out := make([]Place, 0, len(locs))
	for _, l := range locs {
		lines, ok := files[l.Path]
		if !ok {
			if b, err := m.readFile(l.Path); err == nil {
				lines = Lines(string(b))
			}
			files[l.Path] = lines
		}
		p := Place{Path: l.Path, Line: l.Pos.Line + 1, Character: l.Pos.Character + 1}
		if l.Pos.Line >= 0 && l.Pos.Line < len(lines) {
			p.Text = lines[l.Pos.Line]
			p.Character = Convert(p.Text, l.Pos.Character, enc, EncodingUTF16) + 1
		}
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b Place) int {
		if c := strings.Compare(a.Path, b.Path); c != 0 {
			return c
		}
		if a.Line != b.Line {
			return a.Line - b.Line
		}
		return a.Character - b.Character
	})
	return slices.CompactFunc(out, func(a, b Place) bool {
		return a.Path == b.Path && a.Line == b.Line && a.Character == b.Character
	})
}
