package lsptool

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dsh-dev/dsh/internal/leakcheck"
	"github.com/dsh-dev/dsh/internal/lsp"
	"github.com/dsh-dev/dsh/internal/lsp/lsptest"
	"github.com/dsh-dev/dsh/internal/tool"
)

func TestMain(m *testing.M) { os.Exit(leakcheck.Run(m)) }

func newTool(t *testing.T, dir string, servers map[string]lsp.ServerConfig, o Options) tool.Definition {
	t.Helper()
	m, err := lsp.New(lsp.Options{Workspace: dir, Servers: servers, StartTimeout: 5 * time.Minute, RequestTimeout: 5 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	o.Manager = m
	return New(o)
}

func run(t *testing.T, def tool.Definition, cwd string, args map[string]any) (tool.Result, error) {
	t.Helper()
	raw, _ := json.Marshal(args)
	return def.Execute(context.Background(), &tool.Call{Name: Name, Arguments: raw, Cwd: cwd})
}

func TestToolAgainstGopls(t *testing.T) {
	lsptest.Gopls(t)
	mod := lsptest.NewModule(t)
	def := newTool(t, mod.Dir, map[string]lsp.ServerConfig{".go": {Command: []string{"gopls", "serve"}}}, Options{MaxResults: 1, MaxHoverChars: 10})
	if !strings.Contains(def.Description, "configured for: .go.") || !def.ConcurrencySafe(nil) || def.Timeout < 10*time.Minute {
		t.Fatalf("definition: %q safe=%v timeout=%v", def.Description, def.ConcurrencySafe(nil), def.Timeout)
	}
	l, c := lsptest.At(t, lsptest.ShapeSrc, "Total", 0)

	// Relative to the working directory, which is the shape package here.
	cwd := filepath.Dir(mod.Shape)
	res, err := run(t, def, cwd, map[string]any{"operation": "findReferences", "file_path": "shape.go", "line": l, "character": c})
	if err != nil {
		t.Fatal(err)
	}
	ml, mc := lsptest.At(t, lsptest.MainSrc, "Total", 0)
	want := fmt.Sprintf("2 references of the symbol at shape.go:%d:%d (its declaration included):\n%s:%d:%d: fmt.Println(\"Größe 𝔘:\", shape.Total(s), s.Area())\n[Showing the first 1 of 2 references; use grep to narrow them down.]",
		l, c, mod.Main, ml, mc)
	if got := res.Content[0].Text; got != want {
		t.Fatalf("references:\n%s\nwant\n%s", got, want)
	}
	var m meta
	if err := json.Unmarshal(res.Meta, &m); err != nil || m.Count != 2 || m.Shown != 1 || m.Server != "gopls serve" || m.Path != mod.Shape {
		t.Fatalf("meta = %s (%v)", res.Meta, err)
	}

	res, err = run(t, def, mod.Dir, map[string]any{"operation": "hover", "file_path": mod.Shape, "line": l, "character": c})
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Content[0].Text; !strings.HasPrefix(got, fmt.Sprintf("Hover at shape/shape.go:%d:%d:\n", l, c)) || !strings.Contains(got, "[Hover text truncated at 10 of ") {
		t.Fatalf("hover = %q", got)
	}

	il, ic := lsptest.At(t, lsptest.ShapeSrc, "Shape interface", 0)
	res, err = run(t, def, mod.Dir, map[string]any{"operation": "goToImplementation", "file_path": "shape/shape.go", "line": il, "character": ic})
	if err != nil {
		t.Fatal(err)
	}
	sl, sc := lsptest.At(t, lsptest.ShapeSrc, "Square struct", 0)
	if got, want := res.Content[0].Text, fmt.Sprintf("1 implementation of the symbol at shape/shape.go:%d:%d:\nshape/shape.go:%d:%d: type Square struct{ Side float64 }", il, ic, sl, sc); got != want {
		t.Fatalf("implementation = %q, want %q", got, want)
	}

	// A blank line has nothing to define.
	res, err = run(t, def, mod.Dir, map[string]any{"operation": "goToDefinition", "file_path": "shape/shape.go", "line": 2, "character": 1})
	if err == nil {
		if got := res.Content[0].Text; got != "No definition found for the symbol at shape/shape.go:2:1." {
			t.Fatalf("empty definition = %q", got)
		}
	} else if te, ok := err.(*tool.Error); !ok || te.Code != lsp.CodeRequestFailed {
		t.Fatalf("definition on a blank line: %v", err)
	}
}

func TestToolErrors(t *testing.T) {
	mod := lsptest.NewModule(t)
	def := newTool(t, mod.Dir, map[string]lsp.ServerConfig{".go": {Command: []string{"dsh-no-such-language-server"}}}, Options{})
	outside := filepath.Join(t.TempDir(), "o.go")
	lsptest.Write(t, outside, "package o\n")
	for _, c := range []struct {
		args map[string]any
		code string
		text string
	}{
		{map[string]any{"operation": "hover", "file_path": "shape/shape.go", "line": 1, "character": 1}, lsp.CodeUnavailable, "`dsh-no-such-language-server`"},
		{map[string]any{"operation": "hover", "file_path": "go.mod", "line": 1, "character": 1}, lsp.CodeUnavailable, "extension .mod"},
		{map[string]any{"operation": "hover", "file_path": "shape/shape.go", "line": 1, "character": 99}, lsp.CodeInvalidPosition, "character 99"},
		{map[string]any{"operation": "hover", "file_path": outside, "line": 1, "character": 1}, lsp.CodeOutsideWorkspace, "outside the workspace"},
		{map[string]any{"operation": "rename", "file_path": "shape/shape.go", "line": 1, "character": 1}, tool.CodeInvalidArgs, "operation must be one of"},
		{map[string]any{"operation": "hover", "file_path": "shape/shape.go", "line": 1}, tool.CodeInvalidArgs, "line and character are required"},
		{map[string]any{"operation": "hover", "file_path": "", "line": 1, "character": 1}, tool.CodeInvalidArgs, ""},
	} {
		_, err := run(t, def, mod.Dir, c.args)
		te, ok := err.(*tool.Error)
		if !ok || te.Code != c.code || !strings.Contains(te.Message, c.text) {
			t.Errorf("%v: err = %v, want %s with %q", c.args, err, c.code, c.text)
		}
	}
}
