package search

import (
	"context"
	"encoding/json"
	"errors"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/dsh-dev/dsh/internal/tool"
)

// grepMaxSize is the size cap the tests use, so that "huge" is small.
const grepMaxSize = 4096

// grepTree is the corpus for the table tests. Modification times follow
// key order (see writeTree).
var grepTree = map[string]string{
	".git/":         "",
	".gitignore":    "ignored/\n*.log\n",
	".hidden/h.txt": "hello hidden\n",
	"a.go":          "package main\n\nfunc main() {\n\tprintln(\"hello world\")\n}\n",
	"b/b.go":        "package b\n\n// Hello is exported.\nfunc Hello() string { return \"hello\" }\n",
	"b/c.txt":       "no match here\nHELLO shouting\n",
	"bin.dat":       "hello\x00binary\n",
	"crlf.txt":      "hello crlf\r\nbye\r\n",
	"debug.log":     "hello log\n",
	"huge.txt":      strings.Repeat("hello huge\n", grepMaxSize/10),
	"ignored/x.go":  "hello from ignored\n",
	"latin1.txt":    "caf\xe9 hello\n",
	"long.txt":      strings.Repeat("x", 1000) + "hello" + strings.Repeat("y", 1000) + "\n",
}

var longLine = "1:…" + strings.Repeat("x", 100) + "hello" + strings.Repeat("y", 395) + "… [1505 characters clipped]"

func TestGrep(t *testing.T) {
	tests := []struct {
		name string
		args map[string]any
		want string
	}{
		{"files newest first; binary, huge and ignored skipped; hidden searched",
			map[string]any{"pattern": "hello"},
			"Found 6 files\n$ROOT/long.txt\n$ROOT/latin1.txt\n$ROOT/crlf.txt\n$ROOT/b/b.go\n$ROOT/a.go\n$ROOT/.hidden/h.txt"},
		{"content in path order, invalid UTF-8 replaced, CR dropped, long line clipped",
			map[string]any{"pattern": "hello", "output_mode": "content"},
			"$ROOT/.hidden/h.txt\n1:hello hidden\n\n$ROOT/a.go\n4:\tprintln(\"hello world\")\n\n$ROOT/b/b.go\n4:func Hello() string { return \"hello\" }\n\n" +
				"$ROOT/crlf.txt\n1:hello crlf\n\n$ROOT/latin1.txt\n1:caf\uFFFD hello\n\n$ROOT/long.txt\n" + longLine},
		{"case-insensitive count",
			map[string]any{"pattern": "hello", "output_mode": "count", "-i": true, "path": "b"},
			"$ROOT/b/b.go:2\n$ROOT/b/c.txt:1\n\nFound 3 matching lines in 2 files"},
		{"context and separators",
			map[string]any{"pattern": "package|return", "output_mode": "content", "path": "b/b.go", "-B": 1},
			"$ROOT/b/b.go\n1:package b\n--\n3-// Hello is exported.\n4:func Hello() string { return \"hello\" }"},
		{"context around",
			map[string]any{"pattern": "func main", "output_mode": "content", "-C": 1},
			"$ROOT/a.go\n2-\n3:func main() {\n4-\tprintln(\"hello world\")"},
		{"without line numbers",
			map[string]any{"pattern": "func main", "output_mode": "content", "-n": false, "-A": 1},
			"$ROOT/a.go\nfunc main() {\n\tprintln(\"hello world\")"},
		{"multiline",
			map[string]any{"pattern": `main\(\) \{\n\tprintln`, "output_mode": "content", "multiline": true},
			"$ROOT/a.go\n3:func main() {\n4:\tprintln(\"hello world\")"},
		{"multiline dot matches newline",
			map[string]any{"pattern": `Hello is.*string`, "output_mode": "count", "multiline": true},
			"$ROOT/b/b.go:1\n\nFound 1 matching line in 1 file"},
		{"include",
			map[string]any{"pattern": "hello", "include": "*.go"},
			"Found 2 files\n$ROOT/b/b.go\n$ROOT/a.go"},
		{"include alternatives",
			map[string]any{"pattern": "hello", "include": "*.{txt,go}", "output_mode": "count"},
			"$ROOT/.hidden/h.txt:1\n$ROOT/a.go:1\n$ROOT/b/b.go:1\n$ROOT/crlf.txt:1\n$ROOT/latin1.txt:1\n$ROOT/long.txt:1\n\nFound 6 matching lines in 6 files"},
		{"include with a slash is relative to the root",
			map[string]any{"pattern": "hello", "include": "b/*.go"},
			"Found 1 file\n$ROOT/b/b.go"},
		{"include beats .gitignore",
			map[string]any{"pattern": "hello", "include": "*.log"},
			"Found 1 file\n$ROOT/debug.log"},
		{"glob is accepted for include",
			map[string]any{"pattern": "hello", "glob": "*.go"},
			"Found 2 files\n$ROOT/b/b.go\n$ROOT/a.go"},
		{"single file", map[string]any{"pattern": "world", "path": "a.go"}, "Found 1 file\n$ROOT/a.go"},
		{"named binary file",
			map[string]any{"pattern": "hello", "path": "bin.dat"}, "No matches: $ROOT/bin.dat is a binary file and was skipped."},
		{"named huge file",
			map[string]any{"pattern": "hello", "path": "huge.txt"},
			"No matches: $ROOT/huge.txt is larger than the 4 KiB search limit and was skipped; search it with bash (grep or rg) instead."},
		{"an ignored directory named explicitly is searched",
			map[string]any{"pattern": "hello", "path": "ignored"}, "Found 1 file\n$ROOT/ignored/x.go"},
		{"no match", map[string]any{"pattern": "absent"}, "No matches found"},
		{"no match content", map[string]any{"pattern": "absent", "output_mode": "content"}, "No matches found"},
		{"no match count", map[string]any{"pattern": "absent", "output_mode": "count"}, "No matches found"},
		{"pattern starting with a dash", map[string]any{"pattern": "-- no", "path": "b"}, "No matches found"},
		{"content limit",
			map[string]any{"pattern": "hello", "output_mode": "content", "head_limit": 2},
			"$ROOT/.hidden/h.txt\n1:hello hidden\n\n$ROOT/a.go\n4:\tprintln(\"hello world\")\n\n" +
				"[4 more not shown: showed 2 of 6 matching lines, from 2 of 6 files; narrow the search or raise head_limit]"},
		{"content limit keeps trailing context",
			map[string]any{"pattern": "package|func|Hello", "output_mode": "content", "path": "b/b.go", "head_limit": 1, "-A": 2},
			"$ROOT/b/b.go\n1:package b\n2-\n3-// Hello is exported.\n\n" +
				"[2 more not shown: showed 1 of 3 matching lines, from 1 of 1 files; narrow the search or raise head_limit]"},
		{"files limit",
			map[string]any{"pattern": "hello", "head_limit": 2},
			"Found 6 files\n$ROOT/long.txt\n$ROOT/latin1.txt\n\n[4 more not shown: listed the 2 most recently modified; narrow the search or raise head_limit]"},
		{"count limit",
			map[string]any{"pattern": "hello", "output_mode": "count", "head_limit": 1},
			"$ROOT/.hidden/h.txt:1\n\nFound 6 matching lines in 6 files\n[5 more not shown; narrow the search or raise head_limit]"},
	}
	for name, opts := range backends(t, Options{MaxFileSize: grepMaxSize}) {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			writeTree(t, dir, grepTree)
			h := newHarness(t, dir, NewGrep(opts))
			for _, tc := range tests {
				t.Run(tc.name, func(t *testing.T) {
					r := h.call(t.Context(), t, GrepName, tc.args)
					if r.IsError {
						t.Fatalf("error result: %s", h.text(r))
					}
					if got := h.text(r); got != tc.want {
						t.Errorf("got\n%s\nwant\n%s", got, tc.want)
					}
					var m grepMeta
					if err := json.Unmarshal(r.Meta, &m); err != nil || m.Backend != name {
						t.Errorf("meta %s (%v)", r.Meta, err)
					}
				})
			}
		})
	}
}

// TestGrepOutputCut checks the byte bound on content output: one
// multiline match can span a whole file.
func TestGrepOutputCut(t *testing.T) {
	for name, opts := range backends(t, Options{MaxOutputBytes: 120}) {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			writeTree(t, dir, map[string]string{"f.txt": strings.Repeat("some text\n", 50), "g.txt": "some\n"})
			h := newHarness(t, dir, NewGrep(opts))
			r := h.call(t.Context(), t, GrepName, map[string]any{"pattern": "some.*", "multiline": true, "output_mode": "content"})
			const note = "\n\n[output cut at 120 bytes: showed 1 of 2 matching lines, from 1 of 2 files; narrow the search or ask for less context]"
			got := h.text(r)
			body, ok := strings.CutSuffix(got, note)
			raw := strings.ReplaceAll(body, "$ROOT", dir)
			// Writing stops at the first line that starts past the bound.
			if !ok || !strings.HasPrefix(body, "$ROOT/f.txt\n1:some text\n2:some text") || len(raw) < 120 || len(raw) > 120+len("\n50:some text") {
				t.Errorf("got\n%s", got)
			}
		})
	}
}

func TestGrepBadInput(t *testing.T) {
	tests := []struct {
		name string
		args map[string]any
		want string // substring of the message
	}{
		{"no pattern", map[string]any{"path": "."}, "pattern is required"},
		{"empty pattern", map[string]any{"pattern": ""}, "pattern is required"},
		{"invalid regex", map[string]any{"pattern": "foo("}, "missing closing ): `foo(`"},
		{"invalid repetition", map[string]any{"pattern": "*x"}, "missing argument to repetition operator"},
		{"literal newline without multiline", map[string]any{"pattern": `a\nb`}, "set multiline to true"},
		{"missing path", map[string]any{"pattern": "x", "path": "nope/deeper"}, "does not exist"},
		{"bad output_mode", map[string]any{"pattern": "x", "output_mode": "lines"}, "output_mode must be one of"},
		{"negative context", map[string]any{"pattern": "x", "-A": -1}, "-A must be between 0 and 100"},
		{"huge context", map[string]any{"pattern": "x", "-C": 1000}, "-C must be between 0 and 100"},
		{"fractional context", map[string]any{"pattern": "x", "-B": 1.5}, "-B must be an integer"},
		{"zero head_limit", map[string]any{"pattern": "x", "head_limit": 0}, "head_limit must be between 1 and 1000"},
		{"bool as string", map[string]any{"pattern": "x", "-i": "yes"}, "-i must be true or false"},
		{"include not a string", map[string]any{"pattern": "x", "include": 7}, "include must be a string"},
		{"unclosed include group", map[string]any{"pattern": "x", "include": "*.{go"}, "unclosed {"},
		{"nested include group", map[string]any{"pattern": "x", "include": "*.{a,{b,c}}"}, "nested {} groups"},
	}
	for name, opts := range backends(t, Options{}) {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			writeTree(t, dir, grepTree)
			h := newHarness(t, dir, NewGrep(opts))
			for _, tc := range tests {
				t.Run(tc.name, func(t *testing.T) {
					r := h.call(t.Context(), t, GrepName, tc.args)
					if !r.IsError || code(r) != tool.CodeInvalidArgs || !strings.Contains(h.text(r), tc.want) {
						t.Errorf("got %s %q, want INVALID_ARGS containing %q", code(r), h.text(r), tc.want)
					}
				})
			}
		})
	}
}

// TestGrepRgRejectsPattern covers a pattern Go accepts and rg's regex
// engine does not: the error still comes back as INVALID_ARGS.
func TestGrepRgRejectsPattern(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, grepTree)
	h := newHarness(t, dir, NewGrep(Options{Ripgrep: rgPath(t)}))
	r := h.call(t.Context(), t, GrepName, map[string]any{"pattern": `\Qa.b\E`})
	if code(r) != tool.CodeInvalidArgs || !strings.Contains(h.text(r), "not valid for rg") {
		t.Errorf("got %s %q", code(r), h.text(r))
	}
}

func TestGrepDefinition(t *testing.T) {
	d := NewGrep(Options{NoRipgrep: true})
	if d.Name != "grep" || d.ConcurrencySafe == nil || !d.ConcurrencySafe(nil) || d.Timeout != DefaultTimeout {
		t.Fatalf("definition %+v", d)
	}
	for _, s := range []string{"{{", "}}"} {
		if strings.Contains(d.Description, s) {
			t.Errorf("description not rendered:\n%s", d.Description)
		}
	}
	for _, s := range []string{"default 250", "default 100", "10 MiB", "500 characters", "100 kB"} {
		if !strings.Contains(d.Description, s) {
			t.Errorf("description lacks %q:\n%s", s, d.Description)
		}
	}
	var schema struct {
		Required   []string                   `json:"required"`
		Properties map[string]json.RawMessage `json:"properties"`
	}
	if err := json.Unmarshal(d.Parameters, &schema); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"pattern", "path", "include", "output_mode", "-i", "-n", "-A", "-B", "-C", "multiline", "head_limit"} {
		if _, ok := schema.Properties[p]; !ok {
			t.Errorf("schema lacks %s: %s", p, d.Parameters)
		}
	}
	if len(schema.Required) != 1 || schema.Required[0] != "pattern" {
		t.Errorf("required %v", schema.Required)
	}
}

// TestConcurrentCalls runs both tools on the same tree at once; run
// with -race it checks that the definitions share no mutable state.
func TestConcurrentCalls(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, grepTree)
	defs := []tool.Definition{NewGlob(Options{})}
	for _, o := range backends(t, Options{MaxFileSize: grepMaxSize}) {
		defs = append(defs, NewGrep(o))
	}
	var wg sync.WaitGroup
	for i, d := range defs {
		h := newHarness(t, dir, d)
		for j := range 4 {
			wg.Go(func() {
				args := map[string]any{"pattern": "hello", "output_mode": []string{"content", "count", "files_with_matches", "content"}[j]}
				if d.Name == GlobName {
					args = map[string]any{"pattern": "**/*.txt"}
				}
				if r := h.call(t.Context(), t, d.Name, args); r.IsError {
					t.Errorf("def %d call %d: %s", i, j, h.text(r))
				}
			})
		}
	}
	wg.Wait()
}

// TestGrepCancelled checks that both backends give up on a cancelled
// context with its error.
func TestGrepCancelled(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, grepTree)
	for name, opts := range backends(t, Options{}) {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			cancel()
			q := &query{root: dir, pattern: "hello", re: regexp.MustCompile("(?m)hello"), maxFileSize: DefaultMaxFileSize}
			var be backend = goBackend{}
			if opts.Ripgrep != "" {
				be = &rgBackend{path: opts.Ripgrep}
			}
			if _, err := be.counts(ctx, q); !errors.Is(err, context.Canceled) {
				t.Errorf("counts after cancel: %v", err)
			}
		})
	}
}
