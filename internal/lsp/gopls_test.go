package lsp

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dsh-dev/dsh/internal/proc/proctest"
)

// goplsManager starts a manager over f with gopls for .go files. gopls
// is slow to load a module on a busy machine: the limits are generous
// (they bound a hang, they are not performance assertions).
func goplsManager(t *testing.T, f fixture) *Manager {
	t.Helper()
	goplsPath(t)
	m, err := New(Options{
		Workspace:      f.dir,
		Servers:        map[string]ServerConfig{".go": {Command: []string{"gopls", "serve"}, RootMarkers: []string{"go.work", "go.mod"}}},
		StartTimeout:   5 * time.Minute,
		RequestTimeout: 5 * time.Minute,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	return m
}

func do(t *testing.T, m *Manager, op, path string, line, char int) Answer {
	t.Helper()
	a, err := m.Do(context.Background(), Query{Op: op, Path: path, Line: line, Character: char})
	if err != nil {
		t.Fatalf("%s %s:%d:%d: %v", op, filepath.Base(path), line, char, err)
	}
	return a
}

func place(t *testing.T, path, text, needle string, n int) Place {
	t.Helper()
	l, c := at(t, text, needle, n)
	return Place{Path: path, Line: l, Character: c, Text: Lines(text)[l-1]}
}

func TestGopls(t *testing.T) {
	f := newFixture(t)
	m := goplsManager(t, f)
	totalDecl := place(t, f.shape, shapeSrc, "Total", 0)
	// The declaration follows "/* 𝔘é */ func ": 15 UTF-16 code units but
	// 18 bytes, so a byte/unit mix-up lands elsewhere.
	if totalDecl.Character != 16 {
		t.Fatalf("fixture: Total at character %d, want 16", totalDecl.Character)
	}
	totalUse := place(t, f.main, mainSrc, "Total", 0)

	t.Run("definition from a non-ASCII line", func(t *testing.T) {
		a := do(t, m, OpDefinition, f.main, totalUse.Line, totalUse.Character+2)
		if len(a.Places) != 1 || a.Places[0] != totalDecl {
			t.Fatalf("definition = %+v, want %+v", a.Places, totalDecl)
		}
		if a.Server != "gopls serve" || a.Path != f.main {
			t.Fatalf("answer = %+v", a)
		}
	})
	t.Run("references of a declaration after non-ASCII text", func(t *testing.T) {
		a := do(t, m, OpReferences, f.shape, totalDecl.Line, totalDecl.Character)
		want := []Place{totalUse, totalDecl} // sorted by path: cmd/ before shape/
		if len(a.Places) != 2 || a.Places[0] != want[0] || a.Places[1] != want[1] {
			t.Fatalf("references = %+v, want %+v", a.Places, want)
		}
	})
	t.Run("implementation of an interface", func(t *testing.T) {
		l, c := at(t, shapeSrc, "Shape interface", 0)
		a := do(t, m, OpImplementation, f.shape, l, c)
		want := place(t, f.shape, shapeSrc, "Square struct", 0)
		if len(a.Places) != 1 || a.Places[0] != want {
			t.Fatalf("implementation = %+v, want %+v", a.Places, want)
		}
		// And of its method, from the call through the interface.
		l, c = at(t, shapeSrc, "x.Area()", 0) // in Total
		a = do(t, m, OpImplementation, f.shape, l, c+2)
		want = place(t, f.shape, shapeSrc, "Area() float64 { return", 0)
		if len(a.Places) != 1 || a.Places[0] != want {
			t.Fatalf("implementation of Area = %+v, want %+v", a.Places, want)
		}
	})
	t.Run("hover", func(t *testing.T) {
		a := do(t, m, OpHover, f.shape, totalDecl.Line, totalDecl.Character)
		if !strings.Contains(a.Hover, "func Total(xs ...Shape) float64") {
			t.Fatalf("hover = %q", a.Hover)
		}
		a = do(t, m, OpHover, f.main, totalUse.Line, totalUse.Character-3) // on "shape."
		if !strings.Contains(a.Hover, "package shape") {
			t.Fatalf("hover on the package = %q", a.Hover)
		}
	})
	t.Run("a changed file is resynced", func(t *testing.T) {
		changed := strings.Replace(shapeSrc, "/* 𝔘é */", "// ünïcode\n\n/* 𝔘é */", 1)
		write(t, f.shape, changed)
		t.Cleanup(func() { write(t, f.shape, shapeSrc) })
		now := place(t, f.shape, changed, "Total", 0)
		// Opening the changed file sends didChange before the request.
		a := do(t, m, OpHover, f.shape, now.Line, now.Character)
		if !strings.Contains(a.Hover, "func Total") {
			t.Fatalf("hover after the change = %q", a.Hover)
		}
		a = do(t, m, OpReferences, f.shape, now.Line, now.Character)
		if len(a.Places) != 2 || a.Places[1] != now {
			t.Fatalf("references after the change = %+v, want the declaration at %+v", a.Places, now)
		}
	})
	t.Run("an open file edited on disk answers for its new text", func(t *testing.T) {
		// shape.go is open on the server (queried above); the query is
		// on main.go, so only the resync of open documents sees the edit.
		do(t, m, OpHover, f.shape, totalDecl.Line, totalDecl.Character)
		changed := strings.Replace(shapeSrc, "/* 𝔘é */", "// one\n// two\n/* 𝔘é */", 1)
		write(t, f.shape, changed)
		t.Cleanup(func() { write(t, f.shape, shapeSrc) })
		a := do(t, m, OpDefinition, f.main, totalUse.Line, totalUse.Character)
		want := place(t, f.shape, changed, "Total", 0)
		if len(a.Places) != 1 || a.Places[0] != want {
			t.Fatalf("definition = %+v, want %+v", a.Places, want)
		}
	})
	t.Run("no result is not an error", func(t *testing.T) {
		l, c := at(t, shapeSrc, "package shape", 0)
		a, err := m.Do(context.Background(), Query{Op: OpHover, Path: f.shape, Line: l, Character: c})
		if err != nil {
			var le *Error
			if !errors.As(err, &le) || le.Code != CodeRequestFailed {
				t.Fatalf("hover on a keyword = %v", err)
			}
		} else if a.Hover != "" && len(a.Places) != 0 {
			t.Fatalf("answer = %+v", a)
		}
	})

	// One server for the module, however many files were asked about.
	pids := m.Pids()
	if len(pids) != 1 {
		t.Fatalf("servers = %v, want one", pids)
	}
	m.Close()
	if !proctest.WaitExit(pids[0], time.Minute) {
		t.Fatalf("gopls (pid %d) still runs after Close", pids[0])
	}
	_, err := m.Do(context.Background(), Query{Op: OpHover, Path: f.shape, Line: 1, Character: 1})
	wantCode(t, err, CodeUnavailable)
}

func wantCode(t *testing.T, err error, code string) *Error {
	t.Helper()
	var le *Error
	if !errors.As(err, &le) || le.Code != code {
		t.Fatalf("err = %v, want code %s", err, code)
	}
	return le
}

func TestUnavailable(t *testing.T) {
	f := newFixture(t)
	write(t, filepath.Join(f.dir, "x.py"), "print(1)\n")
	m, err := New(Options{Workspace: f.dir, Servers: map[string]ServerConfig{
		".go": {Command: []string{"dsh-no-such-language-server", "--stdio"}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	le := wantCode(t, func() error {
		_, err := m.Do(context.Background(), Query{Op: OpDefinition, Path: filepath.Join(f.dir, "x.py"), Line: 1, Character: 1})
		return err
	}(), CodeUnavailable)
	if !strings.Contains(le.Message, ".py") || !strings.Contains(le.Message, "configured: .go") {
		t.Fatalf("message = %q", le.Message)
	}
	le = wantCode(t, func() error {
		_, err := m.Do(context.Background(), Query{Op: OpDefinition, Path: f.shape, Line: 1, Character: 1})
		return err
	}(), CodeUnavailable)
	if !strings.Contains(le.Message, "`dsh-no-such-language-server --stdio`") || !strings.Contains(le.Message, "not found") {
		t.Fatalf("message = %q", le.Message)
	}
}

func TestServerExitingAtStartIsUnavailable(t *testing.T) {
	f := newFixture(t)
	m, err := New(Options{Workspace: f.dir, Servers: map[string]ServerConfig{
		".go": {Command: []string{"sh", "-c", "echo no workspace here >&2; exit 3"}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	_, err = m.Do(context.Background(), Query{Op: OpHover, Path: f.shape, Line: 1, Character: 1})
	le := wantCode(t, err, CodeUnavailable)
	if !strings.Contains(le.Message, "no workspace here") || !strings.Contains(le.Message, "exit status 3") {
		t.Fatalf("message = %q", le.Message)
	}
}

func TestPositionsAndFence(t *testing.T) {
	f := newFixture(t)
	outside := filepath.Join(t.TempDir(), "o.go")
	write(t, outside, "package o\n")
	link := filepath.Join(f.dir, "link.go")
	if err := os.Symlink(outside, link); err != nil {
		t.Fatal(err)
	}
	// No server is ever started: every query fails before.
	m, err := New(Options{Workspace: f.dir, Servers: map[string]ServerConfig{".go": {Command: []string{"dsh-no-such-language-server"}}}})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	l, _ := at(t, shapeSrc, "Total", 0)
	for _, c := range []struct {
		name string
		q    Query
		code string
		msg  string
	}{
		{"line 0", Query{Path: f.shape, Line: 0, Character: 1}, CodeInvalidPosition, "has 21 line(s)"},
		{"past the end", Query{Path: f.shape, Line: 99, Character: 1}, CodeInvalidPosition, "has 21 line(s)"},
		{"character 0", Query{Path: f.shape, Line: l, Character: 0}, CodeInvalidPosition, "characters count from 1"},
		{"past the line", Query{Path: f.shape, Line: l, Character: 100}, CodeInvalidPosition, "43 UTF-16 code unit(s) long; characters count from 1 up to 44"},
		{"inside a surrogate pair", Query{Path: f.shape, Line: l, Character: 5}, CodeInvalidPosition, "use 4"},
		{"outside", Query{Path: outside, Line: 1, Character: 1}, CodeOutsideWorkspace, "outside the workspace"},
		{"symlink out", Query{Path: link, Line: 1, Character: 1}, CodeOutsideWorkspace, "outside the workspace"},
		{"missing", Query{Path: filepath.Join(f.dir, "nope.go"), Line: 1, Character: 1}, CodeFile, "does not exist"},
		{"directory", Query{Path: filepath.Join(f.dir, "shape.go.d"), Line: 1, Character: 1}, CodeFile, "does not exist"},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.q.Op = OpHover
			_, err := m.Do(context.Background(), c.q)
			le := wantCode(t, err, c.code)
			if !strings.Contains(le.Message, c.msg) {
				t.Fatalf("message = %q, want %q in it", le.Message, c.msg)
			}
		})
	}
	if err := os.Mkdir(filepath.Join(f.dir, "d.go"), 0o755); err != nil {
		t.Fatal(err)
	}
	_, err = m.Do(context.Background(), Query{Op: OpHover, Path: filepath.Join(f.dir, "d.go"), Line: 1, Character: 1})
	wantCode(t, err, CodeFile)
	if _, err := m.Do(context.Background(), Query{Op: "rename", Path: f.shape, Line: 1, Character: 1}); err == nil {
		t.Fatal("an unknown operation was accepted")
	}
}

func TestValidate(t *testing.T) {
	for _, bad := range []map[string]ServerConfig{
		{"go": {Command: []string{"gopls"}}},
		{".go": {}},
		{".go": {Command: []string{" "}}},
	} {
		if _, err := New(Options{Workspace: t.TempDir(), Servers: bad}); err == nil {
			t.Errorf("New accepted %v", bad)
		}
	}
}
