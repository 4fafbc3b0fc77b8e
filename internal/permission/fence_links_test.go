//go:build unix

package permission

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dsh-dev/dsh/internal/sandbox"
	"github.com/dsh-dev/dsh/internal/tool"
	fstools "github.com/dsh-dev/dsh/internal/tools/fs"
	"github.com/dsh-dev/dsh/internal/tools/strreplace"
)

// TestWriteFenceHardLinks runs the real file tools behind the real fence
// (sandbox.Policy.CheckWrite): a name planted in the workspace for a file
// outside it is refused by write, edit and every writing command of
// str_replace_based_edit_tool, and the outside file keeps its content;
// an ordinary file still edits, keeping its mode.
func TestWriteFenceHardLinks(t *testing.T) {
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ws, outside := filepath.Join(root, "ws"), filepath.Join(root, "outside")
	for _, d := range []string{ws, outside} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	secret := filepath.Join(outside, "authorized_keys")
	if err := os.WriteFile(secret, []byte("key one\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(secret, filepath.Join(ws, "planted.txt")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, "ok.sh"), []byte("echo one\n"), 0o750); err != nil {
		t.Fatal(err)
	}

	tracker := fstools.NewTracker()
	reg := tool.NewRegistry()
	defs := append(fstools.Tools(fstools.Options{Tracker: tracker}), strreplace.New(strreplace.Options{Tracker: tracker}))
	for _, d := range defs {
		if err := reg.Register("", d); err != nil {
			t.Fatal(err)
		}
	}
	p := tool.NewPipeline(reg)
	p.UseGuard(WriteFence(sandbox.Policy.CheckWrite, func(*tool.Call) sandbox.Policy {
		return sandbox.Policy{Mode: sandbox.WorkspaceWrite, Workspace: ws}
	}))
	run := func(name string, args map[string]any) tool.Result {
		raw, _ := json.Marshal(args)
		return p.Run(context.Background(), &tool.Call{ID: "c", Name: name, RawArguments: string(raw), Cwd: ws, SessionID: "s"})
	}

	// Reads are not fenced: the model may look at the file.
	if r := run("read", map[string]any{"file_path": "planted.txt"}); r.IsError {
		t.Fatalf("read: %+v", r.Error)
	}
	for _, c := range []struct {
		name string
		args map[string]any
	}{
		{"write", map[string]any{"file_path": "planted.txt", "content": "attacker key\n"}},
		{"edit", map[string]any{"file_path": "planted.txt", "old_string": "one", "new_string": "attacker"}},
		{strreplace.Name, map[string]any{"command": "str_replace", "path": "planted.txt", "old_str": "one", "new_str": "attacker"}},
		{strreplace.Name, map[string]any{"command": "insert", "path": "planted.txt", "insert_line": 1, "new_str": "attacker key"}},
		{strreplace.Name, map[string]any{"command": "create", "path": "planted.txt", "file_text": "attacker key\n"}},
	} {
		r := run(c.name, c.args)
		if !r.IsError || r.Error.Code != tool.CodeDenied || !strings.Contains(r.Error.Message, "the file has 2 hard links") {
			t.Errorf("%s %v: %+v, want a hard-link denial", c.name, c.args, r.Error)
		}
	}
	if b, err := os.ReadFile(secret); err != nil || string(b) != "key one\n" {
		t.Fatalf("the outside file changed: %q %v", b, err)
	}

	if r := run("read", map[string]any{"file_path": "ok.sh"}); r.IsError {
		t.Fatalf("read: %+v", r.Error)
	}
	if r := run("edit", map[string]any{"file_path": "ok.sh", "old_string": "one", "new_string": "two"}); r.IsError {
		t.Fatalf("edit of an ordinary file: %+v", r.Error)
	}
	if r := run(strreplace.Name, map[string]any{"command": "str_replace", "path": "ok.sh", "old_str": "two", "new_str": "three"}); r.IsError {
		t.Fatalf("str_replace of an ordinary file: %+v", r.Error)
	}
	fi, err := os.Stat(filepath.Join(ws, "ok.sh"))
	if err != nil || fi.Mode().Perm() != 0o750 {
		t.Fatalf("mode after edits: %v %v", fi, err)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "ok.sh")); string(b) != "echo three\n" {
		t.Fatalf("content %q", b)
	}
}
