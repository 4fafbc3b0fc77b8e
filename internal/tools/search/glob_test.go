package search

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dsh-dev/dsh/internal/tool"
)

// globTree is a small repository; being one, its .gitignore also applies
// to searches that start in a subdirectory.
var globTree = map[string]string{
	".git/":                    "",
	".env":                     "",
	".github/workflows/ci.yml": "",
	".gitignore":               "vendor/\n*.gen.go\n",
	"README.md":                "",
	"cmd/dsh/main.go":          "",
	"go.mod":                   "",
	"internal/.hidden/h.go":    "",
	"internal/a/a.go":          "",
	"internal/a/a_test.go":     "",
	"internal/b/b.go":          "",
	"internal/b/x.gen.go":      "",
	"vendor/v/v.go":            "",
	"web/app.ts":               "",
	"web/app.tsx":              "",
	"empty/":                   "",
}

func TestGlob(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, globTree)
	h := newHarness(t, dir, NewGlob(Options{}))
	tests := []struct {
		name string
		args map[string]any
		want string
	}{
		{"newest first, ignored and hidden left out", map[string]any{"pattern": "**/*.go"},
			"$ROOT/internal/b/b.go\n$ROOT/internal/a/a_test.go\n$ROOT/internal/a/a.go\n$ROOT/cmd/dsh/main.go"},
		{"single star stays in one directory", map[string]any{"pattern": "*.go"}, "No files found"},
		{"top level", map[string]any{"pattern": "*"}, "$ROOT/go.mod\n$ROOT/README.md"},
		{"literal prefix", map[string]any{"pattern": "internal/**/*_test.go"}, "$ROOT/internal/a/a_test.go"},
		{"middle star", map[string]any{"pattern": "internal/*/b.go"}, "$ROOT/internal/b/b.go"},
		{"alternatives", map[string]any{"pattern": "**/*.{ts,tsx}"}, "$ROOT/web/app.tsx\n$ROOT/web/app.ts"},
		{"alternatives with a slash", map[string]any{"pattern": "{web,cmd/dsh}/*"}, "$ROOT/web/app.tsx\n$ROOT/web/app.ts\n$ROOT/cmd/dsh/main.go"},
		{"hidden file named", map[string]any{"pattern": "**/.env"}, "$ROOT/.env"},
		{"hidden directory named", map[string]any{"pattern": ".github/**/*.yml"}, "$ROOT/.github/workflows/ci.yml"},
		{"hidden directory by wildcard", map[string]any{"pattern": "**/.*/*.go"}, "$ROOT/internal/.hidden/h.go"},
		{"dot files by wildcard", map[string]any{"pattern": ".*"}, "$ROOT/.gitignore\n$ROOT/.env"},
		{"relative path", map[string]any{"pattern": "**/*.go", "path": "internal/a"}, "$ROOT/internal/a/a_test.go\n$ROOT/internal/a/a.go"},
		{"absolute path", map[string]any{"pattern": "*.go", "path": filepath.Join(dir, "internal", "b")}, "$ROOT/internal/b/b.go"},
		{"dot slash", map[string]any{"pattern": "./cmd/**"}, "$ROOT/cmd/dsh/main.go"},
		{"absolute pattern", map[string]any{"pattern": dir + "/internal/**/a*.go"}, "$ROOT/internal/a/a_test.go\n$ROOT/internal/a/a.go"},
		{"trailing slash lists everything below", map[string]any{"pattern": "web/"}, "$ROOT/web/app.tsx\n$ROOT/web/app.ts"},
		{"an ignored directory named explicitly is searched", map[string]any{"pattern": "vendor/**/*.go"}, "$ROOT/vendor/v/v.go"},
		{"missing literal prefix", map[string]any{"pattern": "nope/**/*.go"}, "No files found"},
		{"empty directory", map[string]any{"pattern": "**", "path": "empty"}, "No files found"},
		{"exact name", map[string]any{"pattern": "cmd/dsh/main.go"}, "$ROOT/cmd/dsh/main.go"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := h.call(t.Context(), t, GlobName, tc.args)
			if r.IsError {
				t.Fatalf("error result: %s", h.text(r))
			}
			if got := h.text(r); got != tc.want {
				t.Errorf("got\n%s\nwant\n%s", got, tc.want)
			}
		})
	}
}

func TestGlobLimit(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, globTree)
	// Touch a file so it is newest: order follows the time, not the name.
	touch(t, filepath.Join(dir, "README.md"), 1)
	h := newHarness(t, dir, NewGlob(Options{GlobLimit: 2}))
	r := h.call(t.Context(), t, GlobName, map[string]any{"pattern": "**/*"})
	want := "$ROOT/README.md\n$ROOT/web/app.tsx\n\n" +
		"[6 more not shown: listed the 2 most recently modified of 8 matching files; narrow the pattern or the path to see the rest]"
	if got := h.text(r); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	var m globMeta
	if err := json.Unmarshal(r.Meta, &m); err != nil || m.Total != 8 || m.Shown != 2 || m.Root != dir || m.Pattern != "**/*" {
		t.Errorf("meta %s (%v)", r.Meta, err)
	}
}

func TestGlobTies(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{"b.txt": "", "a/z.txt": "", "a.txt": ""})
	for _, p := range []string{"b.txt", "a/z.txt", "a.txt"} {
		touch(t, filepath.Join(dir, p), 0)
	}
	h := newHarness(t, dir, NewGlob(Options{}))
	r := h.call(t.Context(), t, GlobName, map[string]any{"pattern": "**/*.txt"})
	// Equal times fall back to walk order: a directory's entries before
	// a sibling file with a longer name.
	if got, want := h.text(r), "$ROOT/a/z.txt\n$ROOT/a.txt\n$ROOT/b.txt"; got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}

func TestGlobBadInput(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, globTree)
	h := newHarness(t, dir, NewGlob(Options{}))
	tests := []struct {
		name string
		args any
		want string // substring of the message
	}{
		{"not an object", `[1]`, "not a JSON object"},
		{"no pattern", map[string]any{}, "pattern is required"},
		{"blank pattern", map[string]any{"pattern": "  "}, "pattern is required"},
		{"pattern not a string", map[string]any{"pattern": 3}, "pattern must be a string"},
		{"path not a string", map[string]any{"pattern": "*", "path": true}, "path must be a string"},
		{"bad pattern", map[string]any{"pattern": "src/[a"}, "not a valid glob"},
		{"missing path", map[string]any{"pattern": "*", "path": "nope"}, "does not exist"},
		{"path is a file", map[string]any{"pattern": "*", "path": "go.mod"}, "is not a directory"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := h.call(t.Context(), t, GlobName, tc.args)
			if !r.IsError || code(r) != tool.CodeInvalidArgs || !strings.Contains(h.text(r), tc.want) {
				t.Errorf("got %s %q, want INVALID_ARGS containing %q", code(r), h.text(r), tc.want)
			}
		})
	}
}

func TestGlobDefinition(t *testing.T) {
	d := NewGlob(Options{})
	if d.Name != "glob" || d.ConcurrencySafe == nil || !d.ConcurrencySafe(nil) || d.Timeout != DefaultTimeout {
		t.Fatalf("definition %+v", d)
	}
	if strings.Contains(d.Description, "{{") || !strings.Contains(d.Description, "At most 100 paths") {
		t.Errorf("description not rendered:\n%s", d.Description)
	}
	var schema struct {
		Required   []string                   `json:"required"`
		Properties map[string]json.RawMessage `json:"properties"`
	}
	if err := json.Unmarshal(d.Parameters, &schema); err != nil || len(schema.Properties) != 2 || schema.Required[0] != "pattern" {
		t.Errorf("schema %s (%v)", d.Parameters, err)
	}
}
