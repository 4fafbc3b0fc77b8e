package strreplace

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dsh-dev/dsh/internal/tool"
	fstools "github.com/dsh-dev/dsh/internal/tools/fs"
)

// harness runs the tool (and, sharing its tracker, the fs tools) through
// a real pipeline.
type harness struct {
	p   *tool.Pipeline
	dir string
}

func newHarness(t *testing.T, opts Options) *harness {
	t.Helper()
	if opts.Tracker == nil {
		opts.Tracker = fstools.NewTracker()
	}
	reg := tool.NewRegistry()
	defs := append(fstools.Tools(fstools.Options{Tracker: opts.Tracker}), New(opts))
	for _, d := range defs {
		if err := reg.Register("", d); err != nil {
			t.Fatal(err)
		}
	}
	return &harness{p: tool.NewPipeline(reg), dir: t.TempDir()}
}

func (h *harness) run(t *testing.T, name string, args map[string]any) tool.Result {
	t.Helper()
	return h.runAs(t, "s1", name, args)
}

// runAs runs a call as session.
func (h *harness) runAs(t *testing.T, session, name string, args map[string]any) tool.Result {
	t.Helper()
	raw, err := json.Marshal(args)
	if err != nil {
		t.Fatal(err)
	}
	return h.p.Run(context.Background(), &tool.Call{ID: "c1", Name: name, RawArguments: string(raw), Cwd: h.dir, SessionID: session})
}

func (h *harness) path(name string) string { return filepath.Join(h.dir, name) }

func (h *harness) write(t *testing.T, name, content string) {
	t.Helper()
	p := h.path(name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// view views a file with the tool, as str_replace and insert require.
func (h *harness) view(t *testing.T, name string) {
	t.Helper()
	if r := h.run(t, Name, map[string]any{"command": "view", "path": name}); r.IsError {
		t.Fatalf("view %s: %s", name, text(r))
	}
}

func (h *harness) content(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(h.path(name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func text(r tool.Result) string {
	var b strings.Builder
	for _, bl := range r.Content {
		b.WriteString(bl.Text)
	}
	return b.String()
}

func code(r tool.Result) string {
	if r.Error == nil {
		return ""
	}
	return r.Error.Code
}

// numbered renders lines from first in the `cat -n` layout.
func numbered(first int, lines ...string) string {
	return fstools.NumberLines(strings.Join(lines, "\n")+"\n", first)
}

const five = "one\ntwo\nthree\nfour\nfive\n"

func TestDefinition(t *testing.T) {
	d := New(Options{})
	if d.Name != "str_replace_based_edit_tool" || !strings.Contains(d.Description, "<response clipped>") ||
		!strings.Contains(d.Description, "A null placeholder") {
		t.Fatalf("definition %s: %s", d.Name, d.Description)
	}
	var schema struct {
		Required   []string                   `json:"required"`
		Properties map[string]json.RawMessage `json:"properties"`
	}
	if err := json.Unmarshal(d.Parameters, &schema); err != nil {
		t.Fatal(err)
	}
	if strings.Join(schema.Required, ",") != "command,path" || len(schema.Properties) != 7 ||
		!strings.Contains(string(schema.Properties["old_str"]), `{"type":"null"}`) {
		t.Fatalf("schema %s", d.Parameters)
	}
	for cmd, want := range map[string]bool{"view": true, "create": false, "str_replace": false, "insert": false} {
		if got := d.ConcurrencySafe(json.RawMessage(`{"command":"` + cmd + `","path":"/x"}`)); got != want {
			t.Errorf("%s concurrency-safe = %v", cmd, got)
		}
	}
}

func TestCommands(t *testing.T) {
	tests := []struct {
		name    string
		files   map[string]string
		args    map[string]any
		want    string // exact text; PATH is the file's absolute path, DIR the cwd
		file    string // file to check afterwards ("" for f.txt)
		content string // its content afterwards ("" leaves it unchecked)
		opts    Options
	}{
		{"view file", map[string]string{"f.txt": five}, map[string]any{"command": "view", "path": "f.txt"},
			"Here's the result of running `cat -n` on PATH:\n" + strings.TrimSuffix(numbered(1, "one", "two", "three", "four", "five"), "\n"), "", "", Options{}},
		{"view range", map[string]string{"f.txt": five}, map[string]any{"command": "view", "path": "f.txt", "view_range": []int{2, 3}},
			"Here's the result of running `cat -n` on PATH:\n" + strings.TrimSuffix(numbered(2, "two", "three"), "\n"), "", "", Options{}},
		{"view range to the end", map[string]string{"f.txt": five}, map[string]any{"command": "view", "path": "f.txt", "view_range": []int{4, -1}},
			"Here's the result of running `cat -n` on PATH:\n" + strings.TrimSuffix(numbered(4, "four", "five"), "\n"), "", "", Options{}},
		{"view range past the end is clamped", map[string]string{"f.txt": five}, map[string]any{"command": "view", "path": "f.txt", "view_range": []int{5, 99}},
			"Here's the result of running `cat -n` on PATH:\n     5\tfive", "", "", Options{}},
		{"null placeholders are omitted", map[string]string{"f.txt": "x\n"}, map[string]any{"command": "view", "path": "f.txt",
			"view_range": nil, "old_str": nil, "new_str": nil, "file_text": nil, "insert_line": nil},
			"Here's the result of running `cat -n` on PATH:\n     1\tx", "", "", Options{}},
		{"view empty file", map[string]string{"f.txt": ""}, map[string]any{"command": "view", "path": "f.txt"},
			"Here's the result of running `cat -n` on PATH:\n(the file is empty)", "", "", Options{}},
		{"view clipped", map[string]string{"f.txt": strings.Repeat("0123456789\n", 50)}, map[string]any{"command": "view", "path": "f.txt"},
			"Here's the result of running `cat -n` on PATH:\n" + strings.TrimSuffix(numbered(1, "0123456789", "0123456789", "0123456789", "0123456789", "0123456789", "0123456789"), "\n") + "\n" + clippedNote,
			"", "", Options{MaxOutputChars: 110}},
		{"create", nil, map[string]any{"command": "create", "path": "new/dir/f.txt", "file_text": "hello\n", "old_str": nil, "view_range": nil},
			"File created successfully at: PATH", "new/dir/f.txt", "hello\n", Options{}},
		{"str_replace", map[string]string{"f.txt": five}, map[string]any{"command": "str_replace", "path": "f.txt", "old_str": "three\n", "new_str": "3\n3.5\n", "insert_line": nil},
			"The file PATH has been edited. Here's the result of running `cat -n` on a snippet of PATH:\n" +
				numbered(1, "one", "two", "3", "3.5", "four", "five") + "Review the changes and make sure they are as expected. Edit the file again if necessary.",
			"", "one\ntwo\n3\n3.5\nfour\nfive\n", Options{}},
		{"str_replace without new_str deletes", map[string]string{"f.txt": five}, map[string]any{"command": "str_replace", "path": "f.txt", "old_str": "two\n"},
			"", "", "one\nthree\nfour\nfive\n", Options{}},
		{"str_replace keeps crlf", map[string]string{"f.txt": "a\r\nb\r\n"}, map[string]any{"command": "str_replace", "path": "f.txt", "old_str": "a\nb", "new_str": "A\nB"},
			"", "", "A\r\nB\r\n", Options{}},
		{"insert at the top", map[string]string{"f.txt": five}, map[string]any{"command": "insert", "path": "f.txt", "insert_line": 0, "new_str": "zero"},
			"The file PATH has been edited. Here's the result of running `cat -n` on a snippet of PATH:\n" +
				numbered(1, "zero", "one", "two", "three", "four") + "Review the changes and make sure they are as expected. Edit the file again if necessary.",
			"", "zero\n" + five, Options{}},
		{"insert in the middle", map[string]string{"f.txt": five}, map[string]any{"command": "insert", "path": "f.txt", "insert_line": 2, "new_str": "2a\n2b\n"},
			"", "", "one\ntwo\n2a\n2b\nthree\nfour\nfive\n", Options{}},
		{"insert at the end", map[string]string{"f.txt": five}, map[string]any{"command": "insert", "path": "f.txt", "insert_line": 5, "new_str": "six"},
			"", "", five + "six\n", Options{}},
		{"insert after an unterminated last line adds no newline", map[string]string{"f.txt": "a\nb"}, map[string]any{"command": "insert", "path": "f.txt", "insert_line": 2, "new_str": "c"},
			"The file PATH has been edited. Here's the result of running `cat -n` on a snippet of PATH:\n" +
				numbered(1, "a", "b", "c") + "Review the changes and make sure they are as expected. Edit the file again if necessary.",
			"", "a\nb\nc", Options{}},
		{"insert of a terminated text after an unterminated last line", map[string]string{"f.txt": "a\nb"}, map[string]any{"command": "insert", "path": "f.txt", "insert_line": 2, "new_str": "c\nd\n"},
			"", "", "a\nb\nc\nd", Options{}},
		{"insert after an unterminated crlf line", map[string]string{"f.txt": "a\r\nb"}, map[string]any{"command": "insert", "path": "f.txt", "insert_line": 2, "new_str": "c\n"},
			"", "", "a\r\nb\r\nc", Options{}},
		{"insert_line one past a final newline is the end", map[string]string{"f.txt": five}, map[string]any{"command": "insert", "path": "f.txt", "insert_line": 6, "new_str": "six"},
			"The file PATH has been edited. Here's the result of running `cat -n` on a snippet of PATH:\n" +
				numbered(2, "two", "three", "four", "five", "six") + "Review the changes and make sure they are as expected. Edit the file again if necessary.",
			"", five + "six\n", Options{}},
		{"insert into an empty file", map[string]string{"f.txt": ""}, map[string]any{"command": "insert", "path": "f.txt", "insert_line": 0, "new_str": "only"},
			"", "", "only\n", Options{}},
		{"insert keeps crlf", map[string]string{"f.txt": "a\r\nb\r\n"}, map[string]any{"command": "insert", "path": "f.txt", "insert_line": 1, "new_str": "x\ny"},
			"", "", "a\r\nx\r\ny\r\nb\r\n", Options{}},
		{"insert_text is accepted for new_str", map[string]string{"f.txt": "a\n"}, map[string]any{"command": "insert", "path": "f.txt", "insert_line": 1, "insert_text": "b\n", "new_str": nil},
			"", "", "a\nb\n", Options{}},
		{"absolute path", map[string]string{"f.txt": "x\n"}, map[string]any{"command": "view", "path": "ABS"},
			"Here's the result of running `cat -n` on PATH:\n     1\tx", "", "", Options{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, tt.opts)
			for name, content := range tt.files {
				h.write(t, name, content)
			}
			file := tt.file
			if file == "" {
				file = "f.txt"
			}
			if tt.args["path"] == "ABS" {
				tt.args["path"] = h.path(file)
			}
			if tt.args["command"] == "str_replace" || tt.args["command"] == "insert" {
				h.view(t, file)
			}
			r := h.run(t, Name, tt.args)
			if r.IsError {
				t.Fatalf("failed: %s", text(r))
			}
			if want := strings.ReplaceAll(tt.want, "PATH", h.path(file)); tt.want != "" && text(r) != want {
				t.Fatalf("got\n%s\nwant\n%s", text(r), want)
			}
			if tt.content != "" {
				if got := h.content(t, file); got != tt.content {
					t.Fatalf("content %q; want %q", got, tt.content)
				}
			}
		})
	}
}

func TestViewDirectory(t *testing.T) {
	h := newHarness(t, Options{})
	for _, f := range []string{"a.go", "sub/b.go", "sub/deep/c.go", "sub/deep/deeper/d.go", ".git/config", ".hidden", "sub/.env"} {
		h.write(t, f, "")
	}
	r := h.run(t, Name, map[string]any{"command": "view", "path": h.dir})
	want := "Here's the files and directories up to 2 levels deep in " + h.dir + ", excluding hidden items and the contents of ignored directories:\n" + h.dir + "\n" +
		strings.Join([]string{h.path("a.go"), h.path("sub") + "/", h.path("sub/b.go"), h.path("sub/deep") + "/"}, "\n")
	if r.IsError || text(r) != want {
		t.Fatalf("got\n%s\nwant\n%s", text(r), want)
	}
	// A symlinked directory is listed through the link.
	if err := os.Symlink(h.path("sub"), h.path("link")); err != nil {
		t.Fatal(err)
	}
	r = h.run(t, Name, map[string]any{"command": "view", "path": "link"})
	if want := h.path("link") + "\n" + h.path("link/b.go") + "\n" + h.path("link/deep") + "/\n" + h.path("link/deep/c.go") + "\n" + h.path("link/deep/deeper") + "/"; r.IsError || !strings.HasSuffix(text(r), want) {
		t.Fatalf("got\n%s\nwant suffix\n%s", text(r), want)
	}
	small := newHarness(t, Options{MaxOutputChars: 300})
	for i := range 20 {
		small.write(t, "file-with-a-long-name-"+string(rune('a'+i)), "")
	}
	if r := small.run(t, Name, map[string]any{"command": "view", "path": "."}); r.IsError || !strings.HasSuffix(text(r), clippedNote) || len(text(r)) > 300+len(clippedNote) {
		t.Fatalf("not clipped: %q", text(r))
	}
}

func TestErrors(t *testing.T) {
	tests := []struct {
		name string
		args map[string]any
		code string
		sub  string
	}{
		{"unknown command", map[string]any{"command": "undo_edit", "path": "f.txt"}, "INVALID_ARGS", "unknown command"},
		{"missing command", map[string]any{"path": "f.txt"}, "INVALID_ARGS", "command is required"},
		{"missing path", map[string]any{"command": "view"}, "INVALID_ARGS", "path is required"},
		{"view missing file", map[string]any{"command": "view", "path": "nope.txt"}, fstools.CodeFileNotFound, "file not found"},
		{"view binary", map[string]any{"command": "view", "path": "bin"}, fstools.CodeBinaryFile, "binary"},
		{"view_range on a directory", map[string]any{"command": "view", "path": ".", "view_range": []int{1, 2}}, "INVALID_ARGS", "directory"},
		{"view_range of three", map[string]any{"command": "view", "path": "f.txt", "view_range": []int{1, 2, 3}}, "INVALID_ARGS", "two integers"},
		{"view_range start 0", map[string]any{"command": "view", "path": "f.txt", "view_range": []int{0, 2}}, "INVALID_ARGS", "at least 1"},
		{"view_range backwards", map[string]any{"command": "view", "path": "f.txt", "view_range": []int{3, 2}}, "INVALID_ARGS", "at least the start"},
		{"view_range past the end", map[string]any{"command": "view", "path": "f.txt", "view_range": []int{9, 10}}, "INVALID_ARGS", "only 5 lines"},
		{"create existing file", map[string]any{"command": "create", "path": "f.txt", "file_text": "x"}, CodeFileExists, "already exists"},
		{"create existing directory", map[string]any{"command": "create", "path": ".", "file_text": "x"}, CodeFileExists, "already exists"},
		{"create without file_text", map[string]any{"command": "create", "path": "g.txt"}, "INVALID_ARGS", "`file_text` is required"},
		{"create with null file_text", map[string]any{"command": "create", "path": "g.txt", "file_text": nil}, "INVALID_ARGS", "`file_text` is required"},
		{"str_replace no match", map[string]any{"command": "str_replace", "path": "f.txt", "old_str": "six"}, fstools.CodeNoMatch, "did not appear verbatim"},
		{"str_replace not unique", map[string]any{"command": "str_replace", "path": "f.txt", "old_str": "o"}, fstools.CodeNotUnique, "in lines 1, 2, 4"},
		{"str_replace null old_str", map[string]any{"command": "str_replace", "path": "f.txt", "old_str": nil, "new_str": "x"}, "INVALID_ARGS", "`old_str` is required"},
		{"str_replace empty old_str", map[string]any{"command": "str_replace", "path": "f.txt", "old_str": ""}, "INVALID_ARGS", "must not be empty"},
		{"str_replace null new_str", map[string]any{"command": "str_replace", "path": "f.txt", "old_str": "one", "new_str": nil}, "INVALID_ARGS", "`new_str` is null"},
		{"str_replace missing file", map[string]any{"command": "str_replace", "path": "nope.txt", "old_str": "a"}, fstools.CodeFileNotFound, "file not found"},
		{"insert without insert_line", map[string]any{"command": "insert", "path": "f.txt", "new_str": "x"}, "INVALID_ARGS", "`insert_line` is required"},
		{"insert without new_str", map[string]any{"command": "insert", "path": "f.txt", "insert_line": 1}, "INVALID_ARGS", "`new_str` is required"},
		{"insert line out of range", map[string]any{"command": "insert", "path": "f.txt", "insert_line": 7, "new_str": "x"}, "INVALID_ARGS", "[0, 6]"},
		{"insert negative line", map[string]any{"command": "insert", "path": "f.txt", "insert_line": -1, "new_str": "x"}, "INVALID_ARGS", "[0, 6]"},
		{"insert_line not an integer", map[string]any{"command": "insert", "path": "f.txt", "insert_line": "2", "new_str": "x"}, "INVALID_ARGS", "insert_line must be an integer"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, Options{})
			h.write(t, "f.txt", five)
			h.write(t, "bin", "a\x00b")
			h.view(t, "f.txt")
			r := h.run(t, Name, tt.args)
			if !r.IsError || code(r) != tt.code || !strings.Contains(text(r), tt.sub) {
				t.Fatalf("got isError=%v code=%q %q; want %s containing %q", r.IsError, code(r), text(r), tt.code, tt.sub)
			}
			if got := h.content(t, "f.txt"); got != five {
				t.Fatalf("failed call changed the file: %q", got)
			}
		})
	}
}

// TestSharedTracker checks that with a shared tracker a read with the fs
// read tool counts as a view, and the fs tools accept what this tool
// showed or wrote.
func TestSharedTracker(t *testing.T) {
	h := newHarness(t, Options{})
	h.write(t, "f.txt", five)
	if r := h.run(t, fstools.NameRead, map[string]any{"file_path": "f.txt"}); r.IsError {
		t.Fatal(text(r))
	}
	if r := h.run(t, Name, map[string]any{"command": "str_replace", "path": "f.txt", "old_str": "one", "new_str": "1"}); r.IsError {
		t.Fatalf("str_replace after a read: %s", text(r))
	}
	if r := h.run(t, fstools.NameEdit, map[string]any{"file_path": "f.txt", "old_string": "two", "new_string": "2"}); r.IsError {
		t.Fatalf("edit after str_replace: %s", text(r))
	}
	h.write(t, "g.txt", "g\n")
	if r := h.run(t, Name, map[string]any{"command": "view", "path": "g.txt"}); r.IsError {
		t.Fatal(text(r))
	}
	if r := h.run(t, fstools.NameWrite, map[string]any{"file_path": "g.txt", "content": "new"}); r.IsError {
		t.Fatalf("write after view: %s", text(r))
	}
	var m meta
	r := h.run(t, Name, map[string]any{"command": "insert", "path": "g.txt", "insert_line": 1, "new_str": "more"})
	if err := json.Unmarshal(r.Meta, &m); err != nil || m.Command != "insert" || m.Path != h.path("g.txt") ||
		!strings.Contains(m.Diff, "@@ -1,1 +1,2 @@\n-new\n+new\n+more\n") {
		t.Fatalf("meta %+v %v: %s", m, err, text(r))
	}
}
