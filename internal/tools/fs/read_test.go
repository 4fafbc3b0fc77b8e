package fs

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

func TestDefinitions(t *testing.T) {
	defs := Tools(Options{})
	want := map[string]struct {
		required []string
		safe     bool
	}{
		NameRead:      {[]string{"file_path"}, true},
		NameWrite:     {[]string{"file_path", "content"}, false},
		NameEdit:      {[]string{"file_path", "old_string", "new_string"}, false},
		NameReadImage: {[]string{"file_path"}, true},
	}
	if len(defs) != len(want) {
		t.Fatalf("got %d tools", len(defs))
	}
	for _, d := range defs {
		w, ok := want[d.Name]
		if !ok {
			t.Fatalf("unexpected tool %s", d.Name)
		}
		var schema struct {
			Type     string   `json:"type"`
			Required []string `json:"required"`
		}
		if err := json.Unmarshal(d.Parameters, &schema); err != nil || schema.Type != "object" {
			t.Fatalf("%s schema %s: %v", d.Name, d.Parameters, err)
		}
		if strings.Join(schema.Required, ",") != strings.Join(w.required, ",") {
			t.Errorf("%s required = %v; want %v", d.Name, schema.Required, w.required)
		}
		if safe := d.ConcurrencySafe != nil && d.ConcurrencySafe(nil); safe != w.safe {
			t.Errorf("%s concurrency-safe = %v", d.Name, safe)
		}
		if d.Description == "" || strings.Contains(d.Description, "{{") {
			t.Errorf("%s description not rendered: %q", d.Name, d.Description)
		}
	}
	if r := NewRead(Options{}); !strings.Contains(r.Description, "51200 bytes") || !strings.Contains(string(r.Parameters), `"maximum":2000`) {
		t.Errorf("read description/schema without defaults: %s %s", r.Description, r.Parameters)
	}
}

func TestRead(t *testing.T) {
	h := newHarness(t, Options{MaxReadBytes: 2000, MaxLineChars: 50})
	h.write(t, "ten.txt", linesFile(10))
	h.write(t, "nonl.txt", "a\nb")
	h.write(t, "empty.txt", "")
	h.write(t, "crlf.txt", "one\r\ntwo\r\n")
	h.write(t, "long.txt", "short\n"+strings.Repeat("x", 120)+"\nend\n")
	h.write(t, "latin1.txt", "caf\xe9\nok\n")
	h.write(t, "big.txt", linesFile(500))
	h.write(t, "sub/deep.txt", "deep\n")
	tests := []struct {
		name string
		args map[string]any
		want string // exact text
	}{
		{"whole file", map[string]any{"file_path": "ten.txt"}, strings.TrimSuffix(numbered(1, "line 1", "line 2", "line 3", "line 4", "line 5", "line 6", "line 7", "line 8", "line 9", "line 10"), "\n")},
		{"absolute path", map[string]any{"file_path": h.path("sub/deep.txt")}, numbered(1, "deep")[:len(numbered(1, "deep"))-1]},
		{"relative subdir", map[string]any{"file_path": "sub/../sub/deep.txt"}, "     1\tdeep"},
		{"offset and limit", map[string]any{"file_path": "ten.txt", "offset": 3, "limit": 2},
			numbered(3, "line 3", "line 4") + "[Showing lines 3-4 of 10. To read more, call read with offset=5.]"},
		{"offset to the end", map[string]any{"file_path": "ten.txt", "offset": 9}, strings.TrimSuffix(numbered(9, "line 9", "line 10"), "\n")},
		{"offset 0 means 1", map[string]any{"file_path": "ten.txt", "offset": 0, "limit": 1},
			numbered(1, "line 1") + "[Showing lines 1-1 of 10. To read more, call read with offset=2.]"},
		{"null optional fields", map[string]any{"file_path": "nonl.txt", "offset": nil, "limit": nil}, strings.TrimSuffix(numbered(1, "a", "b"), "\n")},
		{"no final newline", map[string]any{"file_path": "nonl.txt"}, strings.TrimSuffix(numbered(1, "a", "b"), "\n")},
		{"offset past the end", map[string]any{"file_path": "ten.txt", "offset": 11}, "[The file has 10 lines; offset 11 is past its end. Use an offset from 1 to 10.]"},
		{"empty file", map[string]any{"file_path": "empty.txt"}, "[The file " + h.path("empty.txt") + " is empty.]"},
		{"crlf shown without CR", map[string]any{"file_path": "crlf.txt"}, strings.TrimSuffix(numbered(1, "one", "two"), "\n")},
		{"long line truncated", map[string]any{"file_path": "long.txt"},
			numbered(1, "short", strings.Repeat("x", 50)+"… [line truncated: 120 bytes in total]", "end") +
				"[1 line(s) longer than 50 characters were truncated; use bash (for example `cut -c`) to see all of a long line.]"},
		{"invalid utf-8", map[string]any{"file_path": "latin1.txt"},
			numbered(1, "caf\uFFFD", "ok") + "[The file is not valid UTF-8: invalid bytes are shown as \uFFFD.]"},
		{"limit over the maximum", map[string]any{"file_path": "nonl.txt", "limit": 5000},
			numbered(1, "a", "b") + "[limit 5000 is over the maximum of 2000; used 2000.]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := h.run(t, NameRead, tt.args)
			if r.IsError || text(r) != tt.want {
				t.Fatalf("got isError=%v\n%q\nwant\n%q", r.IsError, text(r), tt.want)
			}
		})
	}

	t.Run("byte cap", func(t *testing.T) {
		r := h.run(t, NameRead, map[string]any{"file_path": "big.txt"})
		got := text(r)
		// Each line "     n\tline n\n" is 14-16 bytes, so 2000 bytes hold
		// well under 500 lines.
		body, note, _ := strings.Cut(got, "[Output limit")
		if r.IsError || len(body) > 2000 || !strings.HasPrefix(note, " of 2000 bytes reached: showing lines 1-") {
			t.Fatalf("got %q", got)
		}
		m := metaOf[readMeta](t, r)
		if m.FirstLine != 1 || m.TotalLines != 500 || !m.Truncated || m.LastLine >= 500 || m.LastLine != strings.Count(body, "\n") {
			t.Fatalf("meta %+v", m)
		}
		if !strings.HasSuffix(note, "call read with offset="+itoa(m.LastLine+1)+".]") {
			t.Fatalf("note %q", note)
		}
		// Following the note continues exactly where the cap stopped.
		next := h.mustRun(t, NameRead, map[string]any{"file_path": "big.txt", "offset": m.LastLine + 1, "limit": 1})
		if !strings.HasPrefix(next, numbered(m.LastLine+1, "line "+itoa(m.LastLine+1))) {
			t.Fatalf("next %q", next)
		}
	})
}

func itoa(i int) string { return strings.TrimSpace(string(appendNumber(nil, i))) }

func TestReadErrors(t *testing.T) {
	h := newHarness(t, Options{})
	h.write(t, "config.yaml", "a: 1\n")
	h.write(t, "Config.yml", "a: 2\n")
	h.write(t, "confog.yaml", "a: 3\n")
	h.write(t, "unrelated.go", "package x\n")
	h.write(t, "data.bin", "abc\x00def")
	if err := os.WriteFile(h.path("picture"), encodePNG(t, gradient(4, 4)), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(h.path("dir"), 0o755); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args any
		code string
		subs []string
	}{
		{"missing file with suggestions", map[string]any{"file_path": "config.yml"}, CodeFileNotFound,
			[]string{"file not found: " + h.path("config.yml"), "Did you mean: " + h.path("Config.yml") + ", " + h.path("config.yaml") + ", " + h.path("confog.yaml") + "?"}},
		{"missing file without suggestions", map[string]any{"file_path": "zzzzzzzz.txt"}, CodeFileNotFound, []string{"file not found"}},
		{"missing directory", map[string]any{"file_path": "nodir/x.txt"}, CodeFileNotFound, []string{"does not exist either"}},
		{"binary file", map[string]any{"file_path": "data.bin"}, CodeBinaryFile, []string{"binary file", "bash"}},
		{"image without extension", map[string]any{"file_path": "picture"}, CodeBinaryFile, []string{"image/png", "read_image"}},
		{"directory", map[string]any{"file_path": "dir"}, CodeIsDirectory, []string{"is a directory", "ls", "glob"}},
		{"no path", map[string]any{}, "INVALID_ARGS", []string{"file_path is required"}},
		{"empty path", map[string]any{"file_path": " "}, "INVALID_ARGS", []string{"non-empty"}},
		{"path not a string", map[string]any{"file_path": 3}, "INVALID_ARGS", []string{"file_path must be a string"}},
		{"negative offset", map[string]any{"file_path": "config.yaml", "offset": -1}, "INVALID_ARGS", []string{"offset"}},
		{"fractional offset", map[string]any{"file_path": "config.yaml", "offset": 1.5}, "INVALID_ARGS", []string{"offset must be an integer"}},
		{"zero limit", map[string]any{"file_path": "config.yaml", "limit": 0}, "INVALID_ARGS", []string{"limit must be at least 1"}},
		{"not an object", `[1]`, "INVALID_ARGS", []string{"JSON object"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wantError(t, h.run(t, NameRead, tt.args), tt.code, tt.subs...)
		})
	}
}

func TestReadHomeExpansion(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	if err := os.WriteFile(filepath.Join(home, "notes.txt"), []byte("hi\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, Options{})
	if got := h.mustRun(t, NameRead, map[string]any{"file_path": "~/notes.txt"}); got != "     1\thi" {
		t.Fatalf("got %q", got)
	}
}

// TestReadHugeFile reads a 50 MB file: the result stays within the byte
// cap, and the whole file is still hashed and counted.
func TestReadHugeFile(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 50 MB")
	}
	h := newHarness(t, Options{})
	chunk := []byte(strings.Repeat(strings.Repeat("0123456789", 9)+"\n", 10000)) // 910 kB, 10000 lines
	f, err := os.Create(h.path("huge.log"))
	if err != nil {
		t.Fatal(err)
	}
	for range 55 {
		if _, err := f.Write(chunk); err != nil {
			t.Fatal(err)
		}
	}
	// A single 1 MB line at the end checks that no line is held whole.
	if _, err := f.WriteString(strings.Repeat("y", 1<<20)); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	r := h.run(t, NameRead, map[string]any{"file_path": "huge.log"})
	if r.IsError || len(text(r)) > DefaultMaxReadBytes+200 || !strings.Contains(text(r), "[Output limit of 51200 bytes reached: showing lines 1-") {
		t.Fatalf("isError=%v len=%d tail %q", r.IsError, len(text(r)), text(r)[max(0, len(text(r))-200):])
	}
	if m := metaOf[readMeta](t, r); m.TotalLines != 550001 {
		t.Fatalf("meta %+v", m)
	}
	r = h.run(t, NameRead, map[string]any{"file_path": "huge.log", "offset": 550001})
	if !strings.HasPrefix(text(r), "550001\t"+strings.Repeat("y", 2000)+"… [line truncated: 1048576 bytes in total]") {
		t.Fatalf("last line %q", text(r)[:min(100, len(text(r)))])
	}
	// The read was recorded with the hash of the whole file.
	want, err := HashFile(h.path("huge.log"))
	if err != nil {
		t.Fatal(err)
	}
	if got, ok := h.tracker.Lookup(h.session, h.path("huge.log")); !ok || got.Hash != want.Hash || got.Size != want.Size {
		t.Fatal("read not recorded with the file's state")
	}
}

// TestReadConcurrent reads files from many goroutines through one
// pipeline; run with -race.
func TestReadConcurrent(t *testing.T) {
	h := newHarness(t, Options{})
	for _, n := range []string{"a", "b", "c", "d"} {
		h.write(t, n, linesFile(300))
	}
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Go(func() {
			name := string(rune('a' + i%4))
			if r := h.run(t, NameRead, map[string]any{"file_path": name, "offset": 1 + i}); r.IsError {
				t.Errorf("read %s: %s", name, text(r))
			}
		})
	}
	wg.Wait()
	for _, n := range []string{"a", "b", "c", "d"} {
		if _, ok := h.tracker.Lookup(h.session, h.path(n)); !ok {
			t.Errorf("read of %s not recorded", n)
		}
	}
}
